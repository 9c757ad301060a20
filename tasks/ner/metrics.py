"""Entity-level scoring by the rules of the CoNLL shared tasks' `conlleval` script.

An entity (chunk) is a maximal span decided by conlleval's start-of-chunk / end-of-chunk rules,
which read IOB1, IOB2 and IOBES alike: e.g. `I-PER` after `O` starts an entity (IOB1), a type change
inside a span ends one entity and starts another, `E-`/`S-` end one. A predicted entity is correct
only if its start, end and type equal a gold entity's. Precision, recall and F1 are pooled over
all types; per-type figures and token accuracy are reported too.
"""

import collections


def _split(tag):
  """`B-PER` -> ("B", "PER"); `O` -> ("O", "")."""
  if tag == "O":
    return "O", ""
  prefix, _, entity_type = tag.partition("-")
  return prefix, entity_type


def _end_of_chunk(previous_prefix, prefix, previous_type, entity_type):
  """Whether an entity ended at the previous token (conlleval's `endOfChunk`, with IOBES)."""
  if previous_prefix in ("E", "S"):
    return True
  if previous_prefix == "B" and prefix in ("B", "S", "O"):
    return True
  if previous_prefix == "I" and prefix in ("B", "S", "O"):
    return True
  return previous_prefix != "O" and previous_type != entity_type


def _start_of_chunk(previous_prefix, prefix, previous_type, entity_type):
  """Whether an entity starts at this token (conlleval's `startOfChunk`, with IOBES)."""
  if prefix in ("B", "S"):
    return True
  if previous_prefix in ("E", "S", "O") and prefix in ("E", "I"):
    return True
  return prefix != "O" and previous_type != entity_type


def entities(tags):
  """The entities of one sentence's tags.

  Args:
    tags: list of tags (`O`, `B-X`, `I-X`, `E-X`, `S-X`).

  Returns:
    set of `(start, end, type)`, `end` inclusive (token indices).
  """
  found = set()
  previous_prefix, previous_type, start = "O", "", None
  for index, tag in enumerate(list(tags) + ["O"]):
    prefix, entity_type = _split(tag)
    if start is not None and _end_of_chunk(previous_prefix, prefix, previous_type, entity_type):
      found.add((start, index - 1, previous_type))
      start = None
    if _start_of_chunk(previous_prefix, prefix, previous_type, entity_type):
      start = index
    previous_prefix, previous_type = prefix, entity_type
  return found


def _precision_recall_f1(correct, predicted, gold):
  precision = correct / predicted if predicted else 0.0
  recall = correct / gold if gold else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return precision, recall, f1


# What `score` reports for any corpus (the per-type figures depend on the types seen).
POOLED_NAMES = ("precision", "recall", "f1", "token_accuracy")


def score(gold_sentences, predicted_sentences):
  """conlleval's figures over a corpus.

  Args:
    gold_sentences: list of tag lists.
    predicted_sentences: list of tag lists, aligned word for word with `gold_sentences`.

  Returns:
    dict with `precision`, `recall`, `f1` (pooled over types, fractions), `token_accuracy`, and
    `precision_<type>`, `recall_<type>`, `f1_<type>` for every type seen in gold or prediction.

  Raises:
    ValueError: a sentence's predictions do not have one tag per word.
  """
  counts = collections.defaultdict(lambda: [0, 0, 0])  # type -> [correct, predicted, gold]
  correct_tokens = total_tokens = 0
  for index, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences,
                                                strict=True)):
    if len(gold) != len(predicted):
      raise ValueError(f"sentence {index}: {len(gold)} gold tags but {len(predicted)} predicted")
    correct_tokens += sum(g == p for g, p in zip(gold, predicted))
    total_tokens += len(gold)
    gold_entities, predicted_entities = entities(gold), entities(predicted)
    for entity in gold_entities:
      counts[entity[2]][2] += 1
    for entity in predicted_entities:
      counts[entity[2]][1] += 1
    for entity in gold_entities & predicted_entities:
      counts[entity[2]][0] += 1
  totals = [sum(c[i] for c in counts.values()) for i in range(3)]
  precision, recall, f1 = _precision_recall_f1(*totals)
  results = {"precision": precision, "recall": recall, "f1": f1,
             "token_accuracy": correct_tokens / total_tokens if total_tokens else 0.0}
  for entity_type, type_counts in sorted(counts.items()):
    type_precision, type_recall, type_f1 = _precision_recall_f1(*type_counts)
    results[f"precision_{entity_type}"] = type_precision
    results[f"recall_{entity_type}"] = type_recall
    results[f"f1_{entity_type}"] = type_f1
  return results
