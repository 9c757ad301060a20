"""Sequence packing: best-fit decreasing packs, and the packed rows' arrays."""

import numpy as np
import pytest

from tasks.pretraining import batches
from tasks.pretraining import instances as instances_lib
from tasks.pretraining import masking as masking_lib
from tasks.pretraining import packing as packing_lib


def best_fit_reference(lengths, max_seq_length, max_sequences_per_pack):
  """The packing rule walked over every open pack for every instance (quadratic)."""
  packs, rooms = [], []
  for instance in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
    fitting = [p for p in range(len(packs))
               if len(packs[p]) < max_sequences_per_pack and rooms[p] >= lengths[instance]]
    if fitting:
      pack = min(fitting, key=lambda p: (rooms[p], p))
    else:
      pack = len(packs)
      packs.append([])
      rooms.append(max_seq_length)
    packs[pack].append(instance)
    rooms[pack] -= lengths[instance]
  return [members + [-1] * (max_sequences_per_pack - len(members)) for members in packs]


@pytest.mark.parametrize("lengths, max_seq_length, k, expected", [
    # 12 opens pack 0 (room 8), 10 pack 1 (room 10), 9 fits only pack 1 (room 1 left); the 1
    # then goes to the least room, pack 1, where first fit would take pack 0.
    ([9, 12, 1, 10], 20, 3, [[1, -1, -1], [3, 0, 2]]),
    # As above with a 7, which leaves pack 0 room 1 too: the 1 goes to the earliest opened of
    # the two packs with room 1, though pack 1 got there first.
    ([9, 12, 1, 10, 7], 20, 3, [[1, 4, 2], [3, 0, -1]]),
    # Equal lengths keep their order; a pack of k instances takes no more, room or not.
    ([1] * 7, 10, 3, [[0, 1, 2], [3, 4, 5], [6, -1, -1]]),
    ([6, 4, 3, 3, 2, 7, 1, 5], 10, 3, [[5, 2, -1], [0, 1, -1], [7, 3, 4], [6, -1, -1]]),
    # A full-length instance fills its pack; k = 1 packs nothing together.
    ([10, 2, 3], 10, 1, [[0], [2], [1]]),
    ([], 10, 3, np.zeros((0, 3), np.int64)),
])
def test_best_fit_decreasing_on_hand_made_lengths(lengths, max_seq_length, k, expected):
  packs = packing_lib.choose_packs(lengths, max_seq_length, k)
  assert packs.dtype == np.int64 and packs.shape == np.shape(expected)
  np.testing.assert_array_equal(packs, expected)
  np.testing.assert_array_equal(packs, np.reshape(
      best_fit_reference(lengths, max_seq_length, k), (-1, k)))


@pytest.mark.parametrize("max_seq_length, k", [(128, 3), (512, 3), (128, 1), (64, 8)])
def test_packs_hold_every_instance_once_within_the_limits(max_seq_length, k):
  rng = np.random.default_rng(max_seq_length + k)
  # As pretraining instances: most near full length, a tail of short ones.
  lengths = np.where(rng.random(3000) < 0.7, rng.integers(max_seq_length - 10, max_seq_length + 1,
                                                           3000),
                     rng.integers(5, max_seq_length + 1, 3000))
  packs = packing_lib.choose_packs(lengths, max_seq_length, k)
  filled = packs >= 0
  assert sorted(packs[filled].tolist()) == list(range(len(lengths)))
  assert (filled[:, 0]).all() and (filled[:, :-1] >= filled[:, 1:]).all()  # slots fill in order
  assert (np.where(filled, lengths[packs], 0).sum(axis=1) <= max_seq_length).all()
  assert packs.tolist() == best_fit_reference(lengths.tolist(), max_seq_length, k)


@pytest.mark.parametrize("lengths, max_seq_length, k", [
    ([3, 11], 10, 2), ([3, 0], 10, 2), ([3], 10, 0)])
def test_impossible_packing_raises(lengths, max_seq_length, k):
  with pytest.raises(ValueError):
    packing_lib.choose_packs(lengths, max_seq_length, k)


def instance(ids, segment_ids, positions, is_random_next):
  ids = np.array(ids)
  return instances_lib.TrainingInstance(
      input_ids=ids.tolist(), segment_ids=segment_ids, is_random_next=is_random_next,
      masked_lm_positions=positions, masked_lm_ids=(ids[positions] + 100).tolist(),
      masking_actions=[instances_lib.MASK] * len(positions), is_short_target=False,
      is_single_segment=False)


def test_layout_of_hand_made_packs():
  batch = batches.from_instances([
      instance([2, 10, 3, 11, 3], [0, 0, 0, 1, 1], [1], True),
      instance([2, 12, 13, 3, 14, 3], [0, 0, 0, 0, 1, 1], [2, 4], False),
      instance([2, 15, 3, 16, 3], [0, 0, 0, 1, 1], [3], True),
  ], max_seq_length=12, max_predictions_per_seq=3)
  packed = packing_lib.layout(batch, np.array([[1, 0], [2, -1]]))
  expected = {
      "input_ids": [[2, 12, 13, 3, 14, 3, 2, 10, 3, 11, 3, 0], [2, 15, 3, 16, 3] + [0] * 7],
      "input_mask": [[1] * 11 + [0], [1] * 5 + [0] * 7],
      "segment_ids": [[0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1] + [0] * 7],
      "position_ids": [[0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 0], [0, 1, 2, 3, 4] + [0] * 7],
      "instance_ids": [[1] * 6 + [2] * 5 + [0], [1] * 5 + [0] * 7],
      # Predictions 3 + 2 wide: the second instance's position 1 is row position 6 + 1.
      "masked_lm_positions": [[2, 4, 7, 0, 0], [3, 0, 0, 0, 0]],
      "masked_lm_ids": [[113, 114, 110, 0, 0], [116, 0, 0, 0, 0]],
      "masked_lm_weights": [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0]],
      "next_sentence_positions": [[0, 6], [0, 0]],
      "next_sentence_labels": [[0, 1], [1, 0]],
      "next_sentence_weights": [[1, 1], [1, 0]],
  }
  for name, values in expected.items():
    array = getattr(packed, name)
    assert array.dtype == (np.float32 if name.endswith("weights") else np.int64), name
    np.testing.assert_array_equal(array, values, err_msg=name)


def layout_reference(batch, packs):
  """`packing.layout`, one instance at a time."""
  num_packs, k = packs.shape
  max_seq_length = batch.input_ids.shape[1]
  slots = batch.masked_lm_positions.shape[1] + k
  rows = {name: np.zeros((num_packs, max_seq_length), np.int64) for name in (
      "input_ids", "input_mask", "segment_ids", "position_ids", "instance_ids")}
  rows.update({name: np.zeros((num_packs, slots), np.int64)
               for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")})
  rows.update({name: np.zeros((num_packs, k), np.int64) for name in (
      "next_sentence_positions", "next_sentence_labels", "next_sentence_weights")})
  for row, members in enumerate(packs):
    start = predicted = 0
    for slot, index in enumerate(members[members >= 0]):
      length, count = batch.lengths[index], batch.num_predictions[index]
      tokens, predictions = slice(start, start + length), slice(predicted, predicted + count)
      rows["input_ids"][row, tokens] = batch.input_ids[index, :length]
      rows["input_mask"][row, tokens] = 1
      rows["segment_ids"][row, tokens] = batch.segment_ids[index, :length]
      rows["position_ids"][row, tokens] = np.arange(length)
      rows["instance_ids"][row, tokens] = slot + 1
      rows["masked_lm_positions"][row, predictions] = (batch.masked_lm_positions[index, :count]
                                                       + start)
      rows["masked_lm_ids"][row, predictions] = batch.masked_lm_ids[index, :count]
      rows["masked_lm_weights"][row, predictions] = 1
      rows["next_sentence_positions"][row, slot] = start
      rows["next_sentence_labels"][row, slot] = batch.is_random_next[index]
      rows["next_sentence_weights"][row, slot] = 1
      start += length
      predicted += count
  return rows


def random_batch(rng, num_instances, max_seq_length, max_predictions):
  """Instances of random ids and lengths, each with 1 or 2 (sorted, distinct) predictions."""
  instances = []
  for _ in range(num_instances):
    length = int(rng.integers(5, max_seq_length + 1))
    instances.append(instance(
        [2] + rng.integers(5, 1000, length - 2).tolist() + [3], [0] * length,
        np.sort(rng.choice(np.arange(1, length - 1), rng.integers(1, 3), replace=False)).tolist(),
        bool(rng.integers(2))))
  return batches.from_instances(instances, max_seq_length, max_predictions)


def test_pack_lays_out_the_chosen_packs_in_a_drawn_order():
  batch = random_batch(np.random.default_rng(0), 500, 64, 4)
  packed = packing_lib.pack(batch, 3, packing_lib.seeded_generator(12345, 0))
  packs = packing_lib.choose_packs(batch.lengths, 64, 3)
  order = packing_lib.seeded_generator(12345, 0).permutation(len(packs))
  for name, values in layout_reference(batch, packs[order]).items():
    np.testing.assert_array_equal(getattr(packed, name), values, err_msg=name)
  # Not the order the packs were made in, longest instances first.
  lengths = packed.input_mask.sum(axis=1)
  assert not (np.diff(lengths) <= 0).all() and (order != np.arange(len(packs))).any()


def test_too_many_predictions_for_the_row_raise():
  # Three instances of 3 predictions in 3 + 3 slots: possible only when the writer's check of
  # max_predictions_per_seq was bypassed.
  batch = batches.from_instances(
      [instance([2, 10, 11, 3, 12, 13, 3], [0] * 7, [1, 2, 4], False)] * 3, 21, 3)
  with pytest.raises(ValueError, match="9 predictions, more than max_predictions_per_seq"):
    packing_lib.layout(batch, np.array([[0, 1, 2]]))


def test_pack_generator_is_not_the_masking_generator():
  packing = packing_lib.seeded_generator(12345, 3).random(4)
  masking = next(masking_lib.block_generators(12345, 3)).random(4)
  assert not np.isin(packing, masking).any()
