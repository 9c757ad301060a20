"""Name-based checkpoint bundles: exact names, atomic writes, matching by name on restore, one
line naming the checkpoint when it is damaged."""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

from modeling import bert_config
from modeling import checkpoint_io
from modeling import encoder as encoder_lib
from tests import scripts
from tests.conftest import SAMPLES_DIR


def test_write_then_list_gives_exact_names_and_shapes(tmp_path):
  prefix = str(tmp_path / "model.ckpt-7")
  checkpoint_io.write_checkpoint(prefix, {
      "bert/embeddings/word_embeddings": np.ones([5, 3], np.float32),
      "cls/seq_relationship/output_weights": np.zeros([2, 3], np.float32),
      "global_step": np.int64(7),
  })
  assert checkpoint_io.list_checkpoint_variables(prefix) == [
      ("bert/embeddings/word_embeddings", [5, 3]),
      ("cls/seq_relationship/output_weights", [2, 3]),
      ("global_step", []),
  ]
  assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]
  values = checkpoint_io.read_checkpoint(prefix)
  assert values["global_step"] == 7
  np.testing.assert_array_equal(values["bert/embeddings/word_embeddings"], np.ones([5, 3]))


def test_assign_matches_by_name_and_reports(tmp_path):
  prefix = str(tmp_path / "ckpt")
  checkpoint_io.write_checkpoint(prefix, {
      "bert/a": np.full([2], 3.0, np.float32),
      "bert/a/adam_m": np.zeros([2], np.float32),
      "other/b": np.zeros([1], np.float32),
  })
  a = tf.Variable(np.zeros([2], np.float32))
  head = tf.Variable(np.zeros([4], np.float32))
  report = checkpoint_io.assign_from_checkpoint({"bert/a": a, "head/w": head}, prefix)
  np.testing.assert_array_equal(a.numpy(), [3.0, 3.0])
  assert report == {"loaded": ["bert/a"], "missing": ["head/w"], "unexpected": ["other/b"]}


def test_shape_mismatch_and_missing_encoder_are_named(tmp_path):
  prefix = str(tmp_path / "ckpt")
  checkpoint_io.write_checkpoint(prefix, {"bert/a": np.zeros([2], np.float32)})
  with pytest.raises(checkpoint_io.CheckpointError,
                     match=r"1 variable\(s\) of another shape, e.g. bert/a: checkpoint \[2\] vs "
                           r"model \[3\]"):
    checkpoint_io.assign_from_checkpoint({"bert/a": tf.Variable(np.zeros([3], np.float32))}, prefix)
  with pytest.raises(checkpoint_io.CheckpointError,
                     match=r"1 model variable\(s\) missing from it \(bert/z\)"):
    checkpoint_io.assign_from_checkpoint({"bert/z": tf.Variable(np.zeros([2], np.float32)),
                                          "bert/a": tf.Variable(np.zeros([2], np.float32))}, prefix)


def _layers(num_layers, extra=()):
  return {name: np.zeros([2], np.float32) for name in
          [f"bert/encoder/layer_{i}/{part}" for i in range(num_layers)
           for part in ("attention/output/dense/kernel", "output/LayerNorm/beta")]
          + ["bert/embeddings/word_embeddings", *extra]}


def test_an_encoder_of_another_depth_is_refused_both_ways_in_one_line(tmp_path):
  prefix = str(tmp_path / "ckpt")
  checkpoint_io.write_checkpoint(prefix, _layers(6, ["cls/predictions/output_bias"]))
  shallow = {name: tf.Variable(value) for name, value in _layers(3).items()}
  with pytest.raises(checkpoint_io.CheckpointError) as error:
    checkpoint_io.assign_from_checkpoint(shallow, prefix)
  assert str(error.value) == (
      f"{prefix} does not fit the model: 6 of its variable(s) unused by the model "
      "(bert/encoder/layer_{3..5}/*): the checkpoint has 6 encoder layers, the model 3")
  deep = {name: tf.Variable(value) for name, value in _layers(8).items()}
  with pytest.raises(checkpoint_io.CheckpointError, match=r"4 model variable\(s\) missing from "
                     r"it \(bert/encoder/layer_\{6\.\.7\}/\*\): the checkpoint has 6 encoder "
                     r"layers, the model 8"):
    checkpoint_io.assign_from_checkpoint(deep, prefix)
  # Asked for, a partial warm start loads the layers both have; heads of other tasks are never
  # an error.
  report = checkpoint_io.assign_from_checkpoint(shallow, prefix, allow_partial=True)
  assert len(report["loaded"]) == 7
  assert "cls/predictions/output_bias" in report["unexpected"]


def test_missing_checkpoint_is_a_clear_error(tmp_path):
  with pytest.raises(checkpoint_io.CheckpointError, match="no such checkpoint"):
    checkpoint_io.read_checkpoint(str(tmp_path / "nope"))
  with pytest.raises(checkpoint_io.CheckpointError, match="holds no checkpoint"):
    checkpoint_io.read_checkpoint(str(tmp_path))


def _damage(prefix, how):
  """Damages the bundle at `prefix` as a copy cut short or a bad disk would."""
  data, index = prefix + checkpoint_io.DATA_SUFFIX, prefix + checkpoint_io.INDEX_SUFFIX
  if how == "data_truncated":
    with open(data, "r+b") as f:
      f.truncate(os.path.getsize(data) // 2)
  elif how == "data_missing":
    os.remove(data)
  elif how == "data_byte_flipped":
    contents = bytearray(open(data, "rb").read())
    contents[10] ^= 0xFF
    open(data, "wb").write(bytes(contents))
  elif how == "index_truncated":
    with open(index, "r+b") as f:
      f.truncate(os.path.getsize(index) // 2)


@pytest.mark.parametrize("how", ["data_truncated", "data_missing", "data_byte_flipped",
                                 "index_truncated"])
def test_a_damaged_checkpoint_is_one_error_naming_it_in_every_reader(tmp_path, how):
  prefix = checkpoint_io.write_checkpoint(str(tmp_path / "model.ckpt"), {
      "bert/a": np.ones([64, 8], np.float32), "bert/b": np.ones([8], np.float32)})
  _damage(prefix, how)
  expected = re.escape(f"{prefix}: damaged or incomplete checkpoint (")
  readers = {
      "read": lambda: checkpoint_io.read_checkpoint(prefix),
      "assign": lambda: checkpoint_io.assign_from_checkpoint(
          {"bert/a": tf.Variable(np.zeros([64, 8], np.float32)),
           "bert/b": tf.Variable(np.zeros([8], np.float32))}, prefix)}
  # A flipped byte shows only in the checksum of the tensor read; the rest in the listing.
  if how != "data_byte_flipped":
    readers["list"] = lambda: checkpoint_io.list_checkpoint_variables(prefix)
  for name, read in readers.items():
    with pytest.raises(checkpoint_io.CheckpointError, match=expected) as raised:
      read()
    assert "\n" not in str(raised.value), name


@pytest.mark.parametrize("script", ["extract_features.py", "run_classifier.py"])
def test_a_truncated_init_checkpoint_stops_a_run_before_any_work(tiny_model, tmp_path, script):
  vocab_file, config_file = tiny_model
  encoder = encoder_lib.BertEncoder(bert_config.BertConfig.from_json_file(config_file))
  prefix = checkpoint_io.write_checkpoint(str(tmp_path / "bert_model.ckpt"),
                                          encoder.name_to_variable())
  _damage(prefix, "data_truncated")
  (tmp_path / "text.txt").write_text("the bees fly out of the hive\n")
  flags = {"extract_features.py": ["--input_file=" + str(tmp_path / "text.txt"),
                                   "--output_file=" + str(tmp_path / "out.jsonl")],
           "run_classifier.py": ["--task_name=tsv", "--do_train",
                                 "--data_dir=" + str(SAMPLES_DIR / "classification"),
                                 "--output_dir=" + str(tmp_path / "out")]}[script]
  result = scripts.run_in_process(script, *flags, f"--vocab_file={vocab_file}",
                                  f"--bert_config_file={config_file}",
                                  f"--init_checkpoint={prefix}", "--max_seq_length=32")
  assert result.returncode == 1
  assert re.fullmatch(re.escape(f"{script}: error: {prefix}: damaged or incomplete checkpoint (")
                      + r"its data files hold \d+ bytes, its index lists \d+\)",
                      result.stderr.strip().splitlines()[-1])
  assert sorted(os.listdir(tmp_path)) == ["bert_model.ckpt.data-00000-of-00001",
                                          "bert_model.ckpt.index", "text.txt"]


def test_a_checkpoint_that_fails_its_checksum_leaves_no_record_file(tiny_model, tmp_path):
  vocab_file, config_file = tiny_model
  encoder = encoder_lib.BertEncoder(bert_config.BertConfig.from_json_file(config_file))
  prefix = checkpoint_io.write_checkpoint(str(tmp_path / "bert_model.ckpt"),
                                          encoder.name_to_variable())
  _damage(prefix, "data_byte_flipped")
  output_dir = tmp_path / "out"
  result = scripts.run_in_process(
      "run_classifier.py", "--task_name=tsv", "--do_train", "--do_eval",
      f"--data_dir={SAMPLES_DIR / 'classification'}", f"--output_dir={output_dir}",
      f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--init_checkpoint={prefix}", "--max_seq_length=32",
      "--distribution_strategy=one_device")
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      f"run_classifier.py: error: {prefix}: damaged or incomplete checkpoint (")
  # The checksum is found when the weights are loaded, after the records were written: they
  # are taken back.
  assert not output_dir.exists() or sorted(os.listdir(output_dir)) == []
