r"""Extracts per-token activations of chosen encoder layers, as the original `extract_features.py`.

Each input line is `text_a ||| text_b` or a single text. Each output line is the original's JSON:
`{"linex_index": <line number>, "features": [{"token": ..., "layers": [{"index": <layer>,
"values": [...]}]}]}` (the key `linex_index` is the original's spelling), values rounded to 6
decimals, one entry per real token including `[CLS]` and `[SEP]`.

Example:
  python extract_features.py --input_file=input.txt --output_file=output.jsonl \
      --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
      --init_checkpoint=$BERT_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128
"""

from base import cli
from tasks.encoder import runner
from tasks.encoder.config import ExtractFeaturesConfig

if __name__ == "__main__":
  cli.run_config(ExtractFeaturesConfig, runner.extract_features)
