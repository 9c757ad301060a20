"""Classification metrics against values computed by hand and against scikit-learn / SciPy on
random inputs, and padding rows that never count."""

import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sklearn_metrics

from tasks import classifier

# Five real rows: true positives at 0 and 3, a true negative at 1, a false positive at 2, a false
# negative at 4.
PREDICTIONS = np.array([1, 0, 1, 1, 0])
LABELS = np.array([1, 0, 0, 1, 1])
REAL = np.ones(5)


def with_padding(*arrays):
  """Appends three padding rows (weight 0) that would change every metric if they counted."""
  padded = [np.concatenate([array, np.array([1, 1, 0])]) for array in arrays[:-1]]
  return padded + [np.concatenate([arrays[-1], np.zeros(3)])]


def test_accuracy():
  assert classifier.accuracy(PREDICTIONS, LABELS, REAL) == pytest.approx(3 / 5)


def test_binary_f1():
  # precision 2/3, recall 2/3.
  assert classifier.f1(PREDICTIONS, LABELS, REAL) == pytest.approx(2 / 3)


def test_matthews_corrcoef():
  # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6.
  assert classifier.matthews_corrcoef(PREDICTIONS, LABELS, REAL) == pytest.approx(1 / 6)


def test_matthews_corrcoef_of_a_constant_prediction_is_zero():
  assert classifier.matthews_corrcoef(np.zeros(5), LABELS, REAL) == 0.0


def test_pearson():
  # deviations (-1.5, -.5, .5, 1.5) and (-3, -1, 0, 4): 11 / sqrt(5 * 26).
  assert classifier.pearson(np.array([1., 2, 3, 4]), np.array([2., 4, 5, 9]),
                            np.ones(4)) == pytest.approx(11 / np.sqrt(130))


def test_spearman_averages_tied_ranks():
  # ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4): 4.5 / sqrt(4.5 * 5).
  assert classifier.spearman(np.array([1., 2, 2, 3]), np.array([1., 3, 2, 4]),
                             np.ones(4)) == pytest.approx(4.5 / np.sqrt(22.5))


def test_per_class_precision_recall():
  results = classifier.per_class_precision_recall(
      np.array([0, 1, 2, 2, 1]), np.array([0, 1, 1, 2, 2]), np.ones(5), ["a", "b", "c"])
  assert results == pytest.approx({"precision_a": 1.0, "recall_a": 1.0,
                                   "precision_b": 0.5, "recall_b": 0.5,
                                   "precision_c": 0.5, "recall_c": 0.5})


@pytest.mark.parametrize("function",
                         [classifier.accuracy, classifier.f1, classifier.matthews_corrcoef])
def test_padding_rows_never_count(function):
  assert function(*with_padding(PREDICTIONS, LABELS, REAL)) == pytest.approx(
      function(PREDICTIONS, LABELS, REAL))


def test_padding_rows_never_count_in_correlations():
  predictions, labels = np.array([1., 2, 3, 4]), np.array([2., 4, 5, 9])
  padded = with_padding(predictions, labels, np.ones(4))
  assert classifier.pearson(*padded) == pytest.approx(
      classifier.pearson(predictions, labels, np.ones(4)))
  assert classifier.spearman(*padded) == pytest.approx(
      classifier.spearman(predictions, labels, np.ones(4)))


def test_compute_classification_with_padding():
  # Logits whose argmax is PREDICTIONS; two padding rows with wrong predictions and huge losses.
  logits = np.stack([1 - PREDICTIONS, PREDICTIONS], axis=1).astype(np.float32) * 2.0
  labels = np.concatenate([LABELS, [1, 1]])
  logits = np.concatenate([logits, [[9.0, -9.0], [9.0, -9.0]]]).astype(np.float32)
  weights = np.concatenate([REAL, [0, 0]])
  losses = classifier.per_example_loss(classifier.CLASSIFICATION, logits, labels).numpy()
  results = classifier.compute(classifier.CLASSIFICATION, logits, labels, weights, losses,
                               ["0", "1"], ("f1", "matthews_corrcoef"))
  # Correct rows have loss log(1 + e^-2), wrong ones log(1 + e^2).
  expected_loss = (3 * np.log1p(np.exp(-2.0)) + 2 * np.log1p(np.exp(2.0))) / 5
  assert results == pytest.approx({"eval_accuracy": 0.6, "eval_loss": expected_loss,
                                   "f1": 2 / 3, "matthews_corrcoef": 1 / 6}, rel=1e-5)
  assert classifier.reported_names(classifier.CLASSIFICATION, ("f1", "matthews_corrcoef")) == set(
      results)


def test_compute_regression_has_no_accuracy():
  logits = np.array([[1.0], [2.0], [3.0]], np.float32)
  labels = np.array([1.5, 2.0, 2.0], np.float32)
  losses = classifier.per_example_loss(classifier.REGRESSION, logits, labels).numpy()
  results = classifier.compute(classifier.REGRESSION, logits, labels, np.ones(3), losses, [],
                               ("pearson", "spearman"))
  assert set(results) == {"eval_loss", "pearson", "spearman"}
  assert classifier.reported_names(classifier.REGRESSION, ("pearson", "spearman")) == set(results)
  assert results["eval_loss"] == pytest.approx((0.25 + 0 + 1) / 3)


def test_compute_multi_label_exact_match_and_micro_f1():
  logits = np.array([[2.0, -1.0, 3.0], [-2.0, 1.0, -1.0]], np.float32)
  labels = np.array([[1, 0, 1], [0, 0, 1]])
  losses = classifier.per_example_loss(classifier.MULTI_LABEL, logits, labels).numpy()
  results = classifier.compute(classifier.MULTI_LABEL, logits, labels, np.ones(2), losses,
                               ["a", "b", "c"])
  # Row 0 exactly right; row 1 predicts b instead of c: TP 2, FP 1, FN 1.
  assert results["eval_accuracy"] == 0.5
  # Three labels add per-class figures; the names reported for every label list are a subset.
  assert classifier.reported_names(classifier.MULTI_LABEL) <= set(results)
  assert results["f1"] == pytest.approx(2 / 3)


def test_output_values():
  probabilities = classifier.output_values(classifier.CLASSIFICATION,
                                           np.array([[0.0, np.log(3.0)]]))
  np.testing.assert_allclose(probabilities, [[0.25, 0.75]])
  np.testing.assert_allclose(classifier.output_values(classifier.MULTI_LABEL, np.array([[0.0]])),
                             [[0.5]])
  np.testing.assert_allclose(classifier.output_values(classifier.REGRESSION, np.array([[4.2]])),
                             [[4.2]])


def _random_case(seed):
  """Random labels and predictions of 2-4 classes (sometimes constant, sometimes close to the
  labels), random padding rows, and scores with ties."""
  rng = np.random.default_rng(seed)
  size, num_classes = int(rng.integers(1, 120)), int(rng.integers(2, 5))
  labels = rng.integers(0, num_classes, size)
  style = seed % 4
  if style == 0:
    predictions = np.full(size, int(rng.integers(0, num_classes)))
  elif style == 1:
    predictions = np.where(rng.random(size) < 0.7, labels, rng.integers(0, num_classes, size))
  else:
    predictions = rng.integers(0, num_classes, size)
  weights = (rng.random(size) < 0.8).astype(np.float32)
  weights[0] = 1.0
  scores = np.round(labels + rng.normal(0, 1.5, size), 1 if seed % 2 else 3)
  return labels, predictions, weights, scores, num_classes


@pytest.mark.parametrize("seed", range(40))
def test_classification_metrics_equal_scikit_learn_on_random_inputs(seed):
  labels, predictions, weights, _, num_classes = _random_case(seed)
  real = weights > 0
  gold, guess = labels[real], predictions[real]
  assert classifier.accuracy(predictions, labels, weights) == pytest.approx(
      sklearn_metrics.accuracy_score(gold, guess), abs=1e-12)
  assert classifier.f1(predictions, labels, weights) == pytest.approx(
      sklearn_metrics.f1_score(gold == 1, guess == 1, zero_division=0), abs=1e-12)
  assert classifier.matthews_corrcoef(predictions, labels, weights) == pytest.approx(
      sklearn_metrics.matthews_corrcoef(gold, guess), abs=1e-12)
  names = [f"c{index}" for index in range(num_classes)]
  precision, recall, _, _ = sklearn_metrics.precision_recall_fscore_support(
      gold, guess, labels=list(range(num_classes)), zero_division=0)
  ours = classifier.per_class_precision_recall(predictions, labels, weights, names)
  for index, name in enumerate(names):
    assert ours[f"precision_{name}"] == pytest.approx(precision[index], abs=1e-12)
    assert ours[f"recall_{name}"] == pytest.approx(recall[index], abs=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_multi_label_f1_equals_scikit_learns_micro_f1(seed):
  rng = np.random.default_rng(seed)
  # At least 2 labels: scikit-learn reads a 1-column matrix as a binary vector, whose "micro" F1
  # counts both classes.
  size, num_labels = int(rng.integers(1, 60)), int(rng.integers(2, 6))
  labels = (rng.random((size, num_labels)) < 0.3).astype(np.int64)
  predictions = np.where(rng.random((size, num_labels)) < 0.6, labels,
                         (rng.random((size, num_labels)) < 0.3).astype(np.int64))
  weights = (rng.random(size) < 0.8).astype(np.float32)
  weights[0] = 1.0
  real = weights > 0
  assert classifier.f1(predictions, labels, weights) == pytest.approx(
      sklearn_metrics.f1_score(labels[real], predictions[real], average="micro",
                               zero_division=0), abs=1e-12)
  assert classifier.accuracy(predictions, labels, weights) == pytest.approx(
      sklearn_metrics.accuracy_score(labels[real], predictions[real]), abs=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_correlations_equal_scipy_on_random_inputs_with_ties(seed):
  labels, _, weights, scores, _ = _random_case(seed)
  real = weights > 0
  gold, predicted = labels[real].astype(np.float64), scores[real]
  with warnings.catch_warnings():
    # Both sides give NaN for a constant input; only SciPy warns about it.
    warnings.simplefilter("ignore")
    expected_pearson = stats.pearsonr(predicted, gold)[0] if len(gold) > 1 else np.nan
    expected_spearman = stats.spearmanr(predicted, gold)[0] if len(gold) > 1 else np.nan
    ours_pearson = classifier.pearson(scores, labels, weights)
    ours_spearman = classifier.spearman(scores, labels, weights)
  np.testing.assert_allclose(ours_pearson, expected_pearson, atol=1e-12, equal_nan=True)
  np.testing.assert_allclose(ours_spearman, expected_spearman, atol=1e-12, equal_nan=True)
