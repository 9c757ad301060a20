"""TF Model Garden checkpoints and TF Hub SavedModels in and out, checked against what
tf-models-official itself computed.

Reference: `tests/fixtures/model_garden/`, written by `scripts/make_model_garden_fixtures.py` with
tf-models-official 2.20.0 (it cannot be installed beside this project's TensorFlow): tiny random
encoders, their checkpoints and SavedModels, and their outputs on fixed inputs. Tolerance: max abs
difference of sequence and pooled outputs (and masked-LM logits) <= 1e-5 in float32. Round trips
original -> Model Garden -> original are compared byte for byte.
"""

import pathlib

import numpy as np
import pytest
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import pretraining_model
from tests import original_dirs
from tests import scripts

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "model_garden"
pytestmark = pytest.mark.slow

TOLERANCE = 1e-5


def _convert(direction, input_dir, output_dir, *flags):
  return scripts.run_in_process("convert_checkpoint.py", f"--direction={direction}",
                                f"--input_dir={input_dir}", f"--output_dir={output_dir}", *flags)


def _expected(fixture):
  return dict(np.load(FIXTURES / fixture / "outputs.npz"))


def _inputs(expected):
  return expected["input_word_ids"], expected["input_mask"], expected["input_type_ids"]


def _masked_lm_logits(model_dir, expected):
  """Our pre-training model's masked-LM logits `[batch, predictions, vocab]` from `model_dir`."""
  config = bert_config_lib.BertConfig.from_json_file(str(model_dir / "bert_config.json"))
  model = pretraining_model.BertPretrainingModel(config)
  report = checkpoint_io.assign_from_checkpoint(
      model.name_to_variable(), str(model_dir / "bert_model.ckpt"),
      required_prefixes=("bert/", "cls/predictions/"), allow_partial=True)
  assert [name for name in report["missing"] if not name.startswith("cls/seq_")] == []
  word_ids, mask, type_ids = _inputs(expected)
  outputs = model({"input_ids": word_ids, "input_mask": mask, "segment_ids": type_ids,
                   "masked_lm_positions": expected["masked_lm_positions"]}, training=False)
  return outputs["masked_lm_logits"].numpy()


@pytest.mark.parametrize("fixture", ["encoder", "encoder_v2", "pretrainer"])
def test_model_garden_checkpoint_matches_model_garden(fixture, tmp_path):
  result = _convert("model_garden_to_bert", FIXTURES / fixture, tmp_path)
  assert result.returncode == 0, result.stderr
  expected = _expected(fixture)
  difference = original_dirs.max_difference(
      original_dirs.encoder_outputs(tmp_path, *_inputs(expected)),
      (expected["sequence_output"], expected["pooled_output"]))
  assert difference <= TOLERANCE, difference
  assert (tmp_path / "vocab.txt").read_bytes() == (FIXTURES / fixture / "vocab.txt").read_bytes()
  if "mlm_logits" in expected:
    logits_difference = np.abs(_masked_lm_logits(tmp_path, expected)
                               - expected["mlm_logits"]).max()
    assert logits_difference <= TOLERANCE, logits_difference


def test_config_is_inferred_when_the_checkpoint_has_none(tmp_path):
  prefix = tmp_path / "alone" / "ckpt-1"
  prefix.parent.mkdir()
  for suffix in (".index", ".data-00000-of-00001"):
    (tmp_path / "alone" / f"ckpt-1{suffix}").write_bytes(
        (FIXTURES / "encoder" / f"bert_model.ckpt{suffix}").read_bytes())
  (tmp_path / "alone" / "vocab.txt").write_bytes((FIXTURES / "encoder" / "vocab.txt").read_bytes())
  result = _convert("model_garden_to_bert", prefix, tmp_path / "out")
  assert result.returncode == 0, result.stderr
  assert "inferred the sizes from the weights" in result.stderr
  inferred = (tmp_path / "out" / "bert_config.json").read_text()
  given = bert_config_lib.BertConfig.from_json_file(str(FIXTURES / "encoder" / "bert_config.json"))
  assert bert_config_lib.BertConfig.from_json_file(str(tmp_path / "out" / "bert_config.json")) \
      == given, inferred


@pytest.mark.parametrize("fixture", ["tf_hub_encoder", "tf_hub_encoder_mlm"])
def test_tf_hub_saved_model_matches_its_outputs(fixture, tmp_path):
  result = _convert("tf_hub_to_bert", FIXTURES / fixture / "saved_model", tmp_path)
  assert result.returncode == 0, result.stderr
  assert "hidden_act=gelu" in result.stderr and "--do_lower_case=True" in result.stderr
  expected = _expected(fixture)
  difference = original_dirs.max_difference(
      original_dirs.encoder_outputs(tmp_path, *_inputs(expected)),
      (expected["sequence_output"], expected["pooled_output"]))
  assert difference <= TOLERANCE, difference
  assert (tmp_path / "vocab.txt").read_bytes() == (
      FIXTURES / fixture / "saved_model" / "assets" / "vocab.txt").read_bytes()
  if "mlm_logits" in expected:
    logits_difference = np.abs(_masked_lm_logits(tmp_path, expected)
                               - expected["mlm_logits"]).max()
    assert logits_difference <= TOLERANCE, logits_difference


def test_original_to_model_garden_to_original_is_bit_identical(tmp_path):
  config = original_dirs.tiny_config()
  weights = original_dirs.random_weights(config, seed=6, with_pretraining_heads=True)
  original_dirs.write_original_dir(tmp_path / "bert", config, weights)
  result = _convert("bert_to_model_garden", tmp_path / "bert", tmp_path / "model_garden")
  assert result.returncode == 0, result.stderr
  assert "left out 2 variables" in result.stderr  # cls/seq_relationship/*
  keys = dict(tf.train.list_variables(str(tmp_path / "model_garden" / "bert_model.ckpt")))
  assert keys["encoder/_transformer_layers/1/_attention_layer/_query_dense/kernel/"
              ".ATTRIBUTES/VARIABLE_VALUE"] == [16, 4, 4]
  result = _convert("model_garden_to_bert", tmp_path / "model_garden", tmp_path / "back")
  assert result.returncode == 0, result.stderr
  del weights["cls/seq_relationship/output_weights"], weights["cls/seq_relationship/output_bias"]
  original_dirs.write_original_dir(tmp_path / "without_nsp", config, weights)
  for name in ("bert_config.json", "vocab.txt", "bert_model.ckpt.index",
               "bert_model.ckpt.data-00000-of-00001"):
    assert (tmp_path / "back" / name).read_bytes() == (
        tmp_path / "without_nsp" / name).read_bytes(), name


def test_model_garden_checkpoint_written_here_reads_back_as_model_garden_wrote_it(tmp_path):
  """The fixture's weights written back by bert_to_model_garden hold the same values under the
  attribute paths Model Garden's object graph also has (checked to restore, bit-identically, in
  tf-models-official by scripts/check_model_garden_restore.py)."""
  assert _convert("model_garden_to_bert", FIXTURES / "pretrainer", tmp_path / "bert"
                  ).returncode == 0
  assert _convert("bert_to_model_garden", tmp_path / "bert", tmp_path / "model_garden"
                  ).returncode == 0
  theirs = tf.train.load_checkpoint(str(FIXTURES / "pretrainer" / "bert_model.ckpt"))
  ours = tf.train.load_checkpoint(str(tmp_path / "model_garden" / "bert_model.ckpt"))
  for key in ("masked_lm/dense/kernel", "masked_lm/layer_norm/gamma",
              "encoder/layer_with_weights-6/kernel"):
    our_key = key.replace("layer_with_weights-6", "_pooler_layer")
    assert np.array_equal(ours.get_tensor(f"{our_key}/.ATTRIBUTES/VARIABLE_VALUE"),
                          theirs.get_tensor(f"{key}/.ATTRIBUTES/VARIABLE_VALUE")), key
  assert ours.get_tensor("save_counter/.ATTRIBUTES/VARIABLE_VALUE") == 1


def test_next_sentence_pooler_becomes_the_pooler_on_request(tmp_path):
  result = _convert("model_garden_to_bert", FIXTURES / "pretrainer_nsp", tmp_path,
                    "--copy_pooler_dense_to_encoder")
  assert result.returncode == 0, result.stderr
  theirs = tf.train.load_checkpoint(str(FIXTURES / "pretrainer_nsp" / "bert_model.ckpt"))
  ours = tf.train.load_checkpoint(str(tmp_path / "bert_model.ckpt"))
  for leaf in ("kernel", "bias"):
    head = theirs.get_tensor(f"next_sentence..pooler_dense/{leaf}/.ATTRIBUTES/VARIABLE_VALUE")
    encoders_own = theirs.get_tensor(
        f"encoder/layer_with_weights-6/{leaf}/.ATTRIBUTES/VARIABLE_VALUE")
    assert np.array_equal(ours.get_tensor(f"bert/pooler/dense/{leaf}"), head), leaf
    assert not np.array_equal(head, encoders_own), leaf


def _object_checkpoint_missing_the_pooler(directory):
  """A Model Garden-shaped encoder checkpoint whose pooler is absent."""
  encoder = tf.Module()
  encoder._embedding_layer = tf.Module()
  encoder._embedding_layer.embeddings = tf.Variable(tf.zeros([40, 16]))
  encoder._transformer_layers = []
  directory.mkdir()
  tf.train.Checkpoint(encoder=encoder).write(str(directory / "bert_model.ckpt"))
  (directory / "vocab.txt").write_text("[PAD]\n")
  return directory


@pytest.mark.parametrize("case", ["next_sentence_head", "factorised_embeddings",
                                  "name_based_checkpoint", "missing_variable", "norm_first",
                                  "not_a_saved_model", "missing_checkpoint"])
def test_bad_input_is_one_line_error_and_nothing_written(case, tmp_path):
  direction, input_dir = {
      "next_sentence_head": ("model_garden_to_bert", FIXTURES / "pretrainer_nsp"),
      "factorised_embeddings": ("model_garden_to_bert", FIXTURES / "embedding_width"),
      "name_based_checkpoint": ("model_garden_to_bert", tmp_path / "original"),
      "missing_variable": ("model_garden_to_bert", tmp_path / "partial"),
      "norm_first": ("tf_hub_to_bert", FIXTURES / "tf_hub_norm_first" / "saved_model"),
      "not_a_saved_model": ("tf_hub_to_bert", FIXTURES / "encoder"),
      "missing_checkpoint": ("model_garden_to_bert", tmp_path / "nowhere"),
  }[case]
  if case == "name_based_checkpoint":
    config = original_dirs.tiny_config()
    original_dirs.write_original_dir(input_dir, config, original_dirs.random_weights(config, 0))
  elif case == "missing_variable":
    _object_checkpoint_missing_the_pooler(input_dir)
  result = _convert(direction, input_dir, tmp_path / "out")
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  expected = {
      "next_sentence_head": "2 variable(s) outside the encoder and masked-LM head, e.g. "
                            "next_sentence.pooler_dense/bias: not a part the original layout "
                            "has (--copy_pooler_dense_to_encoder takes it as the pooler)",
      "factorised_embeddings": "encoder/_embedding_projection: factorised embeddings",
      "name_based_checkpoint": "not an object-based checkpoint (no object graph)",
      "missing_variable": "variable encoder/_position_embedding_layer/embeddings is missing",
      "norm_first": "the original architecture does not reproduce its outputs",
      "not_a_saved_model": "not a SavedModel",
      "missing_checkpoint": "no such checkpoint",
  }[case]
  assert expected in result.stderr.strip().splitlines()[-1]
  assert not (tmp_path / "out").exists()
