"""The conlleval entity scorer on hand-made IOB1, IOB2 and IOBES sequences."""

import pytest

from data import ner_metrics


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
