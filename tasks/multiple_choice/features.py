"""`MultipleChoiceExample`s -> the TFRecords of `run_multiple_choice.py`.

Each choice is packed with its context as the original's sentence pairs, `[CLS] context [SEP]
choice [SEP]`, truncated by popping the longer side's end (`data.sequence_pairs`). A record holds
the N packed choices one after another: `input_ids`, `input_mask`, `segment_ids` are flat lists of
`N * max_seq_length` values, choice i at `[i * max_seq_length, (i + 1) * max_seq_length)`
(`multiple_choice_feature_spec` below parses them as `[N, max_seq_length]`), plus
`label_ids` (the right choice; 0 for unlabelled test rows) and `is_real_example`. Eval and predict
files are padded to whole batches with all-zero rows whose `is_real_example` is 0, as
`run_classifier.py`'s.
"""

import tensorflow as tf

from data import record_files
from data import schemas
from data import sequence_pairs

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")


def pack_choices(example, tokenizer, max_seq_length):
  """The packed `[CLS] context [SEP] choice [SEP]` of every choice.

  Args:
    example: a `MultipleChoiceExample`.
    tokenizer: a `FullTokenizer`.
    max_seq_length: length of each padded pair.

  Returns:
    list of `num_choices` `sequence_pairs.PackedSequence`.
  """
  context = tokenizer.tokenize(example.context)
  return [sequence_pairs.pack(tokenizer, context, tokenizer.tokenize(choice), max_seq_length)
          for choice in example.choices]


def to_tf_example(example, tokenizer, max_seq_length):
  """One example as a `tf.train.Example`: flat `[num_choices * max_seq_length]` sequence
  features, `label_ids` and `is_real_example` 1."""
  packed = pack_choices(example, tokenizer, max_seq_length)
  features = {name: schemas.int64_feature([value for pair in packed
                                           for value in getattr(pair, name)])
              for name in SEQUENCE_FEATURES}
  features["label_ids"] = schemas.int64_feature([example.label or 0])
  features["is_real_example"] = schemas.int64_feature([1])
  return tf.train.Example(features=tf.train.Features(feature=features))


def padding_tf_example(num_choices, max_seq_length):
  """An all-zero row with `is_real_example = 0`."""
  zeros = schemas.int64_feature([0] * (num_choices * max_seq_length))
  features = {name: zeros for name in SEQUENCE_FEATURES}
  features["label_ids"] = schemas.int64_feature([0])
  features["is_real_example"] = schemas.int64_feature([0])
  return tf.train.Example(features=tf.train.Features(feature=features))


def write_records(path, examples, tokenizer, max_seq_length, batch_size=1):
  """Writes `examples` (all with the same number of choices) to a TFRecord file, padded with
  padding rows to a multiple of `batch_size`; the file appears only when complete.

  Returns:
    `(num_real, num_padding)` rows written.
  """
  return record_files.write_padded_records(
      path, examples, lambda example: to_tf_example(example, tokenizer, max_seq_length),
      padding_tf_example(len(examples[0].choices), max_seq_length), batch_size)


def multiple_choice_feature_spec(num_choices, max_seq_length):
  """Features of `run_multiple_choice.py`'s records (not in the original, which had no such
  runner). Each record stores `input_ids`, `input_mask`, `segment_ids` as flat int64 lists of
  `num_choices * max_seq_length` values, choice-major (choice i at `[i * max_seq_length,
  (i + 1) * max_seq_length)`); this spec parses them as `[num_choices, max_seq_length]`.
  `label_ids` is the right choice's index, `is_real_example` 0 for batch padding rows."""
  spec = {name: tf.io.FixedLenFeature([num_choices, max_seq_length], tf.int64)
          for name in ("input_ids", "input_mask", "segment_ids")}
  spec["label_ids"] = tf.io.FixedLenFeature([], tf.int64)
  spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)
  return spec
