"""The fine-tuning task of `run_classifier.py`: classification, regression or multi-label."""

import tensorflow as tf

from data import label_kinds
from modeling import classifier_model
from training import task as task_lib


def per_example_loss(kind, logits, label_ids):
  """The loss of each example.

  Args:
    kind: CLASSIFICATION (softmax cross-entropy, the original's), REGRESSION (squared error of the
      single output) or MULTI_LABEL (sigmoid cross-entropy averaged over the labels).
    logits: float32 `[batch_size, num_outputs]`.
    label_ids: int `[batch_size]` class ids, float `[batch_size]` targets, or int 0/1
      `[batch_size, num_labels]`.

  Returns:
    float32 `[batch_size]`.
  """
  logits = tf.cast(logits, tf.float32)
  if kind == label_kinds.REGRESSION:
    return tf.square(logits[:, 0] - tf.cast(label_ids, tf.float32))
  if kind == label_kinds.MULTI_LABEL:
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(label_ids, tf.float32), logits=logits), axis=-1)
  return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(label_ids, tf.int32),
                                                        logits=logits)


class ClassifierTask(task_lib.Task):
  """Fine-tunes `BertClassifier`; padding rows (`is_real_example = 0`) weigh nothing.

  Args:
    bert_config: a `BertConfig`.
    kind: CLASSIFICATION, REGRESSION or MULTI_LABEL.
    num_labels: the label list's length (ignored for regression, which has one output).

  Example:
    >>> task = ClassifierTask(bert_config, label_kinds.CLASSIFICATION, num_labels=2)
    >>> from training import engine
    >>> trainer = engine.Trainer(strategy, task, run_config, optimizer_fn)
  """

  def __init__(self, bert_config, kind, num_labels):
    self.bert_config = bert_config
    self.kind = kind
    self.num_outputs = 1 if kind == label_kinds.REGRESSION else num_labels
    self.metric_names = (() if kind == label_kinds.REGRESSION else ("accuracy",))

  def build_model(self):
    return classifier_model.BertClassifier(self.bert_config, self.num_outputs)

  def compute_loss(self, features, outputs, training):
    weights = tf.cast(features["is_real_example"], tf.float32)
    losses = per_example_loss(self.kind, outputs, features["label_ids"])
    loss = tf.math.divide_no_nan(tf.reduce_sum(losses * weights), tf.reduce_sum(weights))
    metrics = {}
    if self.kind == label_kinds.CLASSIFICATION:
      correct = tf.cast(tf.equal(tf.argmax(outputs, axis=-1, output_type=tf.int32),
                                 tf.cast(features["label_ids"], tf.int32)), tf.float32)
      metrics["accuracy"] = (tf.reduce_sum(correct * weights), tf.reduce_sum(weights))
    elif self.kind == label_kinds.MULTI_LABEL:
      predicted = tf.cast(outputs > 0, tf.int32)
      exact = tf.cast(tf.reduce_all(tf.equal(predicted, tf.cast(features["label_ids"], tf.int32)),
                                    axis=-1), tf.float32)
      metrics["accuracy"] = (tf.reduce_sum(exact * weights), tf.reduce_sum(weights))
    return loss, metrics
