"""Start/end logits of SQuAD windows -> answer texts, as the original's `write_predictions`.

Per window, the `n_best_size` best starts and ends are paired; spans are dropped when they leave
the context, end before they start, are longer than `max_answer_length`, or start at a piece this
window does not score (see `squad_features.is_max_context`). The answer text is recovered from the
original context (`final_text`), not from the lower-cased word pieces. For SQuAD v2.0 the null
answer (`[CLS]`, `start_logits[0] + end_logits[0]`, the smallest over the windows) competes: the
prediction is "" when `null score - best non-null score > null_score_diff_threshold`.
"""

import collections
import dataclasses
import json
import math

from base import atomic_files
from data import tokenization


@dataclasses.dataclass
class NbestPrediction:
  text: str
  start_logit: float
  end_logit: float


def best_indexes(logits, n_best_size):
  """Indices of the `n_best_size` largest logits, largest first."""
  return sorted(range(len(logits)), key=lambda index: logits[index], reverse=True)[:n_best_size]


def softmax(scores):
  """The softmax of a list of floats, as a list (computed stably)."""
  if not scores:
    return []
  largest = max(scores)
  exps = [math.exp(score - largest) for score in scores]
  total = sum(exps)
  return [value / total for value in exps]


def _strip_spaces(text):
  """`(text without spaces, {index there: index in text})`."""
  characters = []
  to_original = {}
  for index, char in enumerate(text):
    if char == " ":
      continue
    to_original[len(characters)] = index
    characters.append(char)
  return "".join(characters), to_original


def final_text(predicted_text, original_text, do_lower_case):
  """Projects a prediction made of de-tokenized word pieces back onto the original words.

  The pieces are lower-cased, accent-stripped and split at punctuation, so "steve smith's" must
  become "Steve Smith's" and a prediction of "1895" inside "(1895-1943)." must drop the brackets.
  The original words are run through the `BasicTokenizer`, the prediction found in them, and the
  characters mapped back ignoring spaces; when that fails, the whole original words are returned.

  Args:
    predicted_text: the de-tokenized pieces, e.g. "steve smith ' s".
    original_text: the whitespace words of the context the pieces came from, joined by spaces.
    do_lower_case: how the pieces were made.

  Returns:
    the span of `original_text` that the prediction covers.
  """
  tokenized_text = " ".join(tokenization.BasicTokenizer(do_lower_case).tokenize(original_text))
  start = tokenized_text.find(predicted_text)
  if start == -1:
    return original_text
  end = start + len(predicted_text) - 1
  original_stripped, original_map = _strip_spaces(original_text)
  tokenized_stripped, tokenized_map = _strip_spaces(tokenized_text)
  if len(original_stripped) != len(tokenized_stripped):
    return original_text
  tokenized_to_stripped = {index: stripped for stripped, index in tokenized_map.items()}
  if start not in tokenized_to_stripped or end not in tokenized_to_stripped:
    return original_text
  original_start = original_map.get(tokenized_to_stripped[start])
  original_end = original_map.get(tokenized_to_stripped[end])
  if original_start is None or original_end is None:
    return original_text
  return original_text[original_start:original_end + 1]


def _span_text(example, feature, start_index, end_index, do_lower_case):
  pieces = " ".join(feature.tokens[start_index:end_index + 1])
  pieces = " ".join(pieces.replace(" ##", "").replace("##", "").strip().split())
  words = example.doc_tokens[feature.token_to_orig_map[start_index]:
                             feature.token_to_orig_map[end_index] + 1]
  return final_text(pieces, " ".join(words), do_lower_case)


def predict_example(example, features, results, n_best_size, max_answer_length, do_lower_case,
                    version_2_with_negative, null_score_diff_threshold):
  """The answer to one question from the logits of its windows.

  Args:
    example: a `SquadExample`.
    features: its `SquadFeature`s (windows).
    results: per window, `(start_logits, end_logits)` sequences of at least
      `len(feature.tokens)` floats.
    n_best_size: candidates kept per window and in the n-best list.
    max_answer_length: longest answer in word pieces.
    do_lower_case: how the pieces were made (for `final_text`).
    version_2_with_negative: let the null answer compete.
    null_score_diff_threshold: predict "" above this score difference (v2.0).

  Returns:
    `(prediction, nbest, score_diff)`: the answer text; the n-best list of dicts with `text`,
    `probability` (softmax over the list of start + end logits), `start_logit`, `end_logit`; and
    for v2.0 the null score minus the best non-null score (None for v1.1).
  """
  candidates = []  # (score, feature index, start, end, start logit, end logit)
  null_score = null_feature_index = None
  for feature_index, (feature, (start_logits, end_logits)) in enumerate(zip(features, results)):
    if version_2_with_negative:
      feature_null_score = start_logits[0] + end_logits[0]
      if null_score is None or feature_null_score < null_score:
        null_score, null_feature_index = feature_null_score, feature_index
    for start in best_indexes(start_logits[:len(feature.tokens)], n_best_size):
      if start not in feature.token_to_orig_map or not feature.token_is_max_context[start]:
        continue
      for end in best_indexes(end_logits[:len(feature.tokens)], n_best_size):
        if (end not in feature.token_to_orig_map or end < start
            or end - start + 1 > max_answer_length):
          continue
        candidates.append((start_logits[start] + end_logits[end], feature_index, start, end,
                           start_logits[start], end_logits[end]))
  if version_2_with_negative:
    null_start, null_end = results[null_feature_index][0][0], results[null_feature_index][1][0]
    candidates.append((null_score, null_feature_index, 0, 0, null_start, null_end))
  candidates.sort(key=lambda candidate: candidate[0], reverse=True)

  nbest = []
  seen = set()
  for _, feature_index, start, end, start_logit, end_logit in candidates:
    if len(nbest) >= n_best_size:
      break
    text = ("" if start == 0 else
            _span_text(example, features[feature_index], start, end, do_lower_case))
    if text in seen:
      continue
    seen.add(text)
    nbest.append(NbestPrediction(text, float(start_logit), float(end_logit)))
  if version_2_with_negative and "" not in seen:
    nbest.append(NbestPrediction("", float(null_start), float(null_end)))
  # As the original: a question without any valid span gets the answer "empty" (and for v2.0,
  # where the original crashed then, it competes with the null answer).
  if not any(entry.text for entry in nbest):
    nbest.insert(0, NbestPrediction("empty", 0.0, 0.0))

  probabilities = softmax([entry.start_logit + entry.end_logit for entry in nbest])
  nbest_json = [{"text": entry.text, "probability": probability,
                 "start_logit": entry.start_logit, "end_logit": entry.end_logit}
                for entry, probability in zip(nbest, probabilities)]
  if not version_2_with_negative:
    return nbest[0].text, nbest_json, None
  best_non_null = next(entry for entry in nbest if entry.text)
  score_diff = float(null_score) - best_non_null.start_logit - best_non_null.end_logit
  prediction = "" if score_diff > null_score_diff_threshold else best_non_null.text
  return prediction, nbest_json, score_diff


def predict_all(examples, features, logits_by_unique_id, **options):
  """Answers every example.

  Args:
    examples: list of `SquadExample`.
    features: their `SquadFeature`s (each example's windows in order).
    logits_by_unique_id: {unique_id: (start_logits, end_logits)}.
    **options: the keyword arguments of `predict_example` after `results`.

  Returns:
    `(predictions, nbest, null_odds)`: dicts keyed by question id (null_odds empty for v1.1).
  """
  features_by_example = collections.defaultdict(list)
  for feature in features:
    features_by_example[feature.example_index].append(feature)
  predictions, all_nbest, null_odds = {}, {}, {}
  for example_index, example in enumerate(examples):
    example_features = features_by_example[example_index]
    results = [logits_by_unique_id[feature.unique_id] for feature in example_features]
    prediction, nbest, score_diff = predict_example(example, example_features, results,
                                                    **options)
    predictions[example.qas_id] = prediction
    all_nbest[example.qas_id] = nbest
    if score_diff is not None:
      null_odds[example.qas_id] = score_diff
  return predictions, all_nbest, null_odds


def write_json(path, value):
  """Writes `value` as indented JSON, atomically (temporary name, then rename)."""
  with atomic_files.open_for_writing(path) as f:
    f.write(json.dumps(value, indent=4, ensure_ascii=False) + "\n")
