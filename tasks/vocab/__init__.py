"""Learning a WordPiece vocabulary from text (see `runner.py`)."""
