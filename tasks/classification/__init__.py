"""Sentence and sentence-pair classification, regression and multi-label (`run_classifier.py`)."""
