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

from absl import flags
from absl import logging

from base import cli
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import pretraining_model
from modeling import sentence_pooling
from serving import encoder_server
from serving import saved_model_export
from training import flags as training_flags
from training import model_inputs

FLAGS = flags.FLAGS

training_flags.define_export_flags()
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pretrained model.")
flags.DEFINE_string("vocab_file", None, "vocab.txt of the pretrained model.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_string("init_checkpoint", None,
                    "The pretrained checkpoint: a prefix, or a directory's latest checkpoint.")
flags.DEFINE_integer("max_seq_length", 128, "Word pieces per input after packing, [CLS] and "
                     "[SEP] included; longer inputs are truncated.")
flags.DEFINE_enum("pooling", "mean", sentence_pooling.POOLING_METHODS,
                  "Sentence embedding of the embed signature: the last layer's [CLS] vector, "
                  "its mean over real tokens, or the pooler output (as extract_features.py "
                  "--pooling=... --layers=-1).")
flags.mark_flags_as_required(["bert_config_file", "vocab_file", "init_checkpoint", "export_dir"])


def check_flags(config):
  """Raises `errors.UsageError` for a `--max_seq_length` or vocab the model cannot take, and
  `tokenization.VocabError` for a casing that contradicts a released checkpoint's name."""
  model_inputs.check_max_seq_length(FLAGS.max_seq_length, config, FLAGS.bert_config_file)
  model_inputs.check_vocab(FLAGS.vocab_file, config, FLAGS.bert_config_file)
  model_inputs.check_init_checkpoint(FLAGS.init_checkpoint, config, FLAGS.bert_config_file)
  tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)


def main(argv):
  del argv
  config = bert_config_lib.BertConfig.from_json_file(FLAGS.bert_config_file)
  check_flags(config)
  model = pretraining_model.BertPretrainingModel(config)
  report = checkpoint_io.assign_from_checkpoint(model.name_to_variable(), FLAGS.init_checkpoint)
  logging.info("loaded %d variables from %s", len(report["loaded"]), FLAGS.init_checkpoint)
  head_missing = [name for name in report["missing"] if name.startswith("cls/predictions/")]
  if head_missing:
    # Converted sentence encoders (e.g. HuggingFace BertModel) carry no masked-LM head; random
    # logits would look like real ones, so the output is left out instead.
    logging.warning("%s has no masked-LM head (%s missing): exporting without mlm_logits",
                    FLAGS.init_checkpoint, head_missing[0])
  server = encoder_server.EncoderServer(
      model.encoder, None if head_missing else model.masked_lm, FLAGS.vocab_file,
      FLAGS.do_lower_case, FLAGS.max_seq_length, FLAGS.pooling,
      with_text=not FLAGS.export_ids_only)
  saved_model_export.export(server, FLAGS.export_dir, server.signatures(), FLAGS.export_version)


if __name__ == "__main__":
  cli.run(main)
