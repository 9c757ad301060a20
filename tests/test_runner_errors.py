"""Bad input stops a runner before training with a one-line error naming what is wrong."""

import os
import subprocess
import sys

import tensorflow as tf

import pytest

from data import schemas
from tests.conftest import CHILD_PYTHONPATH
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

TOY_RUNNER = REPO_ROOT / "tests" / "toy_runner.py"


def _run_toy(*args):
  env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, str(TOY_RUNNER), "--distribution_strategy=one_device",
                         *args], capture_output=True, text=True, timeout=120, env=env,
                        cwd=REPO_ROOT)


def _last_line(stderr):
  return stderr.strip().splitlines()[-1]


def test_empty_glob_and_mismatched_records_fail_before_training(tmp_path):
  output_dir = tmp_path / "out"
  empty = _run_toy(f"--input_file={tmp_path}/nothing-*.tfrecord", f"--output_dir={output_dir}",
                   f"--result_file={tmp_path}/r.json")
  assert empty.returncode == 1
  assert _last_line(empty.stderr) == (
      f"toy_runner.py: error: --input_file: '{tmp_path}/nothing-*.tfrecord' matches no file")
  assert "Traceback" not in empty.stderr

  # Records with the right feature names but x of length 3 instead of 4.
  path = tmp_path / "short.tfrecord"
  with tf.io.TFRecordWriter(str(path)) as writer:
    example = tf.train.Example(features=tf.train.Features(feature={
        "x": schemas.float_feature([1.0, 2.0, 3.0]), "label": schemas.int64_feature([1])}))
    writer.write(example.SerializeToString())
  mismatch = _run_toy(f"--input_file={path}", f"--output_dir={output_dir}",
                      f"--result_file={tmp_path}/r.json")
  assert mismatch.returncode == 1
  assert _last_line(mismatch.stderr) == (
      f"toy_runner.py: error: {path}: feature 'x' has length 3, expected 4")
  assert "Traceback" not in mismatch.stderr
  assert not output_dir.exists() or not list(output_dir.iterdir())
