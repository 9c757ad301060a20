r"""Exports a pretrained BERT checkpoint as a SavedModel feature extractor for TensorFlow Serving.

The checkpoint is `run_pretraining.py`'s (its `--output_dir` or one `model.ckpt-N`), a released
`bert_model.ckpt`, or a HuggingFace model converted by `convert_checkpoint.py`. The export, at
`<export_dir>/<version>/`, serves per-token vectors, the pooled vector, masked-LM logits at every
position and sentence embeddings (see `serving/encoder_server.py` for the signatures); the vocab
travels inside it.

Example:
  python export_model.py --bert_config_file=$BERT_DIR/bert_config.json \
      --vocab_file=$BERT_DIR/vocab.txt --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --max_seq_length=128 --pooling=mean --export_dir=export --export_version=1
"""

from base import cli
from tasks.encoder import runner
from tasks.encoder.config import ExportModelConfig

if __name__ == "__main__":
  cli.run_config(ExportModelConfig, runner.export_model)
