"""Name-based checkpoint bundles: exact names, atomic writes, matching by name on restore."""

import os

import numpy as np
import pytest
import tensorflow as tf

from modeling import checkpoint_io


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
