"""SQuAD 1.1 / 2.0 question answering: answer spans in a context (`run_squad.py`)."""
