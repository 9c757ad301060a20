"""The pretrained encoder on its own: per-token and sentence vectors of text
(`extract_features.py`) and its export for TensorFlow Serving (`export_model.py`); see
`runner.py`."""
