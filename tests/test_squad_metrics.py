"""The SQuAD v1.1 / v2.0 scorer on hand-made answers whose figures are worked out in comments."""

import pytest

from tasks.squad import metrics as squad_metrics


def _dataset(*questions):
  """One article, one paragraph, the given `(qid, gold texts)` questions."""
  qas = [{"id": qid, "question": "?",
          "answers": [{"text": text, "answer_start": 0} for text in texts]}
         for qid, texts in questions]
  return [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]


@pytest.mark.parametrize("text, expected", [
    ("The Cat", "cat"),
    ("cat!", "cat"),
    ("  a  black\tcat\n", "black cat"),
    ("An apple's core.", "apples core"),
    # Articles only as whole words; punctuation goes first, so a hyphen joins "the" to its word.
    ("theater anthem", "theater anthem"),
    ("the-cat", "thecat"),
    ("the", ""),
])
def test_normalize_answer(text, expected):
  assert squad_metrics.normalize_answer(text) == expected


@pytest.mark.parametrize("prediction, ground_truth, expected", [
    ("the cat", "cat", 1.0),
    ("cat!", "cat", 1.0),
    ("CAT", "cat", 1.0),
    ("black \n cat", "black cat", 1.0),
    ("cats", "cat", 0.0),
    ("black cat", "cat", 0.0),
    ("", "cat", 0.0),
])
def test_exact_match_score(prediction, ground_truth, expected):
  assert squad_metrics.exact_match_score(prediction, ground_truth) == expected


@pytest.mark.parametrize("prediction, ground_truth, expected", [
    # [black, cat, sat] vs [black, cat]: P = 2/3, R = 1, F1 = 2 * 2/3 / (5/3) = 0.8.
    ("the black cat sat", "a black cat", 0.8),
    # Counter intersection: cat min(3, 1) = 1 common; P = 1/3, R = 1/2, F1 = (1/3) / (5/6) = 0.4.
    ("cat cat cat", "cat dog", 0.4),
    # cat min(2, 3) = 2 common; P = R = 2/3.
    ("cat cat dog", "cat cat cat", 2 / 3),
    ("Black, cat.", "the black cat", 1.0),
    ("dog", "cat", 0.0),
    ("", "cat", 0.0),
    # v1.1: nothing in common, even when both are empty.
    ("the", "a", 0.0),
])
def test_f1_score(prediction, ground_truth, expected):
  assert squad_metrics.f1_score(prediction, ground_truth) == pytest.approx(expected)


def test_gold_answers_v2_drops_answers_that_normalise_to_empty():
  qa = {"id": "q", "answers": [{"text": "The", "answer_start": 0},
                               {"text": "Paris", "answer_start": 4}]}
  assert squad_metrics.gold_answers(qa, version_2=False) == ["The", "Paris"]
  assert squad_metrics.gold_answers(qa, version_2=True) == ["Paris"]
  only_article = {"id": "q", "answers": [{"text": "a", "answer_start": 0}]}
  assert squad_metrics.gold_answers(only_article, version_2=True) == [""]
  unanswerable = {"id": "q", "answers": [], "is_impossible": True}
  assert squad_metrics.gold_answers(unanswerable, version_2=False) == []
  assert squad_metrics.gold_answers(unanswerable, version_2=True) == [""]


def test_evaluate_v1():
  dataset = _dataset(("q1", ["Denver Broncos", "the Broncos"]),
                     ("q2", ["a black cat", "a dog"]),
                     ("q3", ["Rome"]),
                     ("q4", ["cat"]),
                     ("q5", []))
  predictions = {"q1": "Broncos", "q2": "the black cat sat", "q4": "", "other": "x"}
  # q1: best gold "the Broncos": EM 1, F1 1. q2: EM 0, F1 max(0.8, 0) = 0.8. q3 missing: 0, 0.
  # q4 empty: 0, 0. q5 has no gold answer: skipped (not in total, not missing). "other" ignored.
  results = squad_metrics.evaluate(dataset, predictions)
  assert results == {"exact_match": pytest.approx(100 * 1 / 4),
                     "f1": pytest.approx(100 * 1.8 / 4), "total": 4, "missing": 1}


def test_evaluate_v1_without_gold_answers_is_an_error():
  with pytest.raises(ValueError, match="no question to score"):
    squad_metrics.evaluate(_dataset(("q1", [])), {"q1": ""})


# Answerable q1-q4 (q4 unpredicted), unanswerable q5-q6.
_V2_DATASET = _dataset(("q1", ["Denver Broncos", "Broncos"]),
                       ("q2", ["Denver Broncos"]),
                       ("q3", ["Paris"]),
                       ("q4", ["Rome"]),
                       ("q5", []),
                       ("q6", []))
_V2_PREDICTIONS = {"q1": "Denver Broncos!", "q2": "Denver", "q3": "", "q5": "", "q6": "London"}


def test_evaluate_v2_has_ans_and_no_ans():
  # q1: EM 1, F1 1. q2: [denver] vs [denver, broncos]: P = 1, R = 1/2, F1 2/3; EM 0.
  # q3: empty vs "Paris": 0, 0. q4 missing: 0, 0. q5: empty vs empty: 1, 1. q6: "London" vs
  # empty: 0, 0.
  results = squad_metrics.evaluate(_V2_DATASET, _V2_PREDICTIONS, version_2=True)
  assert results == {
      "exact": pytest.approx(100 * 2 / 6), "f1": pytest.approx(100 * (2 + 2 / 3) / 6), "total": 6,
      "HasAns_exact": pytest.approx(100 * 1 / 4), "HasAns_f1": pytest.approx(100 * (5 / 3) / 4),
      "HasAns_total": 4,
      "NoAns_exact": pytest.approx(50.0), "NoAns_f1": pytest.approx(50.0), "NoAns_total": 2,
      "missing": 1}


def test_evaluate_v2_omits_empty_groups():
  answerable = squad_metrics.evaluate(_dataset(("q1", ["cat"])), {"q1": "cat"}, version_2=True)
  assert answerable == {"exact": 100.0, "f1": 100.0, "total": 1, "HasAns_exact": 100.0,
                        "HasAns_f1": 100.0, "HasAns_total": 1, "missing": 0}
  unanswerable = squad_metrics.evaluate(_dataset(("q1", [])), {"q1": "cat"}, version_2=True)
  assert unanswerable == {"exact": 0.0, "f1": 0.0, "total": 1, "NoAns_exact": 0.0,
                          "NoAns_f1": 0.0, "NoAns_total": 1, "missing": 0}


def test_v2_drops_gold_answers_that_normalise_to_empty():
  dataset = _dataset(("q1", ["The", "Paris"]), ("q2", ["a"]))
  predictions = {"q1": "the", "q2": ""}
  # v1.1: q1 "the" vs "The" normalise to "" == "": EM 1 (F1 0: nothing in common); q2 likewise.
  v1 = squad_metrics.evaluate(dataset, predictions)
  assert (v1["exact_match"], v1["f1"]) == (100.0, 0.0)
  # v2.0: q1's gold is ["Paris"], so "the" (empty) scores 0; q2's gold is [""], so "" scores 1.
  # q2 still counts as answerable: the group follows the "answers" list.
  v2 = squad_metrics.evaluate(dataset, predictions, version_2=True)
  assert (v2["exact"], v2["f1"]) == (50.0, 50.0)
  assert (v2["HasAns_exact"], v2["HasAns_total"]) == (50.0, 2)
  assert "NoAns_total" not in v2


def test_best_threshold_walk():
  dataset = _dataset(("q1", ["Denver Broncos"]), ("q2", ["Denver Broncos"]), ("q3", ["Paris"]),
                     ("q4", ["Rome"]), ("q5", []), ("q6", []), ("q7", ["Berlin"]), ("q8", []))
  predictions = {"q1": "Denver Broncos", "q2": "Denver Broncos team", "q3": "", "q5": "",
                 "q6": "London", "q7": "Berlin"}
  na_probs = {"q1": 0.1, "q2": 0.3, "q3": 0.5, "q4": 0.9, "q5": 0.8, "q6": 0.2, "q7": 0.4,
              "q8": 0.05}
  # Raw (EM, F1): q1 (1, 1); q2 [denver, broncos, team] vs [denver, broncos]: (0, 0.8); q3, q4
  # (missing) (0, 0); q5 (1, 1); q6 (0, 0); q7 (1, 1); q8 missing (0, 0).
  # Walk by na_prob, from 3 (the unanswerable q5, q6, q8):
  #   F1: q8 (.05, missing = "") +0 = 3; q1 (.1) +1 = 4 best; q6 (.2) -1 = 3; q2 (.3) +0.8 = 3.8;
  #       q7 (.4) +1 = 4.8 best; q3, q5, q4 +0. best_f1 = 100 * 4.8 / 8 = 60 at 0.4.
  #   EM: 3; q1 +1 = 4 best at 0.1; q6 -1 = 3; q2 +0; q7 +1 = 4, not above. best_exact = 50 at 0.1.
  results = squad_metrics.evaluate(dataset, predictions, version_2=True, na_probs=na_probs)
  assert results["best_f1"] == pytest.approx(60.0)
  assert results["best_f1_thresh"] == 0.4
  assert results["best_exact"] == pytest.approx(50.0)
  assert results["best_exact_thresh"] == 0.1
  # The main figures are the predictions as given: EM 3/8, F1 3.8/8, missing q4 and q8.
  assert results["exact"] == pytest.approx(37.5)
  assert results["f1"] == pytest.approx(47.5)
  assert (results["HasAns_f1"], results["NoAns_exact"]) == (pytest.approx(56.0),
                                                            pytest.approx(100 / 3))
  assert results["missing"] == 2
  without = squad_metrics.evaluate(dataset, predictions, version_2=True)
  assert {key: results[key] for key in without} == without


def test_best_threshold_stays_at_all_empty_when_no_prediction_helps():
  dataset = _dataset(("q1", ["Paris"]), ("q2", []))
  # Walk from 1 (q2): q2 (.1) "London" -1 = 0; q1 (.2) "Rome" +0 = 0. Best is the start: 1 of 2,
  # threshold 0.0.
  results = squad_metrics.evaluate(dataset, {"q1": "Rome", "q2": "London"}, version_2=True,
                                   na_probs={"q1": 0.2, "q2": 0.1})
  assert (results["best_exact"], results["best_exact_thresh"]) == (50.0, 0.0)
  assert (results["best_f1"], results["best_f1_thresh"]) == (50.0, 0.0)
