"""Exact match and F1 of SQuAD predictions, by the rules of the official v1.1 and v2.0 scripts.

An answer is normalised (lower case, no ASCII punctuation, no a/an/the, single spaces) before it is
compared: exact match is equality of the normalised texts, F1 the overlap of their bags of words.
Each question takes its best score over its gold answers; the figures are averages over the
questions, in percent. v2.0 adds unanswerable questions (gold "", so only an empty prediction
scores), HasAns / NoAns figures and, given the no-answer probabilities, the best null threshold.
"""

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
  """The official scripts' normalisation: `"The Cat!"` -> `"cat"`.

  Punctuation goes before the articles, as in the official scripts, so `"the-cat"` -> `"thecat"`.

  Args:
    text: an answer (predicted or gold).

  Returns:
    the lower-cased text without ASCII punctuation and the words a/an/the, its words joined by
    single spaces.
  """
  text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", text).split())


def _tokens(text):
  return normalize_answer(text).split()


def exact_match_score(prediction, ground_truth):
  """1.0 if the normalised prediction equals the normalised gold answer, else 0.0.

  Args:
    prediction: predicted answer text.
    ground_truth: one gold answer text.

  Returns:
    float, 0.0 or 1.0.
  """
  return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def _overlap_f1(prediction_tokens, gold_tokens):
  common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(prediction_tokens)
  recall = num_same / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def f1_score(prediction, ground_truth):
  """v1.1 F1 of the bags of words of the normalised prediction and gold answer.

  A repeated word counts as often as it occurs in both bags. With no common word (so also when
  either answer normalises to nothing) the F1 is 0.

  Args:
    prediction: predicted answer text.
    ground_truth: one gold answer text.

  Returns:
    float in [0, 1].
  """
  return _overlap_f1(_tokens(prediction), _tokens(ground_truth))


def _f1_score_v2(prediction, ground_truth):
  """v2.0 F1: as v1.1, but 1 when both answers normalise to nothing (a right "no answer")."""
  prediction_tokens, gold_tokens = _tokens(prediction), _tokens(ground_truth)
  if not prediction_tokens or not gold_tokens:
    return float(prediction_tokens == gold_tokens)
  return _overlap_f1(prediction_tokens, gold_tokens)


def gold_answers(qa, version_2):
  """The gold answer texts a prediction of one question is compared with.

  Args:
    qa: one question of the official JSON (`{"id", "question", "answers": [{"text",
      "answer_start"}, ...]}`).
    version_2: SQuAD v2.0 rules: answers that normalise to nothing are dropped, and a question left
      without answers (unanswerable) has the single gold answer "".

  Returns:
    list of answer texts (v1.1: all of them, possibly none).
  """
  texts = [answer["text"] for answer in qa["answers"]]
  if not version_2:
    return texts
  return [text for text in texts if normalize_answer(text)] or [""]


def _questions(dataset):
  for article in dataset:
    for paragraph in article["paragraphs"]:
      yield from paragraph["qas"]


def _raw_scores(dataset, predictions, version_2):
  """Per question: exact match and F1 (0..1, best over the gold answers; 0 when unpredicted).

  Returns:
    (exact, f1, has_answer, missing): dicts qid -> score and qid -> whether the question has any
    gold answer, in dataset order, and the number of questions without a prediction. v1.1 leaves
    out the questions without gold answers.
  """
  score_f1 = _f1_score_v2 if version_2 else f1_score
  exact, f1, has_answer = {}, {}, {}
  missing = 0
  for qa in _questions(dataset):
    qid = qa["id"]
    if not version_2 and not qa["answers"]:
      continue
    has_answer[qid] = bool(qa["answers"])
    if qid not in predictions:
      missing += 1
      exact[qid] = f1[qid] = 0.0
      continue
    golds = gold_answers(qa, version_2)
    exact[qid] = max(exact_match_score(predictions[qid], gold) for gold in golds)
    f1[qid] = max(score_f1(predictions[qid], gold) for gold in golds)
  if not exact:
    raise ValueError("no question to score" + ("" if version_2 else " (none has gold answers)"))
  return exact, f1, has_answer, missing


def _percent(scores, qids):
  return 100.0 * sum(scores[qid] for qid in qids) / len(qids)


def _best_threshold(scores, has_answer, predictions, na_probs):
  """The official `find_best_thresh`: the best score when every question whose no-answer
  probability exceeds a threshold is answered "".

  Starting from all answers "" (only the unanswerable questions right), the questions are switched
  to their predictions in ascending no-answer probability; a switched answerable question gains its
  score, a switched unanswerable one loses 1 if its prediction is not "". Questions without a
  no-answer probability are never switched, as in the official script (it walks `na_probs`).

  Returns:
    (best score in percent, threshold: the no-answer probability of the last question switched to
    reach it, 0.0 if none).
  """
  best = current = sum(not answered for answered in has_answer.values())
  threshold = 0.0
  for qid in sorted((qid for qid in scores if qid in na_probs), key=na_probs.get):
    if has_answer[qid]:
      current += scores[qid]
    elif predictions.get(qid, ""):
      current -= 1
    if current > best:
      best, threshold = current, na_probs[qid]
  return 100.0 * best / len(scores), threshold


def evaluate(dataset, predictions, version_2=False, na_probs=None):
  """The official SQuAD figures of a set of predictions.

  A question without a prediction scores 0 and counts in the totals. v1.1 scores only questions
  with gold answers: the ones without (v2.0's unanswerable questions) are skipped, so a v2.0 file
  should be evaluated with `version_2=True` or have them dropped by the caller.

  Args:
    dataset: the list under "data" of the official JSON (articles -> "paragraphs" -> "qas", each
      qa with "id" and "answers" [{"text", "answer_start"}]).
    predictions: dict qid -> predicted answer text ("" for "no answer"); figures are computed on
      these as given (`na_probs` never changes them).
    version_2: SQuAD v2.0 rules (see `gold_answers`; an empty prediction of an unanswerable
      question scores 1).
    na_probs: v2.0 only, optional dict qid -> no-answer probability or score (BERT's
      `null_odds.json`: null score minus best non-null score); adds the best-threshold figures.

  Returns:
    v1.1: dict with `exact_match` and `f1` (percent), `total` (questions scored) and `missing`
    (of those, how many have no prediction).
    v2.0: dict with `exact`, `f1`, `total`; `HasAns_exact`, `HasAns_f1`, `HasAns_total` over the
    questions with gold answers and `NoAns_exact`, `NoAns_f1`, `NoAns_total` over the others (each
    group only if not empty); with `na_probs`, `best_exact`, `best_exact_thresh`, `best_f1`,
    `best_f1_thresh`; and `missing`. A question's group follows its "answers" list, as in the
    official script, even when all its answers normalise to nothing.

  Raises:
    ValueError: there is no question to score.
  """
  exact, f1, has_answer, missing = _raw_scores(dataset, predictions, version_2)
  if not version_2:
    return {"exact_match": _percent(exact, exact), "f1": _percent(f1, f1), "total": len(exact),
            "missing": missing}
  results = {"exact": _percent(exact, exact), "f1": _percent(f1, f1), "total": len(exact)}
  for prefix, answered in (("HasAns", True), ("NoAns", False)):
    qids = [qid for qid in exact if has_answer[qid] == answered]
    if qids:
      results[f"{prefix}_exact"] = _percent(exact, qids)
      results[f"{prefix}_f1"] = _percent(f1, qids)
      results[f"{prefix}_total"] = len(qids)
  if na_probs is not None:
    for name, scores in (("exact", exact), ("f1", f1)):
      best, threshold = _best_threshold(scores, has_answer, predictions, na_probs)
      results[f"best_{name}"] = best
      results[f"best_{name}_thresh"] = threshold
  results["missing"] = missing
  return results
