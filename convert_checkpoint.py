r"""Converts BERT weights between the original release's layout and the other forms they come in.

Examples:
  python convert_checkpoint.py --direction=hf_to_bert --input_dir=all-MiniLM-L6-v2 \
      --output_dir=minilm_bert
  python convert_checkpoint.py --direction=bert_to_hf --input_dir=uncased_L-12_H-768_A-12 \
      --output_dir=bert_base_hf
  python convert_checkpoint.py --direction=keras_hub_to_bert --input_dir=bert_base_en_uncased \
      --output_dir=bert_base
  python convert_checkpoint.py --direction=bert_to_keras_hub --input_dir=bert_base \
      --output_dir=bert_base_preset
  python convert_checkpoint.py --direction=model_garden_to_bert \
      --input_dir=bert_en_uncased_L-12_H-768_A-12_tf2 --output_dir=bert_base
  python convert_checkpoint.py --direction=tf_hub_to_bert \
      --input_dir=bert_en_uncased_L-12_H-768_A-12_4 --output_dir=bert_base

Every `*_to_bert` direction writes `bert_config.json` + `bert_model.ckpt.*` + `vocab.txt`, usable
as `--bert_config_file`/`--init_checkpoint`/`--vocab_file` of every runner; every `bert_to_*`
direction reads that layout (optimizer slots and `global_step` are dropped). Sources:
  hf_to_bert / bert_to_hf: a HuggingFace directory (`config.json`, `model.safetensors`).
  keras_hub_to_bert / bert_to_keras_hub: a keras-hub `BertBackbone` preset directory.
  model_garden_to_bert / bert_to_model_garden: a TF Model Garden object-based checkpoint (a
    prefix, or a directory with `bert_model.ckpt.*` or a `checkpoint` file).
  tf_hub_to_bert: a TF Hub / Kaggle BERT encoder SavedModel directory.
Input that cannot be converted is refused with a one-line error before anything is written.
"""

from base import cli
from tasks.conversion import runner
from tasks.conversion.config import ConversionConfig

if __name__ == "__main__":
  cli.run_config(ConversionConfig, runner.run)
