"""Sequence packing: several pretraining instances share one `max_seq_length` row.

Instances shorter than `max_seq_length` (short targets, documents' ends), each padded to a
whole row, spend the rest of it on padding. Packing (Krell et al. 2021, "Efficient Sequence
Packing without Cross-contamination") puts up to `max_sequences_per_pack` instances back to back
in one row, each still its own `[CLS] A [SEP] B [SEP]`, with its own positions and an instance
number that keeps attention within it (`features.packed_pretraining_feature_spec`).

A shard's packs are chosen by best-fit decreasing with at most `max_sequences_per_pack`
instances per pack, as the paper's shortest-pack-first histogram packing: longest instance
first, each into the open pack with the least room left that still fits it (`choose_packs`;
its cost in docs/benchmarks.md). The packs are then
shuffled, so that the records' order does not follow length, and laid out as the records' arrays
(`layout`). Instances are packed after masking and are not changed: un-packing a row gives them
back.
"""

import dataclasses
import heapq

import numpy as np


@dataclasses.dataclass
class PackedBatch:
  """Packed rows, each field the record feature of its name (`features.packed_pretraining_
  feature_spec`). L is `max_seq_length`, k `max_sequences_per_pack`, P `max_predictions_per_seq`.

  Attributes:
    input_ids: int64 `[num_packs, L]`, the pack's instances back to back (masked), then 0.
    input_mask: int64 `[num_packs, L]`, 1 on the instances' tokens, 0 at padding.
    segment_ids: int64 `[num_packs, L]`, each instance's own, 0 at padding.
    position_ids: int64 `[num_packs, L]`, 0, 1, ... within each instance, 0 at padding.
    instance_ids: int64 `[num_packs, L]`, 1 on the row's first instance, 2 on its second, ...,
      0 at padding.
    masked_lm_positions: int64 `[num_packs, P + k]`, every instance's predicted positions (each
      instance's sorted) in row order, offset by the instance's start in the row; then 0.
    masked_lm_ids: int64 `[num_packs, P + k]`, the ids before masking at those positions; then 0.
    masked_lm_weights: float32 `[num_packs, P + k]`, 1.0 for a prediction, 0.0 after.
    next_sentence_positions: int64 `[num_packs, k]`, the row position of each instance's
      `[CLS]`; 0 in empty slots.
    next_sentence_labels: int64 `[num_packs, k]`, each instance's `is_random_next`; 0 in empty
      slots.
    next_sentence_weights: float32 `[num_packs, k]`, 1.0 for an instance, 0.0 in empty slots.
  """
  input_ids: np.ndarray
  input_mask: np.ndarray
  segment_ids: np.ndarray
  position_ids: np.ndarray
  instance_ids: np.ndarray
  masked_lm_positions: np.ndarray
  masked_lm_ids: np.ndarray
  masked_lm_weights: np.ndarray
  next_sentence_positions: np.ndarray
  next_sentence_labels: np.ndarray
  next_sentence_weights: np.ndarray


def choose_packs(lengths, max_seq_length, max_sequences_per_pack):
  """Which instances share each row: best-fit decreasing, at most `max_sequences_per_pack` each.

  The instances go longest first (equal lengths in their order); each goes into the open pack
  (one holding fewer than `max_sequences_per_pack` instances) with the least room left that
  still fits it, the earliest opened of those, else it opens a new pack.

  Args:
    lengths: int `[num_instances]`, each in `[1, max_seq_length]`.
    max_seq_length: the tokens of a row.
    max_sequences_per_pack: the most instances of a pack, at least 1.

  Returns:
    int64 `[num_packs, max_sequences_per_pack]`: each pack's instance indices in the order they
    joined it, then -1 in empty slots; packs in the order they were opened.

  >>> from tasks.pretraining import packing
  >>> packing.choose_packs([3, 8, 5, 2, 2], max_seq_length=10, max_sequences_per_pack=2)
  array([[ 1,  3],
         [ 2,  0],
         [ 4, -1]])
  """
  lengths = np.asarray(lengths, np.int64)
  if max_sequences_per_pack < 1:
    raise ValueError(f"max_sequences_per_pack={max_sequences_per_pack}: must be at least 1")
  if lengths.size and not 1 <= lengths.min() <= lengths.max() <= max_seq_length:
    raise ValueError(f"lengths must be in [1, {max_seq_length}], not in "
                     f"[{lengths.min()}, {lengths.max()}]")
  # The open packs by room left: per room, a heap of pack numbers (earliest opened on top) and
  # their count, so that the least fitting room is one `flatnonzero` over at most
  # `max_seq_length + 1` counts instead of a walk over the open packs (thousands per shard).
  open_packs = [[] for _ in range(max_seq_length + 1)]
  num_open = np.zeros(max_seq_length + 1, np.int64)
  packs = []
  for instance in np.argsort(-lengths, kind="stable").tolist():
    length = int(lengths[instance])
    fitting = np.flatnonzero(num_open[length:])
    if fitting.size:
      room = length + int(fitting[0])
      pack = heapq.heappop(open_packs[room])
      num_open[room] -= 1
    else:
      room, pack = max_seq_length, len(packs)
      packs.append([])
    packs[pack].append(instance)
    room -= length
    if len(packs[pack]) < max_sequences_per_pack and room:
      heapq.heappush(open_packs[room], pack)
      num_open[room] += 1
  return np.array([members + [-1] * (max_sequences_per_pack - len(members))
                   for members in packs], np.int64).reshape(len(packs), max_sequences_per_pack)


def seeded_generator(random_seed, shard_index):
  """The generator that orders one shard's packs, from (random_seed, shard_index); its draws
  are not the masking generators' (`masking.block_generators`)."""
  # A spawn key, not a third entropy word: SeedSequence pads entropy with zeros and splits a
  # seed of 2**32 or more into two words, so `[seed, shard, 1]` is also the entropy
  # `[seed + shard * 2**32, 1]`. A spawn key follows four words of entropy; masking's keys are
  # `(0, block)`.
  return np.random.Generator(np.random.PCG64(
      np.random.SeedSequence([random_seed % 2 ** 64, shard_index], spawn_key=(1,))))


def pack(batch, max_sequences_per_pack, generator):
  """A shard's instances packed (`choose_packs`), the packs in a random order (`layout`).

  Args:
    batch: a masked `batches.InstanceBatch`.
    max_sequences_per_pack: the most instances of a row.
    generator: a `np.random.Generator` (`seeded_generator`), draws the packs' order.

  Returns:
    a `PackedBatch`.
  """
  packs = choose_packs(batch.lengths, batch.input_ids.shape[1], max_sequences_per_pack)
  return layout(batch, packs[generator.permutation(len(packs))])


def layout(batch, packs):
  """The records' arrays of the given packs.

  Args:
    batch: a masked `batches.InstanceBatch` `[num_instances, L]`, `[num_instances, P]`.
    packs: int `[num_packs, k]`, instance indices of each row in their order there, -1 in empty
      slots after them (`choose_packs`); the instances of a row at most L tokens together.

  Returns:
    a `PackedBatch` with `num_packs` rows, predictions `P + k` wide.

  Raises:
    ValueError: a row's predictions outnumber `P + k`, which happens only with P below
      `round(L * masked_lm_prob)` (see `features.packed_predictions_per_row`).
  """
  num_packs, max_sequences_per_pack = packs.shape
  max_seq_length = batch.input_ids.shape[1]
  max_predictions = batch.masked_lm_positions.shape[1]
  num_slots = max_predictions + max_sequences_per_pack
  filled = packs >= 0
  members = np.where(filled, packs, 0)
  lengths = np.where(filled, batch.lengths[members], 0)
  starts = np.cumsum(lengths, axis=1) - lengths
  row_predictions = np.where(filled, batch.num_predictions[members], 0).sum(axis=1)
  if (row_predictions > num_slots).any():
    raise ValueError(f"a pack holds {row_predictions.max()} predictions, more than "
                     f"max_predictions_per_seq + max_sequences_per_pack = {num_slots}")
  # The instances in row-major order of the packs: their real tokens (and predictions), taken
  # row by row, are the packed rows' real tokens (and predictions) in the same order, so each
  # feature is one boolean-mask gather and one boolean-mask assignment.
  order = packs[filled]
  instance_lengths = batch.lengths[order]
  tokens = np.arange(max_seq_length) < instance_lengths[:, None]
  row_tokens = np.arange(max_seq_length) < lengths.sum(axis=1)[:, None]
  predictions = np.arange(max_predictions) < batch.num_predictions[order][:, None]
  row_slots = np.arange(num_slots) < row_predictions[:, None]

  def in_rows(values, mask, width):
    rows = np.zeros((num_packs, width), np.int64)
    rows[mask] = values
    return rows

  offset_positions = batch.masked_lm_positions[order] + starts[filled][:, None]
  return PackedBatch(
      input_ids=in_rows(batch.input_ids[order][tokens], row_tokens, max_seq_length),
      input_mask=row_tokens.astype(np.int64),
      segment_ids=in_rows(batch.segment_ids[order][tokens], row_tokens, max_seq_length),
      position_ids=in_rows(np.nonzero(tokens)[1], row_tokens, max_seq_length),
      instance_ids=in_rows(np.repeat(np.nonzero(filled)[1] + 1, instance_lengths), row_tokens,
                           max_seq_length),
      masked_lm_positions=in_rows(offset_positions[predictions], row_slots, num_slots),
      masked_lm_ids=in_rows(batch.masked_lm_ids[order][predictions], row_slots, num_slots),
      masked_lm_weights=row_slots.astype(np.float32),
      next_sentence_positions=np.where(filled, starts, 0),
      next_sentence_labels=np.where(filled, batch.is_random_next[members], 0).astype(np.int64),
      next_sentence_weights=filled.astype(np.float32))
