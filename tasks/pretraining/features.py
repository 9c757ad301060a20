"""The features of pretraining records (`tf.train.Example`): written by
`create_pretraining_data.py`, read by `run_pretraining.py`. What the other families' records share
lives in `data/schemas.py`.
"""

import tensorflow as tf


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq):
  """Features written by `create_pretraining_data.py`, read by `run_pretraining.py`."""
  return {
      "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
      "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }


# Features a packed record adds to the original seven (`create_pretraining_data.py
# --pack_sequences`); a record holding them is read as packed.
PACKED_PRETRAINING_FEATURES = ("position_ids", "instance_ids", "next_sentence_positions",
                               "next_sentence_weights")


def packed_predictions_per_row(max_predictions_per_seq, max_sequences_per_pack):
  """Masked-LM slots of a packed row: `max_predictions_per_seq + max_sequences_per_pack`.

  An instance of `n` tokens gets `min(P, max(1, round(n * p)))` predictions, fewer than
  `n * p + 1`; a pack of at most `k` instances and `L` tokens therefore fewer than `L * p + k`,
  that is at most `ceil(L * p) + k - 1 <= round(L * p) + k <= P + k`, since the writer requires
  `P >= round(L * p)`.
  """
  return max_predictions_per_seq + max_sequences_per_pack


def packed_pretraining_feature_spec(max_seq_length, max_predictions_per_seq,
                                    max_sequences_per_pack):
  """Features of packed pretraining records (not in the original, which did not pack).

  A row holds up to `max_sequences_per_pack` instances back to back, each its own
  `[CLS] A [SEP] B [SEP]`, then padding:

  - `input_ids`, `input_mask`, `segment_ids` `[max_seq_length]`: as unpacked records.
  - `position_ids` `[max_seq_length]`: 0, 1, ... restarting at each instance; 0 at padding.
  - `instance_ids` `[max_seq_length]`: 1 for the row's first instance, 2 for the second, ...;
    0 at padding. A token attends only to tokens of its own instance.
  - `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`
    `[packed_predictions_per_row(...)]`: every instance's predictions, positions within the row.
  - `next_sentence_positions` `[max_sequences_per_pack]`: the row position of each instance's
    `[CLS]`; `next_sentence_labels` and `next_sentence_weights` (1.0 for an instance, 0.0 for an
    empty slot) of the same length.
  """
  num_predictions = packed_predictions_per_row(max_predictions_per_seq, max_sequences_per_pack)
  spec = pretraining_feature_spec(max_seq_length, num_predictions)
  spec.update({
      "position_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "instance_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "next_sentence_positions": tf.io.FixedLenFeature([max_sequences_per_pack], tf.int64),
      "next_sentence_labels": tf.io.FixedLenFeature([max_sequences_per_pack], tf.int64),
      "next_sentence_weights": tf.io.FixedLenFeature([max_sequences_per_pack], tf.float32),
  })
  return spec
