"""Evaluation metrics of `run_classifier.py`, computed on the host from the model's outputs.

Every function takes `weights` (the records' `is_real_example`): rows with weight 0 are the padding
that fills the last batch and never count. The original reported only accuracy and loss; F1 (MRPC,
QQP), Matthews correlation (CoLA), Pearson/Spearman (STS-B) and per-class precision/recall are the
usual GLUE figures.
"""

import numpy as np

from data import label_kinds




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
  if kind == label_kinds.REGRESSION:
    return logits
  if kind == label_kinds.MULTI_LABEL:
    return 1.0 / (1.0 + np.exp(-logits))
  return np.exp(_log_softmax(logits))


def reported_names(kind, extra_metrics=()):
  """The names `compute` reports for every label list (the per-class figures aside)."""
  names = {"eval_loss", *extra_metrics}
  if kind != label_kinds.REGRESSION:
    names.add("eval_accuracy")
  if kind == label_kinds.MULTI_LABEL:
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
    losses: `[num_examples]` per-example training loss (`training.classifier_task`).
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
  if kind == label_kinds.REGRESSION:
    predictions = logits[:, 0]
  elif kind == label_kinds.MULTI_LABEL:
    predictions = (logits > 0).astype(np.int64)
    extra_metrics = tuple(extra_metrics) + ("f1",)
  else:
    predictions = np.argmax(logits, axis=-1)
    if len(label_list) > 2:
      results.update(per_class_precision_recall(predictions, labels, weights, label_list))
  if kind != label_kinds.REGRESSION:
    results["eval_accuracy"] = accuracy(predictions, labels, weights)
  functions = {"f1": f1, "matthews_corrcoef": matthews_corrcoef, "pearson": pearson,
               "spearman": spearman}
  for name in extra_metrics:
    results[name] = functions[name](predictions, labels, weights)
  return results
