"""Named-entity recognition: one label per word, CoNLL files (`run_ner.py`)."""
