"""Converting BERT weights between the original layout (`original_files`) and HuggingFace
safetensors (`huggingface`), keras-hub presets (`keras_hub`), TF Model Garden checkpoints and
TF Hub SavedModels (`model_garden`)."""
