r"""Converts BERT weights between HuggingFace directories and the original release's layout.

Examples:
  python convert_checkpoint.py --direction=hf_to_bert --input_dir=all-MiniLM-L6-v2 \
      --output_dir=minilm_bert
  python convert_checkpoint.py --direction=bert_to_hf --input_dir=uncased_L-12_H-768_A-12 \
      --output_dir=bert_base_hf

hf_to_bert reads `config.json` + `model.safetensors` + `vocab.txt` and writes `bert_config.json` +
`bert_model.ckpt.*` + `vocab.txt`, usable as `--bert_config_file`/`--init_checkpoint`/`--vocab_file`
of every runner. bert_to_hf goes back (optimizer slots and `global_step` are dropped).
"""

from absl import flags
from absl import logging

from base import cli
from modeling import hf_conversion

FLAGS = flags.FLAGS

flags.DEFINE_enum("direction", None, ["hf_to_bert", "bert_to_hf"],
                  "hf_to_bert: HuggingFace directory -> original layout; bert_to_hf: back.")
flags.DEFINE_string("input_dir", None, "Directory to convert.")
flags.DEFINE_string("output_dir", None, "Directory to write (created if needed).")
flags.mark_flags_as_required(["direction", "input_dir", "output_dir"])


def main(argv):
  del argv
  if FLAGS.direction == "hf_to_bert":
    config = hf_conversion.convert_hf_to_original(FLAGS.input_dir, FLAGS.output_dir)
    logging.info("wrote %s/{%s, %s.*, %s} (hidden_act=%s)", FLAGS.output_dir,
                 hf_conversion.BERT_CONFIG, hf_conversion.BERT_CHECKPOINT, hf_conversion.VOCAB,
                 config.hidden_act)
  else:
    names = hf_conversion.convert_original_to_hf(FLAGS.input_dir, FLAGS.output_dir)
    logging.info("wrote %d tensors to %s/%s", len(names), FLAGS.output_dir,
                 hf_conversion.HF_WEIGHTS)


if __name__ == "__main__":
  cli.run(main)
