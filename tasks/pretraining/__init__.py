"""Pretraining as a task family: masked LM and next sentence prediction (see `runner.py`)."""
