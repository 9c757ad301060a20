"""The pretraining task of the engine: masked-LM + next-sentence, with the original's metrics."""

import dataclasses

import numpy as np
import tensorflow as tf

from base import errors
from data import file_patterns
from modeling import losses
from modeling import pretraining_model
from tasks.pretraining import features as features_lib
from training import input_pipeline
from training import task as task_lib


@dataclasses.dataclass(frozen=True)
class RecordLayout:
  """The shape of pretraining records, read from a record's features.

  Attributes:
    max_seq_length: length of `input_ids`.
    num_predictions: length of `masked_lm_positions` (`max_predictions_per_seq`, or
      `features.packed_predictions_per_row` of it for packed records).
    max_sequences_per_pack: length of `next_sentence_labels` of packed records; None unpacked.
  """
  max_seq_length: int
  num_predictions: int
  max_sequences_per_pack: int | None

  @property
  def packed(self):
    return self.max_sequences_per_pack is not None

  def feature_spec(self):
    """The `features` spec of these records."""
    if not self.packed:
      return features_lib.pretraining_feature_spec(self.max_seq_length, self.num_predictions)
    return features_lib.packed_pretraining_feature_spec(
        self.max_seq_length, self.num_predictions - self.max_sequences_per_pack,
        self.max_sequences_per_pack)


def read_record_layout(paths, compression_type=None):
  """The `RecordLayout` of the first record of the first of `paths` that holds one.

  Returns:
    `(RecordLayout, path)`, or `(None, None)` when no file holds a record (which
    `input_pipeline.validate_first_records` reports).

  Raises:
    file_patterns.InputError: the record lacks `input_ids` or `masked_lm_positions`.
  """
  for path in paths:
    example = input_pipeline.read_first_example(path, compression_type)
    if example is None:
      continue
    features = example.features.feature

    def length(name):
      if name not in features:
        raise file_patterns.InputError(
            f"{path}: first record has no feature {name!r}; not a pretraining record "
            f"(its features: {sorted(features)})")
      return len(features[name].int64_list.value)

    packed = all(name in features for name in features_lib.PACKED_PRETRAINING_FEATURES)
    return RecordLayout(length("input_ids"), length("masked_lm_positions"),
                        length("next_sentence_labels") if packed else None), path
  return None, None


def check_record_layout(layout, path, max_seq_length, max_predictions_per_seq,
                        max_sequences_per_pack=None):
  """Raises `errors.UsageError` if the records at `path` were not made for the run's flags.

  Args:
    layout: the records' `RecordLayout`.
    path: the file it was read from (named in the error).
    max_seq_length, max_predictions_per_seq: the run's flags of those names.
    max_sequences_per_pack: the most instances a packed row may hold, or None for any.
  """
  if layout.max_seq_length != max_seq_length:
    raise errors.UsageError(
        f"{path}: records of max_seq_length {layout.max_seq_length} (length of input_ids), but "
        f"--max_seq_length={max_seq_length}")
  if layout.packed and max_sequences_per_pack is not None and (
      layout.max_sequences_per_pack > max_sequences_per_pack):
    raise errors.UsageError(
        f"{path}: packed records of up to {layout.max_sequences_per_pack} instances per row, more "
        f"than --max_sequences_per_pack={max_sequences_per_pack}")
  expected = (features_lib.packed_predictions_per_row(max_predictions_per_seq,
                                                 layout.max_sequences_per_pack)
              if layout.packed else max_predictions_per_seq)
  if layout.num_predictions != expected:
    made_with = layout.num_predictions - (layout.max_sequences_per_pack or 0)
    raise errors.UsageError(
        f"{path}: records made with --max_predictions_per_seq={made_with} "
        f"({layout.num_predictions} masked_lm_positions"
        + (f" for packs of up to {layout.max_sequences_per_pack} instances" if layout.packed
           else "") + f"), but --max_predictions_per_seq={max_predictions_per_seq}")


def as_packed_rows(features):
  """An unpacked example as a packed row holding one instance, for a packed model.

  Args:
    features: dict of one parsed unpacked example (`features.pretraining_feature_spec`).

  Returns:
    the dict with `position_ids` (0, 1, ... on the tokens, 0 at padding), `instance_ids` (the
    input mask), `next_sentence_positions` `[0]` and `next_sentence_weights` `[1.0]` added. A
    packed model gives its tokens the outputs an unpacked model gives.
  """
  input_mask = features["input_mask"]
  return dict(
      features,
      position_ids=tf.range(tf.shape(input_mask)[-1], dtype=input_mask.dtype) * input_mask,
      instance_ids=input_mask,
      next_sentence_positions=tf.zeros([1], tf.int32),
      next_sentence_weights=tf.ones([1], tf.float32))


class PretrainingTask(task_lib.Task):
  """Trains `BertPretrainingModel` on `total_loss = masked_lm_loss + next_sentence_loss`.

  Args:
    bert_config: a `BertConfig`.
    packed: train on packed rows (`RecordLayout.packed`); see `BertPretrainingModel`.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import optimization
    >>> from tasks.pretraining import task as pretraining_task
    >>> from training import engine
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> task = pretraining_task.PretrainingTask(config)
    >>> run_config = engine.RunConfig(output_dir="output", num_train_steps=10)
    >>> trainer = engine.Trainer(tf.distribute.get_strategy(), task, run_config,
    ...                          lambda: optimization.create_optimizer(1e-4, 10, 1))
  """

  metric_names = ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                  "next_sentence_loss")

  def __init__(self, bert_config, packed=False):
    self.bert_config = bert_config
    self.packed = packed

  def build_model(self):
    return pretraining_model.BertPretrainingModel(self.bert_config, packed=self.packed,
                                                  last_layer_at_predictions=True)

  def compute_loss(self, features, outputs, training):
    total_loss, _, _ = losses.pretraining_loss(outputs, features)
    return total_loss, losses.pretraining_metrics(outputs, features)


def check_ids_within_config(path, bert_config, max_records=1000, compression_type=None):
  """Fails before training if the first records hold ids the embedding tables cannot look up.

  The original silently produced NaNs when `vocab_size` in the config was smaller than the
  vocabulary the data was made with (an out-of-range gather returns zeros on accelerators); the
  same holds for segment ids beyond `type_vocab_size`.

  Args:
    path: a pretraining TFRecord file.
    bert_config: the model's `BertConfig` (`vocab_size`, `type_vocab_size`).
    max_records: records checked.
    compression_type: None or "GZIP".

  Raises:
    file_patterns.InputError: naming the file, the record and the id.
  """
  limits = {"input_ids": ("vocab_size", bert_config.vocab_size,
                          "the bert_config.json of the vocab the data was made with"),
            "masked_lm_ids": ("vocab_size", bert_config.vocab_size,
                              "the bert_config.json of the vocab the data was made with"),
            "segment_ids": ("type_vocab_size", bert_config.type_vocab_size,
                            "a bert_config.json with type_vocab_size 2 or more")}
  dataset = tf.data.TFRecordDataset(path, compression_type=compression_type).take(max_records)
  spec = {name: tf.io.VarLenFeature(tf.int64) for name in limits}
  for index, serialized in enumerate(dataset):
    example = tf.io.parse_single_example(serialized, spec)
    for name, ids in example.items():
      largest = int(np.max(ids.values.numpy(), initial=0))
      key, limit, remedy = limits[name]
      if largest >= limit:
        raise file_patterns.InputError(
            f"{path}: record {index} has {name} id {largest}, but the config's {key} is "
            f"{limit}; use {remedy}")
