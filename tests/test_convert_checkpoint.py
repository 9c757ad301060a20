"""convert_checkpoint.py checks every tensor before it writes, and writes all or nothing.

Inputs are what the real tools write: HuggingFace directories with `model.safetensors` saved by the
`safetensors` package as `save_pretrained` saves it (`{"format": "pt"}`), original directories
with bundles written by `checkpoint_io`. The models are tiny (`original_dirs.tiny_config`) and
every conversion runs in this process (`scripts.run_in_process`).
"""

import json
import os
import re

import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from modeling import checkpoint_io
from modeling.conversion import huggingface
from modeling.conversion import original_files
from tests import original_dirs
from tests import scripts


def _convert(direction, input_dir, output_dir):
  return scripts.run_in_process("convert_checkpoint.py", f"--direction={direction}",
                                f"--input_dir={input_dir}", f"--output_dir={output_dir}")


def _write_hf_dir(directory, config, original_weights):
  """A HuggingFace `BertForPreTraining` directory of `original_weights`."""
  directory.mkdir()
  (directory / "config.json").write_text(json.dumps(
      huggingface.bert_config_to_hf(config, "BertForPreTraining")))
  (directory / "vocab.txt").write_text("".join(f"{token}\n" for token in original_dirs.VOCAB))
  safetensors_numpy.save_file(huggingface.original_weights_to_hf(original_weights),
                              str(directory / "model.safetensors"), metadata={"format": "pt"})


# case -> (HuggingFace name, original name, edit of the array or None to drop it, the problem).
DAMAGE = {
    "wrong_shape": ("bert.encoder.layer.1.attention.self.query.weight",
                    "bert/encoder/layer_1/attention/self/query/kernel",
                    lambda value: value[:, :8], "has shape {shape}, {config} gives [16, 16]"),
    "missing": ("bert.encoder.layer.1.output.LayerNorm.bias",
                "bert/encoder/layer_1/output/LayerNorm/beta", None, "is missing"),
    "nan": ("bert.embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings",
            lambda value: np.where(np.eye(*value.shape, dtype=bool), np.nan, value),
            "holds 16 NaN or infinite value(s)"),
}


@pytest.mark.parametrize("direction", ["hf_to_bert", "bert_to_hf"])
@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_tensor_that_does_not_fit_the_config_is_named_and_nothing_is_written(
    tmp_path, direction, case):
  config = original_dirs.tiny_config()
  weights = original_dirs.random_weights(config, seed=0, with_pretraining_heads=True)
  hf_name, original_name, edit, problem = DAMAGE[case]
  if edit is None:
    del weights[original_name]
  else:
    weights[original_name] = edit(weights[original_name])
  if direction == "hf_to_bert":
    _write_hf_dir(tmp_path / "in", config, weights)
    source, name = tmp_path / "in" / "model.safetensors", hf_name
    config_name, shape = "config.json", "[8, 16]"  # HuggingFace stores kernels [out, in]
  else:
    original_dirs.write_original_dir(tmp_path / "in", config, weights)
    source, name = tmp_path / "in" / "bert_model.ckpt", original_name
    config_name, shape = "bert_config.json", "[16, 8]"
  result = _convert(direction, tmp_path / "in", tmp_path / "out")
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      f"convert_checkpoint.py: error: {source}: tensor {name} "
      + problem.format(shape=shape, config=config_name))
  assert not (tmp_path / "out").exists()


# direction -> (the direction that writes its input from an original directory, or None for
# the original directory itself; the file cut short; the one-line message).
TRUNCATED = {
    "bert_to_hf": (None, "bert_model.ckpt" + checkpoint_io.DATA_SUFFIX,
                   r"{dir}/bert_model.ckpt: damaged or incomplete checkpoint \(its data files "
                   r"hold \d+ bytes, its index lists \d+\)"),
    "hf_to_bert": ("bert_to_hf", "model.safetensors",
                   r"{dir}/model.safetensors: unreadable safetensors file: Error while "
                   r"deserializing: .*"),
    "keras_hub_to_bert": ("bert_to_keras_hub", "model.weights.h5",
                          r"{dir}/model.weights.h5: not a Keras weights file: .*truncated file.*"),
}


@pytest.mark.parametrize("direction", sorted(TRUNCATED))
def test_an_input_file_cut_short_is_one_line_naming_it(tmp_path, direction):
  config = original_dirs.tiny_config()
  input_dir = original_dirs.write_original_dir(tmp_path / "bert", config,
                                               original_dirs.random_weights(config, seed=0))
  writer, name, message = TRUNCATED[direction]
  if writer:
    assert _convert(writer, input_dir, tmp_path / "in").returncode == 0
    input_dir = tmp_path / "in"
  os.truncate(input_dir / name, os.path.getsize(input_dir / name) - 100)
  result = _convert(direction, input_dir, tmp_path / "out")
  assert result.returncode == 1
  assert re.fullmatch("convert_checkpoint.py: error: " + message.format(dir=re.escape(str(input_dir))),
                      result.stderr.strip().splitlines()[-1])
  assert not (tmp_path / "out").exists()


def test_outputs_appear_only_when_all_are_written(tmp_path):
  def write_bundle(prefix):
    checkpoint_io.save_bundle(prefix, {"bert/a": np.zeros([4], np.float32)})

  def fill_the_disk(prefix):
    with tf.io.gfile.GFile(prefix + checkpoint_io.DATA_SUFFIX, "wb") as writer:
      writer.write(b"partial")
    raise tf.errors.ResourceExhaustedError(None, None, f"{prefix}: No space left on device")

  output_dir = tmp_path / "out"
  output_dir.mkdir()
  with pytest.raises(tf.errors.ResourceExhaustedError):
    original_files.write_outputs(str(output_dir), {"vocab.txt": b"[PAD]\n"},
                                 {"a.ckpt": write_bundle, "assets/b.ckpt": fill_the_disk})
  assert os.listdir(output_dir) == []
  original_files.write_outputs(str(output_dir), {"assets/vocab.txt": b"[PAD]\n"},
                               {"a.ckpt": write_bundle})
  assert sorted(os.listdir(output_dir)) == ["a.ckpt.data-00000-of-00001", "a.ckpt.index",
                                            "assets"]
  assert os.listdir(output_dir / "assets") == ["vocab.txt"]


def test_encoder_shapes_are_the_encoders():
  config = original_dirs.tiny_config(intermediate_size=24, type_vocab_size=3)
  assert original_files.encoder_shapes(config) == dict(
      original_dirs.encoder_variable_shapes(config))
