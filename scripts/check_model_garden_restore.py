"""Checks that TF Model Garden restores what `convert_checkpoint.py --direction=bert_to_model_garden`
writes, and computes what the fixture it came from computes.

Runs in the virtualenv of `make_model_garden_fixtures.py` (tf-models-official, TensorFlow 2.20),
which the project's tests cannot import. Convert a fixture there and back, then check:

  python convert_checkpoint.py --direction=model_garden_to_bert \
      --input_dir=tests/fixtures/model_garden/pretrainer --output_dir=/tmp/bert
  python convert_checkpoint.py --direction=bert_to_model_garden --input_dir=/tmp/bert \
      --output_dir=/tmp/model_garden
  model-garden-venv/bin/python scripts/check_model_garden_restore.py --model_dir=/tmp/model_garden \
      --outputs=tests/fixtures/model_garden/pretrainer/outputs.npz

The checkpoint is restored with `assert_consumed()` (every value it holds finds its variable) into
`BertEncoder`, `BertEncoderV2` and a `BertPretrainerV2`, and exported as a TF Hub SavedModel by
`export_tfhub_lib.export_model`; each prints its max abs difference from the fixture's outputs and
the script fails above 1e-5.
"""

import os
import tempfile

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from official.legacy.bert import configs
from official.nlp.configs import encoders
from official.nlp.tools import export_tfhub_lib
from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "bert_to_model_garden's output directory.")
flags.DEFINE_string("outputs", None, "outputs.npz of the fixture the weights came from.")
flags.mark_flags_as_required(["model_dir", "outputs"])

TOLERANCE = 1e-5


def _inputs(expected):
  return {name: tf.constant(expected[name])
          for name in ("input_word_ids", "input_mask", "input_type_ids")}


def _report(what, outputs, expected):
  if isinstance(outputs, (list, tuple)):  # `BertEncoder` without dict_outputs.
    outputs = dict(zip(("sequence_output", "pooled_output"), outputs))
  difference = max(float(np.abs(np.asarray(outputs[key]) - expected[key]).max())
                   for key in ("sequence_output", "pooled_output", "mlm_logits")
                   if key in outputs and key in expected)
  print(f"{what}: max abs difference {difference:.3g}")
  if difference > TOLERANCE:
    raise SystemExit(f"{what} differs from the fixture by {difference}")


def main(argv):
  del argv
  expected = np.load(FLAGS.outputs)
  prefix = os.path.join(FLAGS.model_dir, "bert_model.ckpt")
  bert_config = configs.BertConfig.from_json_file(os.path.join(FLAGS.model_dir,
                                                               "bert_config.json"))
  # pylint: disable=protected-access
  encoder = converter._create_bert_model(bert_config)
  tf.train.Checkpoint(encoder=encoder).restore(prefix).assert_existing_objects_matched()
  _report("BertEncoder", encoder(_inputs(expected), training=False), expected)

  encoder_v2 = encoders.build_encoder(encoders.EncoderConfig(
      type="bert_v2", bert_v2=encoders.BertEncoderConfig(
          vocab_size=bert_config.vocab_size, hidden_size=bert_config.hidden_size,
          num_layers=bert_config.num_hidden_layers,
          num_attention_heads=bert_config.num_attention_heads,
          intermediate_size=bert_config.intermediate_size,
          max_position_embeddings=bert_config.max_position_embeddings,
          type_vocab_size=bert_config.type_vocab_size)))
  tf.train.Checkpoint(encoder=encoder_v2).restore(prefix).assert_existing_objects_matched()
  _report("BertEncoderV2", encoder_v2(_inputs(expected), training=False), expected)

  if "mlm_logits" in expected:
    pretrainer = converter._create_bert_pretrainer_model(bert_config)
    tf.train.Checkpoint(**pretrainer.checkpoint_items).restore(prefix).assert_consumed()
    inputs = dict(_inputs(expected),
                  masked_lm_positions=tf.constant(expected["masked_lm_positions"]))
    _report("BertPretrainerV2", pretrainer(inputs, training=False), expected)

  with tempfile.TemporaryDirectory() as export_dir:
    export_tfhub_lib.export_model(
        export_dir, bert_config=bert_config, model_checkpoint_path=prefix, with_mlm=False,
        vocab_file=os.path.join(FLAGS.model_dir, "vocab.txt"), do_lower_case=True)
    _report("TF Hub SavedModel", tf.saved_model.load(export_dir)(_inputs(expected),
                                                                  training=False), expected)


if __name__ == "__main__":
  app.run(main)
