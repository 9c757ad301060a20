"""keras-hub presets in and out, checked against keras-hub's own `BertBackbone`.

Reference: keras-hub's `BertBackbone` (`requirements-dev.txt`) on the same weights and inputs.
Tolerance: max abs difference of sequence and pooled outputs <= 1e-5 in float32. Round trips
original -> preset -> original are compared byte for byte.
"""

import json
import os

import numpy as np
import pytest

from data import tokenization
from modeling import bert_config as bert_config_lib
from tests import original_dirs
from tests import scripts

keras_hub = pytest.importorskip("keras_hub", reason="keras-hub is in requirements-dev.txt")

pytestmark = pytest.mark.slow

TOLERANCE = 1e-5


def _convert(direction, input_dir, output_dir, *flags):
  return scripts.run_in_process("convert_checkpoint.py", f"--direction={direction}",
                                f"--input_dir={input_dir}", f"--output_dir={output_dir}", *flags)


def _keras_hub_outputs(backbone, input_ids, input_mask, segment_ids):
  outputs = backbone({"token_ids": input_ids, "segment_ids": segment_ids,
                      "padding_mask": input_mask}, training=False)
  return (np.asarray(outputs["sequence_output"]), np.asarray(outputs["pooled_output"]))


def _random_keras_hub_preset(directory, seed):
  """A `BertBackbone` with every weight random, saved by keras-hub with its tokenizer."""
  config = original_dirs.tiny_config()
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
      num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
      intermediate_dim=config.intermediate_size,
      max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size)
  rng = np.random.default_rng(seed)
  backbone.set_weights([(1.0 if "gamma" in weight.path else 0.0)
                        + rng.normal(0, 0.2, weight.shape).astype(np.float32)
                        for weight in backbone.weights])
  backbone.save_to_preset(str(directory))
  keras_hub.models.BertTokenizer(vocabulary=original_dirs.VOCAB,
                                 lowercase=True).save_to_preset(str(directory))
  return backbone


def test_keras_hub_preset_to_original_matches_keras_hub(tmp_path):
  backbone = _random_keras_hub_preset(tmp_path / "preset", seed=1)
  result = _convert("keras_hub_to_bert", tmp_path / "preset", tmp_path / "bert")
  assert result.returncode == 0, result.stderr
  assert "--do_lower_case=True" in result.stderr
  inputs = original_dirs.sample_inputs(len(original_dirs.VOCAB))
  difference = original_dirs.max_difference(
      original_dirs.encoder_outputs(tmp_path / "bert", *inputs),
      _keras_hub_outputs(backbone, *inputs))
  assert difference <= TOLERANCE, difference
  assert (tmp_path / "bert" / "vocab.txt").read_text().split("\n")[:-1] == original_dirs.VOCAB


def test_original_to_keras_hub_loads_in_keras_hub_with_our_outputs(tmp_path):
  config = original_dirs.tiny_config()
  original_dirs.write_original_dir(
      tmp_path / "bert", config,
      original_dirs.random_weights(config, seed=2, with_pretraining_heads=True))
  result = _convert("bert_to_keras_hub", tmp_path / "bert", tmp_path / "preset")
  assert result.returncode == 0, result.stderr
  assert "left out 7 variables" in result.stderr  # the pre-training heads
  backbone = keras_hub.models.BertBackbone.from_preset(str(tmp_path / "preset"))
  inputs = original_dirs.sample_inputs(config.vocab_size)
  difference = original_dirs.max_difference(
      original_dirs.encoder_outputs(tmp_path / "bert", *inputs),
      _keras_hub_outputs(backbone, *inputs))
  assert difference <= TOLERANCE, difference
  tokenizer = keras_hub.models.BertTokenizer.from_preset(str(tmp_path / "preset"))
  assert tokenizer.get_vocabulary() == original_dirs.VOCAB
  ours = tokenization.FullTokenizer(str(tmp_path / "bert" / "vocab.txt"), do_lower_case=True)
  text = "B1 c2d3 Ēe4 zz"
  assert np.asarray(tokenizer(text)).tolist() == ours.convert_tokens_to_ids(ours.tokenize(text))


def test_original_to_keras_hub_to_original_is_bit_identical(tmp_path):
  config = original_dirs.tiny_config()
  original_dirs.write_original_dir(tmp_path / "bert", config,
                                   original_dirs.random_weights(config, seed=3))
  assert _convert("bert_to_keras_hub", tmp_path / "bert", tmp_path / "preset").returncode == 0
  result = _convert("keras_hub_to_bert", tmp_path / "preset", tmp_path / "back")
  assert result.returncode == 0, result.stderr
  for name in ("bert_config.json", "vocab.txt", "bert_model.ckpt.index",
               "bert_model.ckpt.data-00000-of-00001"):
    assert (tmp_path / "back" / name).read_bytes() == (tmp_path / "bert" / name).read_bytes(), name


def test_minilm_through_keras_hub_both_ways(minilm_dir, minilm_bert_dir, tmp_path):
  """keras-hub reads the HuggingFace directory itself (giving it its tanh GELU); that backbone
  saved as a preset converts to the original layout with keras-hub's outputs. The other way, the
  MiniLM converted here keeps HuggingFace's exact GELU, which a `BertBackbone` cannot express: it
  is refused, and with the config set to the tanh GELU keras-hub loads exactly the weights its
  own HuggingFace reader produces."""
  reference = keras_hub.models.BertBackbone.from_preset(str(minilm_dir))
  reference.save_to_preset(str(tmp_path / "preset"))
  keras_hub.models.BertTokenizer(
      vocabulary=str(minilm_dir / "vocab.txt"), lowercase=True).save_to_preset(
          str(tmp_path / "preset"))
  result = _convert("keras_hub_to_bert", tmp_path / "preset", tmp_path / "bert")
  assert result.returncode == 0, result.stderr
  config = bert_config_lib.BertConfig.from_json_file(str(tmp_path / "bert" / "bert_config.json"))
  assert (config.hidden_act, config.num_hidden_layers, config.hidden_size) == ("gelu", 6, 384)
  inputs = original_dirs.sample_inputs(config.vocab_size, batch_size=4, seq_length=32)
  difference = original_dirs.max_difference(
      original_dirs.encoder_outputs(tmp_path / "bert", *inputs),
      _keras_hub_outputs(reference, *inputs))
  assert difference <= TOLERANCE, difference

  refused = _convert("bert_to_keras_hub", minilm_bert_dir, tmp_path / "refused")
  assert refused.returncode == 1
  assert "hidden_act 'gelu_exact'" in refused.stderr.strip().splitlines()[-1]
  assert not (tmp_path / "refused").exists()

  tanh_dir = tmp_path / "minilm_tanh"
  tanh_dir.mkdir()
  for name in os.listdir(minilm_bert_dir):
    (tanh_dir / name).write_bytes((minilm_bert_dir / name).read_bytes())
  tanh_config = json.loads((tanh_dir / "bert_config.json").read_text())
  (tanh_dir / "bert_config.json").write_text(json.dumps(dict(tanh_config, hidden_act="gelu")))
  assert _convert("bert_to_keras_hub", tanh_dir, tmp_path / "ours").returncode == 0
  ours = keras_hub.models.BertBackbone.from_preset(str(tmp_path / "ours"))
  assert [w.path for w in ours.weights] == [w.path for w in reference.weights]
  for mine, theirs in zip(ours.weights, reference.weights):
    assert np.array_equal(np.asarray(mine), np.asarray(theirs)), mine.path


def _edit_json(path, edit):
  contents = json.loads(path.read_text())
  edit(contents)
  path.write_text(json.dumps(contents))


@pytest.mark.parametrize("case", ["unknown_setting", "another_backbone", "another_tokenizer",
                                  "layer_missing", "other_dtype", "missing_dir"])
def test_bad_preset_is_one_line_error_and_nothing_written(tmp_path, case):
  preset = tmp_path / "preset"
  if case != "missing_dir":
    _random_keras_hub_preset(preset, seed=4)
  if case == "unknown_setting":
    _edit_json(preset / "config.json", lambda c: c["config"].update(rotary_max_wavelength=10000))
  elif case == "another_backbone":
    _edit_json(preset / "config.json", lambda c: c.update(class_name="RobertaBackbone"))
  elif case == "another_tokenizer":
    _edit_json(preset / "tokenizer.json", lambda c: c.update(class_name="SentencePieceTokenizer"))
  elif case == "other_dtype":
    _edit_json(preset / "config.json", lambda c: c["config"].update(dtype="bfloat16"))
  elif case == "layer_missing":
    import h5py
    with h5py.File(preset / "model.weights.h5", "a") as weights_file:
      del weights_file["layers/transformer_encoder_1/_feedforward_output_dense/vars/1"]
  result = _convert("keras_hub_to_bert", preset, tmp_path / "out")
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  expected = {
      "unknown_setting": "config.json: unknown BertBackbone setting 'rotary_max_wavelength'",
      "another_backbone": "config.json: class 'RobertaBackbone', not keras-hub's BertBackbone",
      "another_tokenizer": "tokenizer.json: class 'SentencePieceTokenizer', not keras-hub's "
                           "BertTokenizer",
      "layer_missing": "layer feedforward_output_dense "
                       "(layers/transformer_encoder_1/_feedforward_output_dense) has 1 variables",
      "other_dtype": "dtype 'bfloat16': only float32 presets are converted",
      "missing_dir": "config.json: cannot read: no such file"}[case]
  assert expected in result.stderr.strip().splitlines()[-1]
  assert not (tmp_path / "out").exists()


def test_settings_keras_hub_cannot_express_are_refused(tmp_path):
  config = original_dirs.tiny_config(attention_probs_dropout_prob=0.0)
  original_dirs.write_original_dir(tmp_path / "bert", config,
                                   original_dirs.random_weights(config, seed=5))
  result = _convert("bert_to_keras_hub", tmp_path / "bert", tmp_path / "preset")
  assert result.returncode == 1
  assert ("attention_probs_dropout_prob 0.0 differs from hidden_dropout_prob 0.1"
          in result.stderr.strip().splitlines()[-1])
  assert not (tmp_path / "preset").exists()
