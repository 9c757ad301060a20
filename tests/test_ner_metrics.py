"""The conlleval entity scorer on hand-made IOB1, IOB2 and IOBES sequences, and against seqeval's
conlleval-compatible default mode on random ones."""

import numpy as np
import pytest
from seqeval import metrics as seqeval_metrics

from tasks.ner import metrics as ner_metrics


@pytest.mark.parametrize("tags, expected", [
    # IOB2.
    (["B-PER", "I-PER", "O", "B-LOC"], {(0, 1, "PER"), (3, 3, "LOC")}),
    # IOB1: I- after O starts an entity; B- only separates two adjacent entities of one type.
    (["O", "I-PER", "I-PER", "O"], {(1, 2, "PER")}),
    (["I-PER", "B-PER", "I-PER"], {(0, 0, "PER"), (1, 2, "PER")}),
    # A type change inside a span ends one entity and starts another.
    (["B-PER", "I-LOC", "I-LOC"], {(0, 0, "PER"), (1, 2, "LOC")}),
    # An entity that runs to the end of the sentence.
    (["O", "B-ORG", "I-ORG"], {(1, 2, "ORG")}),
    (["I-ORG"], {(0, 0, "ORG")}),
    # IOBES.
    (["S-LOC", "B-PER", "E-PER", "O", "B-ORG", "I-ORG", "E-ORG"],
     {(0, 0, "LOC"), (1, 2, "PER"), (4, 6, "ORG")}),
    (["S-PER", "E-PER", "S-PER"], {(0, 0, "PER"), (1, 1, "PER"), (2, 2, "PER")}),
    (["O", "O"], set()),
])
def test_entities(tags, expected):
  assert ner_metrics.entities(tags) == expected


def test_the_pooled_names_are_reported_even_without_entities():
  assert set(ner_metrics.POOLED_NAMES) <= set(ner_metrics.score([["O", "O"]], [["O", "O"]]))


def test_score_pools_types_and_needs_exact_boundaries():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
  predicted = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-ORG"]]
  # Predicted PER(0,0) misses the gold PER(0,1); LOC and the first ORG are right; the second ORG
  # is spurious: 2 correct of 4 predicted, 2 of 3 gold.
  results = ner_metrics.score(gold, predicted)
  assert results["precision"] == pytest.approx(2 / 4)
  assert results["recall"] == pytest.approx(2 / 3)
  assert results["f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
  assert results["token_accuracy"] == pytest.approx(4 / 6)
  assert (results["precision_PER"], results["recall_PER"], results["f1_PER"]) == (0, 0, 0)
  assert results["f1_LOC"] == 1.0
  assert (results["precision_ORG"], results["recall_ORG"]) == (0.5, 1.0)


def test_iob1_and_iob2_spellings_of_the_same_entities_score_perfectly():
  iob1 = [["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]]
  iob2 = [["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]]
  assert ner_metrics.score(iob1, iob2)["f1"] == 1.0


def test_misaligned_predictions_are_an_error():
  with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
    ner_metrics.score([["O", "O"]], [["O"]])


def _random_tags(rng, length, scheme):
  """Tags of `scheme` (IOB1, IOB2 or IOBES prefixes) drawn at random: invalid sequences (I- after
  O, E- without B-, type changes inside a span) included on purpose."""
  prefixes = {"iob": ["B", "I"], "iobes": ["B", "I", "E", "S"]}[scheme]
  tags = []
  for _ in range(length):
    if rng.random() < 0.4:
      tags.append("O")
    else:
      tags.append(f"{rng.choice(prefixes)}-{rng.choice(['PER', 'LOC', 'ORG'])}")
  return tags


@pytest.mark.parametrize("seed", range(60))
def test_scores_equal_seqeval_conlleval_mode_on_random_tags(seed):
  rng = np.random.default_rng(seed)
  scheme = "iob" if seed % 2 else "iobes"
  gold, predicted = [], []
  for _ in range(int(rng.integers(1, 12))):
    length = int(rng.integers(1, 15))
    gold.append(_random_tags(rng, length, scheme))
    # Half of the predicted tags copy the gold ones, so that some entities match.
    predicted.append([g if rng.random() < 0.5 else t
                      for g, t in zip(gold[-1], _random_tags(rng, length, scheme))])
  ours = ner_metrics.score(gold, predicted)
  for name in ("precision", "recall", "f1"):
    expected = getattr(seqeval_metrics, f"{name}_score")(gold, predicted, zero_division=0)
    assert ours[name] == pytest.approx(expected, abs=1e-12), name
  report = seqeval_metrics.classification_report(gold, predicted, output_dict=True,
                                                 zero_division=0)
  for entity_type in ("PER", "LOC", "ORG"):
    if entity_type in report:
      assert ours[f"precision_{entity_type}"] == pytest.approx(
          report[entity_type]["precision"], abs=1e-12)
      assert ours[f"recall_{entity_type}"] == pytest.approx(report[entity_type]["recall"],
                                                            abs=1e-12)
      assert ours[f"f1_{entity_type}"] == pytest.approx(report[entity_type]["f1-score"],
                                                        abs=1e-12)
