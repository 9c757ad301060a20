"""What the classification and multiple-choice families share (`tasks/classification/`,
`tasks/multiple_choice/`): the kinds of label, the fine-tuning `Task` and the evaluation metrics.

A label of a classification-style task is one class of a list (CLASSIFICATION), a number
(REGRESSION) or a set of classes (MULTI_LABEL). The kind decides the record features, the loss,
the metrics and what an export returns.

`ClassifierTask` is the fine-tuning task of `run_classifier.py` (classification, regression or
multi-label); `run_multiple_choice.py`'s task extends it.

The evaluation metrics of `run_classifier.py` are computed on the host from the model's outputs.
Every metric function takes `weights` (the records' `is_real_example`): rows with weight 0 are the
padding that fills the last batch and never count. The original reported only accuracy and loss;
F1 (MRPC, QQP), Matthews correlation (CoLA), Pearson/Spearman (STS-B) and per-class
precision/recall are the usual GLUE figures.
"""

import numpy as np
import tensorflow as tf

from modeling import classifier_model
from training import task as task_lib

CLASSIFICATION = "classification"
REGRESSION = "regression"
MULTI_LABEL = "multi_label"


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
  if kind == REGRESSION:
    return tf.square(logits[:, 0] - tf.cast(label_ids, tf.float32))
  if kind == MULTI_LABEL:
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
    drop_padding: the model computes the real tokens alone (`BertEncoder`); not under XLA.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import optimization
    >>> from tasks import classifier
    >>> from training import engine
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> task = classifier.ClassifierTask(config, classifier.CLASSIFICATION, num_labels=2)
    >>> run_config = engine.RunConfig(output_dir="output", num_train_steps=10)
    >>> trainer = engine.Trainer(tf.distribute.get_strategy(), task, run_config,
    ...                          lambda: optimization.create_optimizer(1e-4, 10, 1))
  """

  def __init__(self, bert_config, kind, num_labels, drop_padding=False):
    self.bert_config = bert_config
    self.kind = kind
    self.num_outputs = 1 if kind == REGRESSION else num_labels
    self.drop_padding = drop_padding
    self.metric_names = (() if kind == REGRESSION else ("accuracy",))

  def build_model(self):
    return classifier_model.BertClassifier(self.bert_config, self.num_outputs,
                                           drop_padding=self.drop_padding)

  def compute_loss(self, features, outputs, training):
    weights = tf.cast(features["is_real_example"], tf.float32)
    losses = per_example_loss(self.kind, outputs, features["label_ids"])
    loss = tf.math.divide_no_nan(tf.reduce_sum(losses * weights), tf.reduce_sum(weights))
    metrics = {}
    if self.kind == CLASSIFICATION:
      correct = tf.cast(tf.equal(tf.argmax(outputs, axis=-1, output_type=tf.int32),
                                 tf.cast(features["label_ids"], tf.int32)), tf.float32)
      metrics["accuracy"] = (tf.reduce_sum(correct * weights), tf.reduce_sum(weights))
    elif self.kind == MULTI_LABEL:
      predicted = tf.cast(outputs > 0, tf.int32)
      exact = tf.cast(tf.reduce_all(tf.equal(predicted, tf.cast(features["label_ids"], tf.int32)),
                                    axis=-1), tf.float32)
      metrics["accuracy"] = (tf.reduce_sum(exact * weights), tf.reduce_sum(weights))
    return loss, metrics


def _real(weights, *arrays):
  keep = np.asarray(weights) > 0
  return [np.asarray(array)[keep] for array in arrays]


def accuracy(predictions, labels, weights):
  """Fraction of real rows whose prediction equals the label (all labels of a row for 2-D)."""
  predictions, labels = _real(weights, predictions, labels)
  correct = predictions == labels
  if correct.ndim > 1:
    correct = np.all(correct, axis=tuple(range(1, correct.ndim)))
  return float(np.mean(correct))


def _precision_recall_f1(true_positives, false_positives, false_negatives):
  precision = true_positives / (true_positives + false_positives) if true_positives else 0.0
  recall = true_positives / (true_positives + false_negatives) if true_positives else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return float(precision), float(recall), float(f1)


def f1(predictions, labels, weights, positive=1):
  """F1 of the `positive` class; for 0/1 matrices (multi-label) the micro F1 over all cells."""
  predictions, labels = _real(weights, predictions, labels)
  predicted, actual = predictions == positive, labels == positive
  return _precision_recall_f1(np.sum(predicted & actual), np.sum(predicted & ~actual),
                              np.sum(~predicted & actual))[2]


def per_class_precision_recall(predictions, labels, weights, label_list):
  """{`precision_<label>`: ..., `recall_<label>`: ...} for every class."""
  predictions, labels = _real(weights, predictions, labels)
  results = {}
  for index, name in enumerate(label_list):
    predicted, actual = predictions == index, labels == index
    precision, recall, _ = _precision_recall_f1(np.sum(predicted & actual),
                                                np.sum(predicted & ~actual),
                                                np.sum(~predicted & actual))
    results[f"precision_{name}"] = precision
    results[f"recall_{name}"] = recall
  return results


def matthews_corrcoef(predictions, labels, weights):
  """Matthews correlation (Gorodkin's multi-class form; the usual MCC for two classes); 0 when
  either side is constant."""
  predictions, labels = _real(weights, predictions, labels)
  classes = np.union1d(predictions, labels)
  confusion = np.array([[np.sum((labels == a) & (predictions == b)) for b in classes]
                        for a in classes], dtype=np.float64)
  total = confusion.sum()
  correct = np.trace(confusion)
  predicted_counts, actual_counts = confusion.sum(axis=0), confusion.sum(axis=1)
  numerator = correct * total - np.dot(predicted_counts, actual_counts)
  denominator = np.sqrt((total ** 2 - np.dot(predicted_counts, predicted_counts))
                        * (total ** 2 - np.dot(actual_counts, actual_counts)))
  return float(numerator / denominator) if denominator else 0.0


def pearson(predictions, labels, weights):
  """Pearson correlation of real rows."""
  predictions, labels = _real(weights, predictions, labels)
  return float(np.corrcoef(predictions.astype(np.float64), labels.astype(np.float64))[0, 1])


def _average_ranks(values):
  """Ranks 1..n, ties sharing the mean of their ranks (as scipy's `rankdata`)."""
  order = np.argsort(values, kind="mergesort")
  ranks = np.empty(len(values), dtype=np.float64)
  sorted_values = np.asarray(values)[order]
  start = 0
  while start < len(values):
    end = start
    while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
      end += 1
    ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
    start = end + 1
  return ranks


def spearman(predictions, labels, weights):
  """Spearman rank correlation of real rows (Pearson of average ranks)."""
  predictions, labels = _real(weights, predictions, labels)
  return float(np.corrcoef(_average_ranks(predictions), _average_ranks(labels))[0, 1])


def _log_softmax(logits):
  shifted = logits - np.max(logits, axis=-1, keepdims=True)
  return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def output_values(kind, logits):
  """What `test_results.tsv` holds per example: class probabilities (softmax), label
  probabilities (sigmoid, multi-label) or the predicted value (regression), float64 2-D."""
  logits = np.asarray(logits, np.float64)
  if kind == REGRESSION:
    return logits
  if kind == MULTI_LABEL:
    return 1.0 / (1.0 + np.exp(-logits))
  return np.exp(_log_softmax(logits))


def reported_names(kind, extra_metrics=()):
  """The names `compute` reports for every label list (the per-class figures aside)."""
  names = {"eval_loss", *extra_metrics}
  if kind != REGRESSION:
    names.add("eval_accuracy")
  if kind == MULTI_LABEL:
    names.add("f1")
  return names


def compute(kind, logits, labels, weights, losses, label_list=(), extra_metrics=()):
  """The eval results of a task.

  Args:
    kind: CLASSIFICATION, REGRESSION or MULTI_LABEL.
    logits: float `[num_examples, num_outputs]`.
    labels: int `[num_examples]` class ids, float `[num_examples]` targets, or 0/1
      `[num_examples, num_labels]` (multi-label).
    weights: `[num_examples]` is_real_example.
    losses: `[num_examples]` per-example training loss (`per_example_loss`).
    label_list: class names (per-class figures when there are more than two).
    extra_metrics: task-specific names among "f1", "matthews_corrcoef", "pearson", "spearman".

  Returns:
    dict: `eval_loss` always; `eval_accuracy` for classification (exact match for multi-label);
    `f1` always for multi-label (micro); per-class `precision_<label>`/`recall_<label>` for more
    than two classes; and `extra_metrics`.
  """
  logits = np.asarray(logits)
  real = np.asarray(weights) > 0
  if not np.any(real):
    raise ValueError("no real example to evaluate")
  results = {"eval_loss": float(np.mean(np.asarray(losses)[real]))}
  if kind == REGRESSION:
    predictions = logits[:, 0]
  elif kind == MULTI_LABEL:
    predictions = (logits > 0).astype(np.int64)
    extra_metrics = tuple(extra_metrics) + ("f1",)
  else:
    predictions = np.argmax(logits, axis=-1)
    if len(label_list) > 2:
      results.update(per_class_precision_recall(predictions, labels, weights, label_list))
  if kind != REGRESSION:
    results["eval_accuracy"] = accuracy(predictions, labels, weights)
  functions = {"f1": f1, "matthews_corrcoef": matthews_corrcoef, "pearson": pearson,
               "spearman": spearman}
  for name in extra_metrics:
    results[name] = functions[name](predictions, labels, weights)
  return results
