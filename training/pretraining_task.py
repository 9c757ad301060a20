"""The pretraining task of the engine: masked-LM + next-sentence, with the original's metrics."""

import numpy as np
import tensorflow as tf

from data import file_patterns
from modeling import losses
from modeling import pretraining_model
from training import task as task_lib


class PretrainingTask(task_lib.Task):
  """Trains `BertPretrainingModel` on `total_loss = masked_lm_loss + next_sentence_loss`.

  Args:
    bert_config: a `BertConfig`.

  Example:
    >>> from training import engine
    >>> trainer = engine.Trainer(strategy, PretrainingTask(bert_config), run_config, optimizer_fn)
  """

  metric_names = ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
                  "next_sentence_loss")

  def __init__(self, bert_config):
    self.bert_config = bert_config

  def build_model(self):
    return pretraining_model.BertPretrainingModel(self.bert_config)

  def compute_loss(self, features, outputs, training):
    total_loss, _, _ = losses.pretraining_loss(outputs, features)
    return total_loss, losses.pretraining_metrics(outputs, features)


def check_ids_within_vocab(path, vocab_size, max_records=1000, compression_type=None):
  """Fails before training if the first records hold ids the embedding table cannot look up.

  The original silently produced NaNs when `vocab_size` in the config was smaller than the
  vocabulary the data was made with (an out-of-range gather returns zeros on accelerators).

  Args:
    path: a pretraining TFRecord file.
    vocab_size: the config's `vocab_size`.
    max_records: records checked.
    compression_type: None or "GZIP".

  Raises:
    file_patterns.InputError: naming the file, the record and the id.
  """
  dataset = tf.data.TFRecordDataset(path, compression_type=compression_type).take(max_records)
  spec = {name: tf.io.VarLenFeature(tf.int64) for name in ("input_ids", "masked_lm_ids")}
  for index, serialized in enumerate(dataset):
    example = tf.io.parse_single_example(serialized, spec)
    for name, ids in example.items():
      largest = int(np.max(ids.values.numpy(), initial=0))
      if largest >= vocab_size:
        raise file_patterns.InputError(
            f"{path}: record {index} has {name} id {largest}, but the config's vocab_size is "
            f"{vocab_size}; use the bert_config.json of the vocab the data was made with")
