"""Writes tiny TF Model Garden checkpoints and TF Hub SavedModels as test fixtures.

The fixtures let the tests check that this project reads what TensorFlow Model Garden
(tf-models-official) writes, without tf-models-official in the project's environment: it pins
TensorFlow 2.20 and cannot be installed next to the project's TensorFlow 2.21. So this script
imports nothing from the project and runs in a virtualenv of its own:

  python3.11 -m venv model-garden-venv
  model-garden-venv/bin/pip install -r scripts/model_garden_fixtures_requirements.txt
  model-garden-venv/bin/python scripts/make_model_garden_fixtures.py \
      --output_dir=tests/fixtures/model_garden     # from the repository's root

Every model has the same tiny shape (vocab 40, hidden 16, 2 layers, 4 heads, intermediate 32,
24 positions, 2 token types, tanh-approximated GELU), and after it is built every variable is
overwritten with seeded random values (normal(0, 0.2); LayerNorm gamma 1 + normal(0, 0.2)), so
that a weight a reader drops or transposes changes the outputs. Re-running the script writes
the same weights and outputs.

Each `outputs.npz` holds the fixed int32 inputs `input_word_ids`, `input_mask`,
`input_type_ids` (batch 2, length 10; row 1 ends in 3 padding positions) and the float32
`sequence_output` [2, 10, 16] and `pooled_output` [2, 16], computed in inference mode; a fixture
with the masked-LM head also holds int32 `masked_lm_positions` [2, 3] and float32 `mlm_logits`
[2, 3, 40].

Fixture directories under --output_dir. Each has `vocab.txt`, and those with a checkpoint have a
`bert_config.json` in the original BERT format. A checkpoint is `bert_model.ckpt.index` and
`bert_model.ckpt.data-00000-of-00001`, the layout of Google's published TF2 BERT checkpoints,
holding `save_counter` = 1 as those (written by `Checkpoint.save()`) do.

  encoder/             `networks.BertEncoder` (functional) as Model Garden's
                       tf2_bert_encoder_checkpoint_converter.py builds it; checkpoint of
                       `tf.train.Checkpoint(encoder=...)`; outputs.npz.
  encoder_v2/          `networks.BertEncoderV2` (subclassed), from `encoders.build_encoder` with
                       `EncoderConfig(type="bert_v2")`; checkpoint as encoder/; outputs.npz.
  pretrainer/          `models.BertPretrainerV2` (the encoder of encoder/ plus the masked LM, no
                       classification heads) as the converter builds it; checkpoint of
                       `tf.train.Checkpoint(**pretrainer.checkpoint_items)`; outputs.npz with
                       `mlm_logits`.
  pretrainer_nsp/      The same plus a `ClassificationHead` named "next_sentence", whose
                       pooler_dense the checkpoint holds; checkpoint only, no outputs.
  embedding_width/     `networks.BertEncoder` with factorised embeddings (`embedding_width` 8,
                       which the original BERT cannot express); checkpoint only, and
                       bert_config.json has an extra "embedding_size": 8.
  tf_hub_encoder/      `saved_model/`: encoder/'s checkpoint exported by
                       `export_tfhub_lib.export_model(with_mlm=False)`, as TF Hub's BERT encoders
                       are (vocab and do_lower_case inside); outputs.npz from
                       `tf.saved_model.load` of it. No bert_config.json, as on TF Hub.
  tf_hub_encoder_mlm/  `saved_model/`: pretrainer/'s checkpoint exported with `with_mlm=True`,
                       which adds the `.mlm` subobject; outputs.npz with `mlm_logits` from `.mlm`.
  tf_hub_norm_first/   `saved_model/`: a pre-LN (`norm_first=True`) encoder built from an
                       `EncoderConfig(type="bert")`, exported likewise; outputs.npz.
"""

import json
import os
import shutil
import tempfile
import zipfile

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

from official.legacy.bert import configs
from official.modeling import tf_utils
from official.nlp.configs import encoders
from official.nlp.modeling import layers
from official.nlp.modeling import models
from official.nlp.tools import export_tfhub_lib
# The converter's model builders are used as they are, so the fixtures hold exactly the object
# graph that converted checkpoints have. Importing it defines its flags, none of which clash.
from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Directory that receives one subdirectory per fixture.")
flags.mark_flag_as_required("output_dir")

# Five special tokens, then made-up word pieces; 40 in all, so vocab_size stays tiny.
VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "a", "cat", "dog", "sat", "on", "mat", "ran", "to", "is",
    "red", "blue", "big", "small", "tree", "house", "sun", "moon", "play", "jump",
    "walk", "ball", "and", "un", "re",
    "##s", "##ed", "##ing", "##er", "##ly", "##est", "##y", "##ful", "##ness", "##less",
]

# The original BERT's bert_config.json keys, in its order.
BERT_CONFIG = {
    "vocab_size": len(VOCAB),
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 32,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 24,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}

EMBEDDING_WIDTH = 8

# Row 0 fills all 10 positions with two segments; row 1 is 7 tokens and 3 padding positions,
# so that a reader that ignores input_mask gives different outputs. [MASK] (4) sits at some of
# the masked positions, as in pretraining data.
INPUT_WORD_IDS = np.array([
    [2, 5, 7, 4, 3, 8, 12, 13, 11, 3],
    [2, 6, 4, 3, 21, 30, 3, 0, 0, 0],
], dtype=np.int32)
INPUT_MASK = np.array([
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    [1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
], dtype=np.int32)
INPUT_TYPE_IDS = np.array([
    [0, 0, 0, 0, 0, 1, 1, 1, 1, 1],
    [0, 0, 0, 0, 1, 1, 1, 0, 0, 0],
], dtype=np.int32)
MASKED_LM_POSITIONS = np.array([
    [1, 3, 7],
    [2, 4, 5],
], dtype=np.int32)

CHECKPOINT_NAME = "bert_model.ckpt"


def _legacy_bert_config(**overrides):
  """Returns the Model Garden `BertConfig` that the converter and exporter take."""
  return configs.BertConfig.from_dict(dict(BERT_CONFIG, **overrides))


def _bert_encoder_config(encoder_type, **overrides):
  """Returns an `EncoderConfig` of the same sizes, as Model Garden's experiment configs hold."""
  bert = encoders.BertEncoderConfig(
      vocab_size=BERT_CONFIG["vocab_size"],
      hidden_size=BERT_CONFIG["hidden_size"],
      num_layers=BERT_CONFIG["num_hidden_layers"],
      num_attention_heads=BERT_CONFIG["num_attention_heads"],
      hidden_activation=BERT_CONFIG["hidden_act"],
      intermediate_size=BERT_CONFIG["intermediate_size"],
      dropout_rate=BERT_CONFIG["hidden_dropout_prob"],
      attention_dropout_rate=BERT_CONFIG["attention_probs_dropout_prob"],
      max_position_embeddings=BERT_CONFIG["max_position_embeddings"],
      type_vocab_size=BERT_CONFIG["type_vocab_size"],
      initializer_range=BERT_CONFIG["initializer_range"],
      **overrides)
  return encoders.EncoderConfig(type=encoder_type, **{encoder_type: bert})


def _seed(seed):
  """Seeds Python, NumPy and TensorFlow; returns the Generator for the weight values."""
  tf_keras.utils.set_random_seed(seed)
  return np.random.default_rng(seed)


def _randomize(variables, rng):
  """Overwrites every variable with random values, so that every weight affects the outputs.

  Freshly initialised biases and LayerNorm parameters are all zeros and ones, which would hide a
  reader that drops or mixes them up.

  Args:
    variables: The model's variables, in its (deterministic) creation order. A variable listed
      twice, like the embedding table that the masked LM shares, is assigned once.
    rng: The `np.random.Generator` that supplies the values.
  """
  seen = set()
  for variable in variables:
    if variable.ref() in seen:
      continue
    seen.add(variable.ref())
    values = rng.normal(0.0, 0.2, size=variable.shape.as_list())
    if variable.name.split("/")[-1].startswith("gamma"):
      values += 1.0
    variable.assign(values.astype(variable.dtype.as_numpy_dtype))


def _write_checkpoint(path, **items):
  """Writes a TF2 object-based checkpoint of `items` to the prefix `path`, with a save_counter.

  Model Garden's converter writes with `Checkpoint.save()`, so Google's published TF2 BERT
  checkpoints hold `save_counter` = 1, and `export_tfhub_lib.export_model` asserts that its
  checkpoint has one. `save()` would name the files `<path>-1.*` and add a `checkpoint` file;
  writing the counter explicitly gives the published `bert_model.ckpt.*` names instead.

  Args:
    path: The checkpoint prefix, e.g. `<dir>/bert_model.ckpt`.
    **items: The objects to checkpoint, by key (e.g. `encoder=...`).
  """
  checkpoint = tf.train.Checkpoint(**items)
  checkpoint.save_counter.assign(1)
  checkpoint.write(path)


def _encoder_inputs():
  return dict(
      input_word_ids=tf.constant(INPUT_WORD_IDS),
      input_mask=tf.constant(INPUT_MASK),
      input_type_ids=tf.constant(INPUT_TYPE_IDS))


def _save_npz(path, arrays):
  """Writes `arrays` like `np.savez`, but with fixed timestamps.

  `np.savez` stamps each member with the current time, so a re-run would change the committed
  bytes even though the arrays are the same.

  Args:
    path: The .npz file to write.
    arrays: A dict of name to NumPy array.
  """
  with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
    for name, array in arrays.items():
      info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
      with archive.open(info, "w", force_zip64=True) as member:
        np.lib.format.write_array(member, np.asarray(array), allow_pickle=False)


def _save_outputs(fixture_dir, sequence_output, pooled_output, mlm_logits=None):
  arrays = dict(
      input_word_ids=INPUT_WORD_IDS,
      input_mask=INPUT_MASK,
      input_type_ids=INPUT_TYPE_IDS,
      sequence_output=np.asarray(sequence_output, np.float32),
      pooled_output=np.asarray(pooled_output, np.float32))
  if mlm_logits is not None:
    arrays["masked_lm_positions"] = MASKED_LM_POSITIONS
    arrays["mlm_logits"] = np.asarray(mlm_logits, np.float32)
  _save_npz(os.path.join(fixture_dir, "outputs.npz"), arrays)
  return arrays


def _new_fixture_dir(output_dir, name, vocab_file, bert_config=None):
  """Creates an empty fixture directory (removing a stale one) with vocab and config."""
  fixture_dir = os.path.join(output_dir, name)
  if os.path.exists(fixture_dir):
    shutil.rmtree(fixture_dir)
  os.makedirs(fixture_dir)
  shutil.copyfile(vocab_file, os.path.join(fixture_dir, "vocab.txt"))
  if bert_config is not None:
    with open(os.path.join(fixture_dir, "bert_config.json"), "w") as f:
      json.dump(bert_config, f, indent=2)
      f.write("\n")
  return fixture_dir


def _make_encoder(output_dir, vocab_file):
  """Fixture encoder/: a functional BertEncoder, as the TF1-to-TF2 converter builds it."""
  fixture_dir = _new_fixture_dir(output_dir, "encoder", vocab_file, BERT_CONFIG)
  rng = _seed(1)
  encoder = converter._create_bert_model(_legacy_bert_config())  # pylint: disable=protected-access
  _randomize(encoder.variables, rng)
  _write_checkpoint(os.path.join(fixture_dir, CHECKPOINT_NAME), encoder=encoder)
  inputs = _encoder_inputs()
  # The converter's encoder has list outputs (dict_outputs=False) and list inputs.
  sequence_output, pooled_output = encoder(
      [inputs["input_word_ids"], inputs["input_mask"], inputs["input_type_ids"]],
      training=False)
  return _save_outputs(fixture_dir, sequence_output, pooled_output)


def _make_encoder_v2(output_dir, vocab_file):
  """Fixture encoder_v2/: the subclassed BertEncoderV2 of Model Garden's "bert_v2" config."""
  fixture_dir = _new_fixture_dir(output_dir, "encoder_v2", vocab_file, BERT_CONFIG)
  rng = _seed(2)
  # EncoderConfig(type="bert") builds the functional BertEncoder again (with dict outputs),
  # whose checkpoint is that of encoder/; "bert_v2" is the one that builds BertEncoderV2.
  encoder = encoders.build_encoder(_bert_encoder_config("bert_v2"))
  assert type(encoder).__name__ == "BertEncoderV2", type(encoder)
  # A subclassed layer creates its variables on the first call.
  encoder(_encoder_inputs(), training=False)
  _randomize(encoder.variables, rng)
  _write_checkpoint(os.path.join(fixture_dir, CHECKPOINT_NAME), encoder=encoder)
  outputs = encoder(_encoder_inputs(), training=False)
  return _save_outputs(fixture_dir, outputs["sequence_output"], outputs["pooled_output"])


def _pretrainer_inputs():
  return dict(_encoder_inputs(), masked_lm_positions=tf.constant(MASKED_LM_POSITIONS))


def _make_pretrainer(output_dir, vocab_file):
  """Fixture pretrainer/: BertPretrainerV2 with the masked LM and no classification heads."""
  fixture_dir = _new_fixture_dir(output_dir, "pretrainer", vocab_file, BERT_CONFIG)
  rng = _seed(3)
  # pylint: disable-next=protected-access
  pretrainer = converter._create_bert_pretrainer_model(_legacy_bert_config())
  _randomize(pretrainer.variables, rng)
  _write_checkpoint(os.path.join(fixture_dir, CHECKPOINT_NAME), **pretrainer.checkpoint_items)
  outputs = pretrainer(_pretrainer_inputs(), training=False)
  return _save_outputs(fixture_dir, outputs["sequence_output"], outputs["pooled_output"],
                       outputs["mlm_logits"])


def _make_pretrainer_nsp(output_dir, vocab_file):
  """Fixture pretrainer_nsp/: BertPretrainerV2 with a next-sentence ClassificationHead."""
  fixture_dir = _new_fixture_dir(output_dir, "pretrainer_nsp", vocab_file, BERT_CONFIG)
  rng = _seed(4)
  bert_config = _legacy_bert_config()
  # As the converter's _create_bert_pretrainer_model, plus the head.
  pretrainer = models.BertPretrainerV2(
      encoder_network=converter._create_bert_model(bert_config),  # pylint: disable=protected-access
      mlm_activation=tf_utils.get_activation(bert_config.hidden_act),
      mlm_initializer=tf_keras.initializers.TruncatedNormal(
          stddev=bert_config.initializer_range),
      classification_heads=[
          layers.ClassificationHead(
              inner_dim=bert_config.hidden_size, num_classes=2, name="next_sentence")
      ])
  # The masked LM and the head create their variables on the first call.
  pretrainer(_pretrainer_inputs(), training=False)
  _randomize(pretrainer.variables, rng)
  _write_checkpoint(os.path.join(fixture_dir, CHECKPOINT_NAME), **pretrainer.checkpoint_items)


def _make_embedding_width(output_dir, vocab_file):
  """Fixture embedding_width/: factorised embeddings, which the original BERT cannot express."""
  bert_config = dict(BERT_CONFIG, embedding_size=EMBEDDING_WIDTH)
  fixture_dir = _new_fixture_dir(output_dir, "embedding_width", vocab_file, bert_config)
  rng = _seed(8)
  # pylint: disable-next=protected-access
  encoder = converter._create_bert_model(configs.BertConfig.from_dict(bert_config))
  _randomize(encoder.variables, rng)
  _write_checkpoint(os.path.join(fixture_dir, CHECKPOINT_NAME), encoder=encoder)


def _export_tf_hub(fixture_dir, masked_lm, **export_kwargs):
  """Exports a TF Hub SavedModel to <fixture_dir>/saved_model and saves its outputs.

  Args:
    fixture_dir: The fixture directory.
    masked_lm: Whether to export and run the `.mlm` subobject too.
    **export_kwargs: The model and checkpoint arguments of `export_tfhub_lib.export_model`.

  Returns:
    The arrays of outputs.npz.
  """
  export_path = os.path.join(fixture_dir, "saved_model")
  export_tfhub_lib.export_model(
      export_path=export_path,
      with_mlm=masked_lm,
      vocab_file=os.path.join(fixture_dir, "vocab.txt"),
      do_lower_case=True,
      **export_kwargs)
  # The outputs come from the reloaded SavedModel, as a TF Hub user would get them.
  loaded = tf.saved_model.load(export_path)
  outputs = loaded(_encoder_inputs(), training=False)
  mlm_logits = None
  if masked_lm:
    mlm_logits = loaded.mlm(_pretrainer_inputs(), training=False)["mlm_logits"]
  return _save_outputs(fixture_dir, outputs["sequence_output"], outputs["pooled_output"],
                       mlm_logits)


def _make_tf_hub_export(output_dir, vocab_file, name, source_dir, masked_lm, seed):
  """Fixtures tf_hub_encoder/ and tf_hub_encoder_mlm/: the checkpoint in `source_dir` (encoder/,
  or pretrainer/ with `masked_lm`) as a TF Hub SavedModel (with `.mlm` if `masked_lm`)."""
  fixture_dir = _new_fixture_dir(output_dir, name, vocab_file)
  _seed(seed)
  return _export_tf_hub(
      fixture_dir, masked_lm=masked_lm, bert_config=_legacy_bert_config(),
      model_checkpoint_path=os.path.join(source_dir, CHECKPOINT_NAME))


def _make_tf_hub_norm_first(output_dir, vocab_file):
  """Fixture tf_hub_norm_first/: a pre-LN encoder as a TF Hub SavedModel."""
  fixture_dir = _new_fixture_dir(output_dir, "tf_hub_norm_first", vocab_file)
  rng = _seed(7)
  encoder_config = _bert_encoder_config("bert", norm_first=True)
  encoder = encoders.build_encoder(encoder_config)
  _randomize(encoder.variables, rng)
  # The exporter only restores from a checkpoint; that checkpoint is not part of the fixture.
  with tempfile.TemporaryDirectory() as checkpoint_dir:
    checkpoint_path = os.path.join(checkpoint_dir, CHECKPOINT_NAME)
    _write_checkpoint(checkpoint_path, encoder=encoder)
    return _export_tf_hub(
        fixture_dir, masked_lm=False, encoder_config=encoder_config,
        model_checkpoint_path=checkpoint_path)


def _assert_same_outputs(expected, actual, keys):
  """Checks that an export restored every weight: its outputs match the checkpointed model's."""
  for key in keys:
    np.testing.assert_allclose(actual[key], expected[key], rtol=1e-5, atol=1e-5, err_msg=key)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("Too many command-line arguments.")
  output_dir = FLAGS.output_dir
  os.makedirs(output_dir, exist_ok=True)
  with tempfile.TemporaryDirectory() as scratch_dir:
    vocab_file = os.path.join(scratch_dir, "vocab.txt")
    assert len(VOCAB) == BERT_CONFIG["vocab_size"] == len(set(VOCAB))
    with open(vocab_file, "w") as f:
      f.write("".join(token + "\n" for token in VOCAB))

    encoder_outputs = _make_encoder(output_dir, vocab_file)
    _make_encoder_v2(output_dir, vocab_file)
    pretrainer_outputs = _make_pretrainer(output_dir, vocab_file)
    _make_pretrainer_nsp(output_dir, vocab_file)
    _make_embedding_width(output_dir, vocab_file)

    hub_outputs = _make_tf_hub_export(output_dir, vocab_file, "tf_hub_encoder",
                                      os.path.join(output_dir, "encoder"), False, seed=5)
    _assert_same_outputs(encoder_outputs, hub_outputs, ["sequence_output", "pooled_output"])
    hub_mlm_outputs = _make_tf_hub_export(output_dir, vocab_file, "tf_hub_encoder_mlm",
                                          os.path.join(output_dir, "pretrainer"), True, seed=6)
    _assert_same_outputs(pretrainer_outputs, hub_mlm_outputs,
                         ["sequence_output", "pooled_output", "mlm_logits"])
    _make_tf_hub_norm_first(output_dir, vocab_file)


if __name__ == "__main__":
  app.run(main)
