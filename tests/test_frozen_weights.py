"""oneDNN's frozen-weights setting (`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS`): a process that serves an
export answers under it as without it, and a run that trains refuses it in one line.

TensorFlow reads the variable once per process, so the serving test loads the exports in a child
process with the variable set; the refusals are unit tests."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (the in-graph tokenizer's ops)

from base import frozen_weights
from tests import scripts
from tests.conftest import SAMPLES_DIR
# A fixture: the tiny classifier's float32 and bfloat16 exports.
from tests.test_bfloat16_export import classifier_exports  # noqa: F401
from tests.test_bfloat16_export import classifier_flags

# Calls of growing and shrinking batches: every shape after the first reaches products that
# kept the first call's weights; an operand that is not a weight would show as wrong answers.
BATCHES = ((0, 1), (1, 9), (9, 41), (41, 44), (44, 54), (0, 3))
# The same weights in oneDNN's blocked layout are summed in another order.
FLOAT32_TOLERANCE = 1e-5
BFLOAT16_TOLERANCE = 2e-2

_CHILD = """
import json, sys
import tensorflow as tf
import tensorflow_text
texts, batches, paths = json.loads(sys.argv[1])
answers = {}
for precision, path in paths.items():
  serve = tf.saved_model.load(path).signatures["serving_default"]
  answers[precision] = [
      serve(text_a=tf.constant(texts[start:end]))["probabilities"].numpy().tolist()
      for start, end in batches]
print(json.dumps(answers))
"""


def sample_texts():
  return [line.split("\t")[0] for path in ("train.tsv", "dev.tsv")
          for line in (SAMPLES_DIR / "classification" / path).read_text().splitlines()[1:]]


@pytest.mark.slow  # whole runs and a child process
def test_an_export_served_with_frozen_weights_answers_as_without(
    classifier_exports):  # pylint: disable=redefined-outer-name
  exports = {precision: path for precision, (path, _) in classifier_exports.items()}
  texts = sample_texts()
  assert len(texts) >= max(end for _, end in BATCHES)
  expected = {}
  for precision, path in exports.items():
    serve = tf.saved_model.load(path).signatures["serving_default"]
    expected[precision] = [serve(text_a=tf.constant(texts[start:end]))["probabilities"].numpy()
                           for start, end in BATCHES]
  child = subprocess.run(
      [sys.executable, "-c", _CHILD, json.dumps([texts, BATCHES, exports])],
      env=dict(os.environ, **{frozen_weights.VARIABLE: "1"}), capture_output=True, text=True,
      timeout=300, check=False)
  assert child.returncode == 0, child.stderr[-3000:]
  answers = json.loads(child.stdout.strip().splitlines()[-1])
  for precision, tolerance in (("float32", FLOAT32_TOLERANCE), ("bfloat16", BFLOAT16_TOLERANCE)):
    for (start, end), want, got in zip(BATCHES, expected[precision], answers[precision]):
      got = np.array(got)
      assert got.shape == (end - start, want.shape[1])
      np.testing.assert_allclose(got, want, atol=tolerance, err_msg=f"{precision} {start}:{end}")


@pytest.mark.parametrize("value", ["1", "true", "TRUE"])
def test_training_refuses_the_frozen_weights_setting_in_one_line(tiny_model, tmp_path,
                                                                 monkeypatch, value):
  monkeypatch.setenv(frozen_weights.VARIABLE, value)
  result = scripts.run_in_process("run_classifier.py",
                                  *classifier_flags(tiny_model, tmp_path, "--do_train"))
  assert result.returncode == 1
  line = result.stderr.strip().splitlines()[-1]
  assert line.startswith(f"run_classifier.py: error: --do_train with {frozen_weights.VARIABLE}="
                         f"{value} in the environment: "), line
  assert "unset it for training" in line
  assert not (tmp_path / "out").exists() and not (tmp_path / "export").exists()


@pytest.mark.parametrize("value", ["0", "false"])
def test_training_runs_with_the_setting_off(tiny_model, tmp_path, monkeypatch, value):
  monkeypatch.setenv(frozen_weights.VARIABLE, value)
  config_class = scripts.IN_PROCESS_RUNS["run_classifier.py"][0]
  config_class.from_args(*classifier_flags(tiny_model, tmp_path, "--do_train")).validate()

