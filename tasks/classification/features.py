"""`InputExample`s -> the TFRecords of `run_classifier.py` (`train/eval/predict.tf_record`).

The original layout: `[CLS] a [SEP] (b [SEP])`, pairs truncated to `max_seq_length - 3` by popping
the longer side's end, singles to `max_seq_length - 2`; features `input_ids`, `input_mask`,
`segment_ids`, `label_ids`, `is_real_example`. Eval and predict files are padded to whole batches
with all-zero rows whose `is_real_example` is 0, so every batch has the same size on every replica
and no metric counts the padding (the original did so on TPU only).
"""

import tensorflow as tf

from data import file_patterns
from data import record_files
from data import schemas
from data import sequence_pairs
from tasks import classifier


def label_feature(example, kind, label_to_index):
  """The `label_ids` feature of one example.

  Args:
    example: an `InputExample` (label None for unlabelled test rows: class 0, as the original's
      dummy test labels).
    kind: CLASSIFICATION, REGRESSION or MULTI_LABEL.
    label_to_index: {label: class id}.

  Raises:
    file_patterns.InputError: a label not in the label list, naming the file and line.
  """
  if kind == classifier.REGRESSION:
    return schemas.float_feature([example.label if example.label is not None else 0.0])
  labels = example.label if kind == classifier.MULTI_LABEL else [example.label]
  indices = []
  for label in labels or ():
    if label is None:
      indices.append(0)
    elif label in label_to_index:
      indices.append(label_to_index[label])
    else:
      raise file_patterns.InputError(
          f"{example.source}: label {label!r} is not in the label list {list(label_to_index)}")
  if kind == classifier.MULTI_LABEL:
    multi_hot = [0] * len(label_to_index)
    for index in indices:
      multi_hot[index] = 1
    return schemas.int64_feature(multi_hot)
  return schemas.int64_feature(indices)


def to_tf_example(example, tokenizer, max_seq_length, kind, label_to_index):
  """One `InputExample` as a `tf.train.Example` with the original's features."""
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b is not None else None
  packed = sequence_pairs.pack(tokenizer, tokenizer.tokenize(example.text_a), tokens_b,
                               max_seq_length)
  return tf.train.Example(features=tf.train.Features(feature={
      "input_ids": schemas.int64_feature(packed.input_ids),
      "input_mask": schemas.int64_feature(packed.input_mask),
      "segment_ids": schemas.int64_feature(packed.segment_ids),
      "label_ids": label_feature(example, kind, label_to_index),
      "is_real_example": schemas.int64_feature([1]),
  }))


def padding_tf_example(max_seq_length, kind, num_labels):
  """An all-zero row with `is_real_example = 0` (the original's `PaddingInputExample`)."""
  if kind == classifier.REGRESSION:
    label = schemas.float_feature([0.0])
  elif kind == classifier.MULTI_LABEL:
    label = schemas.int64_feature([0] * num_labels)
  else:
    label = schemas.int64_feature([0])
  zeros = schemas.int64_feature([0] * max_seq_length)
  return tf.train.Example(features=tf.train.Features(feature={
      "input_ids": zeros, "input_mask": zeros, "segment_ids": zeros, "label_ids": label,
      "is_real_example": schemas.int64_feature([0])}))


def classifier_feature_spec(max_seq_length, label_dtype=tf.int64, num_label_values=None):
  """Features of `run_classifier.py`'s `train/eval/predict.tf_record`.

  Args:
    max_seq_length: sequence length of the records.
    label_dtype: tf.int64 for the original's class ids; tf.float32 for regression targets (not in
      the original, which had no regression task).
    num_label_values: None for the original scalar `label_ids`; a length for multi-label records
      (an int64 multi-hot vector, not in the original).
  """
  label_shape = [] if num_label_values is None else [num_label_values]
  return {
      "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "label_ids": tf.io.FixedLenFeature(label_shape, label_dtype),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64),
  }



def feature_spec(max_seq_length, kind, num_labels):
  """The parsing spec of the records `write_records` writes for a task of this kind."""
  if kind == classifier.REGRESSION:
    return classifier_feature_spec(max_seq_length, label_dtype=tf.float32)
  if kind == classifier.MULTI_LABEL:
    return classifier_feature_spec(max_seq_length, num_label_values=num_labels)
  return classifier_feature_spec(max_seq_length)


def write_records(path, examples, tokenizer, max_seq_length, kind, label_list, batch_size=1):
  """Writes `examples` to a TFRecord file, padded with padding rows to a multiple of `batch_size`.

  The file appears under its name only when complete (written to a temporary name first).

  Args:
    path: the output file.
    examples: list of `InputExample`.
    tokenizer: a `FullTokenizer`.
    max_seq_length: length of the padded sequences.
    kind: CLASSIFICATION, REGRESSION or MULTI_LABEL.
    label_list: class names (class id = position).
    batch_size: pad the record count to a multiple of this (1: no padding, for training).

  Returns:
    `(num_real, num_padding)` rows written.

  Raises:
    file_patterns.InputError: an example's label is not in `label_list`.
  """
  label_to_index = {label: index for index, label in enumerate(label_list)}
  return record_files.write_padded_records(
      path, examples,
      lambda example: to_tf_example(example, tokenizer, max_seq_length, kind, label_to_index),
      padding_tf_example(max_seq_length, kind, len(label_list)), batch_size)
