"""The pretraining examples written with NumPy are protobuf's own bytes."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tasks.pretraining import batches
from tasks.pretraining import examples
from tasks.pretraining import packing


def protobuf_bytes(batch):
  """Each row built as a `tf.train.Example` and serialized by protobuf (keys sorted)."""
  max_seq_length = batch.input_ids.shape[1]
  max_predictions = batch.masked_lm_positions.shape[1]

  def int64s(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

  serialized = []
  for row, (length, count) in enumerate(zip(batch.lengths, batch.num_predictions)):
    weights = [1.0] * count + [0.0] * (max_predictions - count)
    example = tf.train.Example(features=tf.train.Features(feature={
        "input_ids": int64s(batch.input_ids[row]),
        "input_mask": int64s([1] * length + [0] * (max_seq_length - length)),
        "segment_ids": int64s(batch.segment_ids[row]),
        "masked_lm_positions": int64s(batch.masked_lm_positions[row]),
        "masked_lm_ids": int64s(batch.masked_lm_ids[row]),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=weights)),
        "next_sentence_labels": int64s([batch.is_random_next[row]]),
    }))
    serialized.append(example.SerializeToString(deterministic=True))
  return serialized


def random_batch(rng, num_rows, max_seq_length, max_predictions, largest_id):
  lengths = rng.integers(min(5, max_seq_length), max_seq_length + 1, num_rows)
  num_predictions = rng.integers(0, max_predictions + 1, num_rows)
  return batches.InstanceBatch(
      input_ids=rng.integers(0, largest_id, (num_rows, max_seq_length)),
      segment_ids=rng.integers(0, 2, (num_rows, max_seq_length)),
      lengths=lengths,
      is_random_next=rng.integers(0, 2, num_rows).astype(bool),
      is_single_segment=np.zeros(num_rows, bool),
      masked_lm_positions=rng.integers(0, max_seq_length, (num_rows, max_predictions)),
      masked_lm_ids=rng.integers(0, largest_id, (num_rows, max_predictions)),
      masked_lm_actions=np.zeros((num_rows, max_predictions), np.int8),
      num_predictions=num_predictions)


@pytest.mark.parametrize("max_seq_length,max_predictions,largest_id", [
    (128, 20, 30522),   # BERT's vocab: 1- to 3-byte varints.
    (16, 3, 100),       # every value one byte.
    (512, 80, 2 ** 40),  # 2-byte positions, up to 6-byte ids.
    (8, 0, 2 ** 62),    # no predictions: empty lists write no field.
])
def test_bytes_equal_protobufs(max_seq_length, max_predictions, largest_id):
  rng = np.random.default_rng(max_seq_length)
  batch = random_batch(rng, 200, max_seq_length, max_predictions, largest_id)
  # Varint boundaries, and negative int64s (ten bytes each).
  batch.input_ids[0, :6] = [0, 127, 128, 16383, 16384, 2 ** 21]
  if largest_id > 2 ** 32:
    batch.input_ids[1, :3] = [-1, -(2 ** 63), 2 ** 63 - 1]
  serialized = examples.serialize(batch)
  expected = protobuf_bytes(batch)
  assert len(serialized) == len(expected) == 200
  for row, (ours, theirs) in enumerate(zip(serialized, expected)):
    assert ours == theirs, row


def test_no_rows_give_no_examples():
  batch = random_batch(np.random.default_rng(0), 0, 16, 3, 100)
  assert examples.serialize(batch) == []


def random_packed_batch(rng, num_rows, max_seq_length, max_predictions, k, largest_id):
  """A `PackedBatch` of random values (the serializer does not look at what they mean)."""
  shapes = {"input_ids": max_seq_length, "input_mask": max_seq_length,
            "segment_ids": max_seq_length, "position_ids": max_seq_length,
            "instance_ids": max_seq_length, "masked_lm_positions": max_predictions + k,
            "masked_lm_ids": max_predictions + k, "next_sentence_positions": k,
            "next_sentence_labels": k}
  arrays = {name: rng.integers(0, largest_id if name.endswith("_ids") else max_seq_length,
                               (num_rows, width))
            for name, width in shapes.items()}
  arrays["masked_lm_weights"] = rng.random((num_rows, max_predictions + k)).astype(np.float32)
  arrays["next_sentence_weights"] = rng.integers(0, 2, (num_rows, k)).astype(np.float32)
  return packing.PackedBatch(**arrays)


@pytest.mark.parametrize("max_seq_length,max_predictions,k,largest_id", [
    (128, 20, 3, 30522),
    (512, 77, 4, 2 ** 40),
    (16, 3, 1, 100),
])
def test_packed_bytes_equal_protobufs(max_seq_length, max_predictions, k, largest_id):
  rng = np.random.default_rng(max_seq_length)
  packed = random_packed_batch(rng, 1500, max_seq_length, max_predictions, k, largest_id)
  packed.input_ids[0, :3] = [-1, 2 ** 63 - 1, 128]
  expected = []
  for row in range(1500):
    feature = {}
    for field in dataclasses.fields(packed):
      values = getattr(packed, field.name)[row]
      feature[field.name] = (
          tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist()))
          if values.dtype == np.float32 else
          tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist())))
    expected.append(tf.train.Example(features=tf.train.Features(feature=feature))
                    .SerializeToString(deterministic=True))
  serialized = examples.serialize_packed(packed)
  assert len(serialized) == 1500  # two blocks of rows
  for row, (ours, theirs) in enumerate(zip(serialized, expected)):
    assert ours == theirs, row
