"""The labels a run predicts with when it does not train: the restored model's own."""

import types

import tensorflow as tf

from modeling import checkpoint_io
from tasks import runner


def _model_dir(path, labels, with_checkpoint):
  path.mkdir()
  (path / runner.LABEL_LIST_FILENAME).write_text("".join(f"{label}\n" for label in labels))
  if with_checkpoint:
    prefix = checkpoint_io.write_checkpoint(str(path / "model.ckpt-1"), {"w": tf.zeros([1])})
    tf.compat.v1.train.update_checkpoint_state(str(path), prefix)
  return path


def _config(output_dir, init_checkpoint, do_train=False):
  return types.SimpleNamespace(output_dir=str(output_dir), init_checkpoint=init_checkpoint,
                               do_train=do_train)


def test_the_labels_follow_the_checkpoint_the_engine_restores(tmp_path):
  converted = _model_dir(tmp_path / "converted", ["negative", "positive"], with_checkpoint=False)
  run = _model_dir(tmp_path / "run", ["b", "a", "c"], with_checkpoint=True)
  fresh = _model_dir(tmp_path / "fresh", ["stale"], with_checkpoint=False)

  assert runner.saved_label_list(_config(run, str(converted))) == ["b", "a", "c"]
  assert runner.saved_label_list(_config(fresh, str(converted))) == ["negative", "positive"]
  assert runner.saved_label_list(
      _config(fresh, str(converted / "bert_model.ckpt"))) == ["negative", "positive"]
  assert runner.saved_label_list(_config(fresh, None)) is None
  assert runner.saved_label_list(_config(run, str(converted), do_train=True)) is None
