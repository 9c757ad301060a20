"""Converting BERT weights between the original layout and HuggingFace, keras-hub, TF Model
Garden and TF Hub (see `runner.py`)."""
