"""Serialized pretraining `tf.train.Example`s from arrays: the original's seven features, or the
eleven of packed rows (`packing`).

One code path writes any features, int64 or float lists: the bytes are assembled with NumPy in
the protocol-buffer wire format, 1,024 rows at once, the same bytes as
`tf.train.Example.SerializeToString(deterministic=True)` (map keys sorted; checked byte for byte
in the tests); faster than filling and serializing one reused message per row
(docs/benchmarks.md, "Measurements behind the code").

The wire format (https://protobuf.dev/programming-guides/encoding/): an `Example` is field 1
(`features`) holding a `Features`, whose map `feature` is repeated field 1 of entries
`{1: key, 2: Feature}`; a `Feature` holds `float_list` (field 2) or `int64_list` (field 3), each
a packed repeated field 1. Lengths and int64 values are varints (a negative int64 takes 10 bytes,
its two's complement); floats are little-endian float32. An empty packed list writes no field.
"""

import dataclasses
import functools

import numpy as np

from tasks.pretraining import batches

_INT64_LIST, _FLOAT_LIST = 3, 2  # `Feature` field numbers.


def _varint(value):
  """The varint bytes of a non-negative Python int."""
  out = bytearray()
  while value >= 0x80:
    out.append((value & 0x7F) | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


def _length_delimited(field_number, payload_length):
  """The tag and length that precede a `payload_length`-byte string or message field."""
  return _varint(field_number << 3 | 2) + _varint(payload_length)


def _per_length(make_bytes, lengths):
  """A block (see `_join_blocks`) of `make_bytes(length)` for each row's length.

  Args:
    make_bytes: function of a Python int, returning bytes; called once per distinct length.
    lengths: int `[num_rows]`.

  Returns:
    `(values, written, row_lengths)`: uint8 and bool `[num_rows, longest]`, each row's bytes
    left-aligned, and int64 `[num_rows]`.
  """
  distinct, row_index = np.unique(lengths, return_inverse=True)
  table = [make_bytes(length) for length in distinct.tolist()]
  width = max(map(len, table), default=0)
  values = np.zeros((len(table), width), np.uint8)
  for index, row_bytes in enumerate(table):
    values[index, :len(row_bytes)] = np.frombuffer(row_bytes, np.uint8)
  table_lengths = np.array([len(row_bytes) for row_bytes in table], np.int64)
  written = np.arange(width) < table_lengths[:, None]
  return values[row_index], written[row_index], table_lengths[row_index]


def _packed_varints(values):
  """The block (see `_join_blocks`) of each row's packed varints, from an integer array
  `[num_rows, width]`."""
  unsigned = values.astype(np.int64).view(np.uint64)
  largest = int(unsigned.max(initial=0))
  if largest < 0x80:
    # Every value below 128 (masks, segment ids, labels, short positions): one byte each.
    return _fixed_width_block(unsigned.astype(np.uint8))
  max_bytes = (largest.bit_length() + 6) // 7
  num_bytes = np.ones(unsigned.shape, np.uint8)
  for k in range(1, max_bytes):
    num_bytes += unsigned >= np.uint64(1 << (7 * k))
  groups = np.stack([
      ((unsigned >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
      | ((num_bytes > k + 1).view(np.uint8) << 7)
      for k in range(max_bytes)], axis=-1)
  # Stacked, not `np.arange(max_bytes) < num_bytes[..., None]`: broadcast along a last axis of
  # 3, NumPy's inner loop runs 3 elements at a time (docs/benchmarks.md).
  written = np.stack([num_bytes > k for k in range(max_bytes)], axis=-1)
  return (groups.reshape(len(values), -1), written.reshape(len(values), -1),
          num_bytes.sum(axis=1, dtype=np.int64))


def _fixed_width_block(values):
  """The block (see `_join_blocks`) of every byte of uint8 `values` `[num_rows, width]`."""
  return (values, np.ones(values.shape, bool),
          np.full(len(values), values.shape[1], np.int64))


@functools.lru_cache(maxsize=None)
def _feature_prefix(name, kind, payload_length):
  """The bytes of a feature's map item up to its list's values; they depend only on the values'
  length, which is the same for many rows (cached: 1,500 calls per shard before)."""
  name = name.encode("utf-8")
  values_head = _length_delimited(1, payload_length) if payload_length else b""
  feature_head = _length_delimited(kind, len(values_head) + payload_length) + values_head
  entry_head = (_length_delimited(1, len(name)) + name
                + _length_delimited(2, len(feature_head) + payload_length) + feature_head)
  return _length_delimited(1, len(entry_head) + payload_length) + entry_head


def _feature_blocks(name, kind, payload):
  """The map item of one feature for every row, as two blocks (see `_join_blocks`): the bytes
  up to the list's values, and the values."""
  return [_per_length(functools.partial(_feature_prefix, name, kind), payload[2]), payload]


def _join_blocks(blocks):
  """Each row's written bytes of every block, in order.

  A block is `(values, written, row_lengths)`: uint8 and bool arrays `[num_rows, block_width]`,
  a row's bytes being `values[row][written[row]]`, and int64 `[num_rows]`, how many they are
  (carried, not summed from `written` each time they are needed: serializing a WikiText-2 shard
  took 792 M instructions with the sums, 621 M without). Laying the blocks side by side and
  keeping the written bytes row by row concatenates them with one selection, without per-row
  work.

  Returns:
    `(data, row_lengths)`: uint8 `[total]`, the rows back to back; int64 `[num_rows]`.
  """
  written = np.concatenate([written for _, written, _ in blocks], axis=1)
  data = np.concatenate([values for values, _, _ in blocks], axis=1)[written]
  return data, sum(row_lengths for _, _, row_lengths in blocks)


# Rows assembled at once: bounds the temporaries, a few times the rows' bytes.
_BLOCK_ROWS = 1024


def serialize(batch):
  """One serialized example per row of a `batches.InstanceBatch`: the original's seven
  features.

  Args:
    batch: an `InstanceBatch` with `N` rows.

  Returns:
    list of `N` bytes, each a `tf.train.Example` as `SerializeToString(deterministic=True)`
    writes it (map keys sorted).
  """
  max_seq_length = batch.input_ids.shape[1]
  max_predictions = batch.masked_lm_positions.shape[1]

  def features(rows):
    return {
        "input_ids": batch.input_ids[rows],
        "input_mask": np.arange(max_seq_length) < batch.lengths[rows, None],
        "segment_ids": batch.segment_ids[rows],
        "masked_lm_positions": batch.masked_lm_positions[rows],
        "masked_lm_ids": batch.masked_lm_ids[rows],
        "masked_lm_weights": (np.arange(max_predictions)
                              < batch.num_predictions[rows, None]).astype(np.float32),
        "next_sentence_labels": batch.is_random_next[rows, None],
    }

  return _serialize_in_blocks(len(batch.lengths), features)


def serialize_packed(packed):
  """One serialized example per row of a `packing.PackedBatch`: its eleven features
  (`features.packed_pretraining_feature_spec`), each the field of its name.

  Args:
    packed: a `PackedBatch` with `N` rows.

  Returns:
    list of `N` bytes, each a `tf.train.Example` as `SerializeToString(deterministic=True)`
    writes it (map keys sorted).
  """
  # Not `dataclasses.asdict`, which deep-copies the arrays.
  arrays = {field.name: getattr(packed, field.name) for field in dataclasses.fields(packed)}
  return _serialize_in_blocks(len(packed.input_ids),
                              lambda rows: {name: values[rows] for name, values in arrays.items()})


def _serialize_in_blocks(num_rows, features):
  """`_serialize_rows(features(rows))` for every `_BLOCK_ROWS` rows, in order.

  Args:
    num_rows: the rows to serialize.
    features: function of a slice of rows, returning their features (see `_serialize_rows`).

  Returns:
    list of `num_rows` bytes.
  """
  serialized = []
  # On several threads with `batches.threads`.
  for rows in batches.map_in_order(
      lambda rows: _serialize_rows(features(rows)),
      ((slice(start, start + _BLOCK_ROWS),) for start in range(0, num_rows, _BLOCK_ROWS))):
    serialized.extend(rows)
  return serialized


def _serialize_rows(features):
  """One serialized example per row of the features' arrays.

  Args:
    features: dict of feature name to an array `[num_rows, width]` (every feature the same
      rows): a float array is a `float_list` (written as float32), any other (int, bool) an
      `int64_list`.

  Returns:
    list of `num_rows` bytes, each a `tf.train.Example` with map keys sorted.
  """
  blocks = []
  # Deterministic serialization orders map keys by their bytes.
  for name in sorted(features, key=lambda name: name.encode("utf-8")):
    values = features[name]
    if np.issubdtype(values.dtype, np.floating):
      blocks += _feature_blocks(name, _FLOAT_LIST, _fixed_width_block(
          values.astype("<f4").view(np.uint8).reshape(len(values), 4 * values.shape[1])))
    else:
      blocks += _feature_blocks(name, _INT64_LIST, _packed_varints(values))
  features_length = sum(row_lengths for _, _, row_lengths in blocks)
  data, row_lengths = _join_blocks(
      [_per_length(lambda length: _length_delimited(1, length), features_length), *blocks])
  data = data.tobytes()
  ends = np.cumsum(row_lengths).tolist()
  return [data[start:end] for start, end in zip([0] + ends[:-1], ends)]
