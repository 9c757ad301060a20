"""The fine-tuning task of `run_ner.py`: one label per word, on its first word piece."""

import tensorflow as tf

from modeling import classifier_model
from training import task as task_lib


def label_weights(features):
  """1.0 where a label applies (`label_ids >= 0` on a real token), else 0.0; `[batch, seq]`."""
  return (tf.cast(features["label_ids"] >= 0, tf.float32)
          * tf.cast(features["input_mask"], tf.float32))


def per_token_loss(logits, features):
  """Softmax cross-entropy of every position, 0 where no label applies.

  Args:
    logits: float32 `[batch_size, seq_length, num_labels]`.
    features: dict with `label_ids` and `input_mask` int `[batch_size, seq_length]`.

  Returns:
    `(losses, weights)`, float32 `[batch_size, seq_length]` each.
  """
  weights = label_weights(features)
  labels = tf.maximum(tf.cast(features["label_ids"], tf.int32), 0)
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                          logits=tf.cast(logits, tf.float32))
  return losses * weights, weights


class TaggingTask(task_lib.Task):
  """Fine-tunes `BertClassifier(per_token=True)` on labelled first word pieces.

  The loss is the mean cross-entropy over the labelled positions of the batch.

  Args:
    bert_config: a `BertConfig`.
    num_labels: the tag list's length.
    max_seq_length: length of `predict`'s outputs (batches with dynamic padding are shorter).
    drop_padding: the model computes the real tokens alone (`BertEncoder`); not under XLA. The
      padding positions' predicted ids are then the output layer's bias alone; no tag reads them.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import optimization
    >>> from tasks.ner import task as ner_task
    >>> from training import engine
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> run_config = engine.RunConfig(output_dir="output", num_train_steps=10)
    >>> trainer = engine.Trainer(tf.distribute.get_strategy(), ner_task.TaggingTask(config, 13, 8),
    ...                          run_config, lambda: optimization.create_optimizer(1e-4, 10, 1))
  """

  metric_names = ("token_accuracy",)

  def __init__(self, bert_config, num_labels, max_seq_length, drop_padding=False):
    self.bert_config = bert_config
    self.num_labels = num_labels
    self.max_seq_length = max_seq_length
    self.drop_padding = drop_padding

  def build_model(self):
    return classifier_model.BertClassifier(self.bert_config, self.num_labels, per_token=True,
                                           drop_padding=self.drop_padding)

  def compute_loss(self, features, outputs, training):
    losses, weights = per_token_loss(outputs, features)
    predicted = tf.argmax(outputs, axis=-1, output_type=tf.int32)
    correct = tf.cast(tf.equal(predicted, tf.cast(features["label_ids"], tf.int32)), tf.float32)
    return (tf.math.divide_no_nan(tf.reduce_sum(losses), tf.reduce_sum(weights)),
            {"token_accuracy": (tf.reduce_sum(correct * weights), tf.reduce_sum(weights))})

  def prediction_outputs(self, features, outputs):
    """`predicted_ids` int32 `[batch_size, max_seq_length]` (-1 past the batch's length) and the
    per-example `loss_sum` / `label_count` of the labelled positions."""
    losses, weights = per_token_loss(outputs, features)
    predicted = tf.argmax(outputs, axis=-1, output_type=tf.int32)
    padding = self.max_seq_length - tf.shape(predicted)[1]
    return {"predicted_ids": tf.pad(predicted, [[0, 0], [0, padding]], constant_values=-1),
            "loss_sum": tf.reduce_sum(losses, axis=1),
            "label_count": tf.reduce_sum(weights, axis=1)}
