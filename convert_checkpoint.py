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

from absl import flags
from absl import logging

from base import cli
from modeling import hf_conversion
from modeling import keras_hub_conversion
from modeling import model_garden_conversion

FLAGS = flags.FLAGS

DIRECTIONS = ("hf_to_bert", "bert_to_hf", "keras_hub_to_bert", "bert_to_keras_hub",
              "model_garden_to_bert", "bert_to_model_garden", "tf_hub_to_bert")

flags.DEFINE_enum("direction", None, DIRECTIONS,
                  "<source>_to_bert: a directory of that source -> the original layout; "
                  "bert_to_<target>: back.")
flags.DEFINE_string("input_dir", None, "Directory to convert.")
flags.DEFINE_string("output_dir", None, "Directory to write (created if needed).")
flags.DEFINE_bool("do_lower_case", True,
                  "bert_to_keras_hub: the preset's tokenizer lower-cases and strips accents, as "
                  "the original's --do_lower_case.")
flags.DEFINE_string("vocab_file", None,
                    "bert_to_* and model_garden_to_bert: the vocabulary, when --input_dir has no "
                    "vocab.txt (a run's --output_dir, read at its latest checkpoint; a Model "
                    "Garden training directory).")
flags.DEFINE_string("bert_config_file", None,
                    "model_garden_to_bert: the config of the checkpoint (default: the "
                    "bert_config.json beside it, else sizes inferred from the weights with "
                    "Model Garden's default activation, the tanh GELU).")
flags.DEFINE_bool("copy_pooler_dense_to_encoder", False,
                  "model_garden_to_bert: take the pooler from a BertPretrainerV2's "
                  "next_sentence.pooler_dense (the one Model Garden's pre-training trains), as "
                  "Model Garden's export_tfhub flag of that name.")
flags.mark_flags_as_required(["direction", "input_dir", "output_dir"])


def _log_left_out(names, target):
  if names:
    logging.info("left out %d variables (%s has no place for them): %s", len(names), target,
                 ", ".join(names[:5]) + (" ..." if len(names) > 5 else ""))


def main(argv):
  del argv
  if FLAGS.direction == "hf_to_bert":
    config = hf_conversion.convert_hf_to_original(FLAGS.input_dir, FLAGS.output_dir)
    logging.info("wrote %s in the original layout (hidden_act=%s)", FLAGS.output_dir,
                 config.hidden_act)
  elif FLAGS.direction == "bert_to_hf":
    names = hf_conversion.convert_original_to_hf(FLAGS.input_dir, FLAGS.output_dir,
                                                 FLAGS.vocab_file)
    logging.info("wrote %d tensors to %s/%s", len(names), FLAGS.output_dir,
                 hf_conversion.HF_WEIGHTS)
  elif FLAGS.direction == "keras_hub_to_bert":
    config, lowercase = keras_hub_conversion.convert_keras_hub_to_original(FLAGS.input_dir,
                                                                          FLAGS.output_dir)
    logging.info("wrote %s in the original layout (%d layers); its tokenizer %s: pass "
                 "--do_lower_case=%s", FLAGS.output_dir, config.num_hidden_layers,
                 "lower-cases" if lowercase else "keeps case", lowercase)
  elif FLAGS.direction == "bert_to_keras_hub":
    left_out = keras_hub_conversion.convert_original_to_keras_hub(
        FLAGS.input_dir, FLAGS.output_dir, FLAGS.do_lower_case, FLAGS.vocab_file)
    _log_left_out(left_out, "a BertBackbone")
    logging.info("wrote a keras-hub preset to %s", FLAGS.output_dir)
  elif FLAGS.direction == "model_garden_to_bert":
    config = model_garden_conversion.convert_model_garden_to_original(
        FLAGS.input_dir, FLAGS.output_dir, FLAGS.bert_config_file, FLAGS.vocab_file,
        FLAGS.copy_pooler_dense_to_encoder)
    logging.info("wrote %s in the original layout (%d layers, hidden_act=%s)", FLAGS.output_dir,
                 config.num_hidden_layers, config.hidden_act)
  elif FLAGS.direction == "bert_to_model_garden":
    left_out = model_garden_conversion.convert_original_to_model_garden(
        FLAGS.input_dir, FLAGS.output_dir, FLAGS.vocab_file)
    _log_left_out(left_out, "a Model Garden encoder with a masked LM")
    logging.info("wrote a Model Garden checkpoint to %s", FLAGS.output_dir)
  elif FLAGS.direction == "tf_hub_to_bert":
    config, do_lower_case, difference = model_garden_conversion.convert_tf_hub_to_original(
        FLAGS.input_dir, FLAGS.output_dir)
    logging.info("wrote %s in the original layout (%d layers, hidden_act=%s: outputs within "
                 "%.2g of the SavedModel's); pass --do_lower_case=%s", FLAGS.output_dir,
                 config.num_hidden_layers, config.hidden_act, difference, do_lower_case)


if __name__ == "__main__":
  cli.run(main)
