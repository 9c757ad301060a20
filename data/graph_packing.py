"""`data.sequence_pairs.pack` as TensorFlow ops, for batches of word pieces inside a SavedModel.

Same layout and truncation as the original: `[CLS] A [SEP] (B [SEP])`; a pair is cut to
`max_seq_length - 3` pieces by popping the end of the longer side (B on ties), a single text to
`max_seq_length - 2`. The popping loop has a closed form: if the shorter side fits in half of the
budget it is kept whole and the longer side gets the rest; otherwise A keeps `ceil(budget / 2)`
and B `floor(budget / 2)`.
"""

import tensorflow as tf


def truncated_pair_lengths(length_a, length_b, budget):
  """Lengths `truncate_seq_pair` leaves.

  Args:
    length_a, length_b: int `[batch_size]` piece counts of A and B.
    budget: Python int, the most pieces A and B may keep together.

  Returns:
    `(kept_a, kept_b)`, int `[batch_size]` each.
  """
  shorter = tf.minimum(length_a, length_b)
  shorter_kept_whole = shorter <= budget - shorter
  a_is_shorter = length_a <= length_b
  ceil_half, floor_half = (budget + 1) // 2, budget // 2
  kept_a = tf.where(a_is_shorter, tf.where(shorter_kept_whole, length_a, ceil_half),
                    tf.where(shorter_kept_whole, budget - length_b, ceil_half))
  kept_b = tf.where(a_is_shorter, tf.where(shorter_kept_whole, budget - length_a, floor_half),
                    tf.where(shorter_kept_whole, length_b, floor_half))
  fits = length_a + length_b <= budget
  return tf.where(fits, length_a, kept_a), tf.where(fits, length_b, kept_b)


def keep_first(pieces, lengths):
  """The first `lengths[i]` items of each row of a RaggedTensor `[batch_size, (n)]`; `lengths`
  int `[batch_size]`, each at most its row's length."""
  dense = pieces.to_tensor()
  mask = tf.sequence_mask(lengths, tf.shape(dense)[1])
  return tf.ragged.boolean_mask(dense, mask)


def pack(pieces_a, pieces_b, max_seq_length, cls_id, sep_id):
  """Truncates and packs batches of word-piece ids into model inputs.

  Args:
    pieces_a: int RaggedTensor `[batch_size, (num_pieces)]` of the first texts.
    pieces_b: int RaggedTensor `[batch_size, (num_pieces)]` of the second texts, or None.
    max_seq_length: Python int.
    cls_id, sep_id: ids of `[CLS]` and `[SEP]`.

  Returns:
    dict `input_ids`, `input_mask`, `segment_ids`: int32 `[batch_size, seq_length]`, padded with
    zeros to the longest packed input of the batch (`seq_length <= max_seq_length`).
  """
  pieces_a = tf.cast(pieces_a, tf.int32)
  batch_size = pieces_a.nrows()
  cls = tf.fill([batch_size, 1], cls_id)
  sep = tf.fill([batch_size, 1], sep_id)
  if pieces_b is None:
    kept_a = tf.minimum(pieces_a.row_lengths(), max_seq_length - 2)
    parts = [cls, keep_first(pieces_a, kept_a), sep]
    segments = [0, 0, 0]
  else:
    pieces_b = tf.cast(pieces_b, tf.int32)
    kept_a, kept_b = truncated_pair_lengths(pieces_a.row_lengths(), pieces_b.row_lengths(),
                                            max_seq_length - 3)
    parts = [cls, keep_first(pieces_a, kept_a), sep, keep_first(pieces_b, kept_b), sep]
    segments = [0, 0, 0, 1, 1]
  input_ids = tf.concat(parts, axis=1)
  segment_ids = tf.concat([tf.ones_like(part) * segment for part, segment in zip(parts, segments)],
                          axis=1)
  # Every packed row holds [CLS] and [SEP], so at least 2 columns; an empty batch's
  # `to_tensor()` alone would be `[0, 0]` and break the model's [CLS] slice.
  packed = {"input_ids": input_ids.to_tensor(),
            "input_mask": tf.ones_like(input_ids).to_tensor(),
            "segment_ids": segment_ids.to_tensor()}
  missing = tf.maximum(0, 2 - tf.shape(packed["input_ids"])[1])
  return {name: tf.pad(values, [[0, 0], [0, missing]]) for name, values in packed.items()}


def pack_pairs_or_singles(pieces_a, pieces_b, is_pair, max_seq_length, cls_id, sep_id):
  """`pack` with a per-row choice: a pair where `is_pair`, else `pieces_a` alone.

  Like the lines of `extract_features.py`, where `A ||| B` is a pair and any other line a single
  text, a batch may mix both. Each row is packed exactly as `pack` packs it on its own.

  Args:
    pieces_a, pieces_b: int RaggedTensors `[batch_size, (num_pieces)]`; `pieces_b` is ignored in
      rows that are not pairs.
    is_pair: bool `[batch_size]`.
    max_seq_length, cls_id, sep_id: as `pack`.

  Returns:
    dict `input_ids`, `input_mask`, `segment_ids`: int32 `[batch_size, seq_length]`, padded to the
    longest packed row.
  """
  singles = pack(pieces_a, None, max_seq_length, cls_id, sep_id)
  pairs = pack(pieces_a, pieces_b, max_seq_length, cls_id, sep_id)
  width = tf.maximum(tf.shape(singles["input_ids"])[1], tf.shape(pairs["input_ids"])[1])

  def widen(values):
    return tf.pad(values, [[0, 0], [0, width - tf.shape(values)[1]]])

  packed = {name: tf.where(is_pair[:, tf.newaxis], widen(pairs[name]), widen(singles[name]))
            for name in singles}
  # The rows chosen may all be shorter than the wider of the two packings.
  # At least [CLS] [SEP], also for an empty batch (see `pack`).
  longest = tf.reduce_max(tf.concat([tf.reduce_sum(packed["input_mask"], axis=1), [2]], axis=0))
  return {name: values[:, :longest] for name, values in packed.items()}
