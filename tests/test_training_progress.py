"""Training logs progress by default: step lines at the first step, every --log_every_steps steps,
the last step, and at least every --log_every_seconds; evaluation reports its batches."""

import logging
import re
import time

import tensorflow as tf

import pytest

from modeling import optimization
from tests import scripts
from tests import toy_task
from training import engine
from training import input_pipeline

pytestmark = pytest.mark.slow

STEP_LINE = re.compile(r"step (\d+)/(\d+): loss = \S+, .*lr = .*examples/s = ")


def test_default_flags_log_the_first_step_every_100_steps_and_the_last(tmp_path):
  data = toy_task.write_records(tmp_path / "toy.tfrecord", 64)
  result = scripts.run_script(
      "tests/toy_runner.py", f"--input_file={data}", f"--output_dir={tmp_path / 'out'}",
      f"--result_file={tmp_path / 'result.json'}", "--distribution_strategy=one_device",
      "--num_train_steps=250", "--do_eval", "--max_eval_steps=3")
  assert result.returncode == 0, result.stderr[-3000:]
  logged = [(int(step), int(total)) for step, total in STEP_LINE.findall(result.stderr)]
  assert logged == [(1, 250), (100, 250), (200, 250), (250, 250)], result.stderr[-3000:]
  # Every line after the first has an ETA (the first loop's time includes tracing).
  lines = [line for line in result.stderr.splitlines() if STEP_LINE.search(line)]
  assert "ETA" not in lines[0] and all("ETA" in line for line in lines[1:])
  assert "3/3 (100%) batches evaluated" in result.stderr


class SlowToyTask(toy_task.ToyTask):
  """The toy task with 25 ms of sleep in each step: 40 steps take over a second."""

  def call_model(self, model, features, training):
    tf.py_function(lambda: time.sleep(0.025), [], [])
    return super().call_model(model, features, training)


def test_a_line_is_logged_when_the_seconds_pass_between_step_multiples(tmp_path, caplog):
  data = toy_task.write_records(tmp_path / "toy.tfrecord", 64)
  config = engine.RunConfig(output_dir=str(tmp_path / "out"), num_train_steps=40,
                            train_batch_size=8, log_every_steps=1000, log_every_seconds=0.25)
  trainer = engine.Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"), SlowToyTask(), config,
                           lambda: optimization.create_optimizer(0.05, 40, 2))
  input_fn = input_pipeline.make_input_fn([data], toy_task.FEATURE_SPEC, 8, True,
                                          shuffle_buffer_size=0, seed=0)
  # On the absl logger itself: an in-process SavedModel export earlier in a session (e.g.
  # test_killed_runs) leaves that logger at WARNING.
  with caplog.at_level(logging.INFO, logger="absl"):
    result = trainer.train(input_fn)
  logged = [int(step) for step, _ in STEP_LINE.findall(caplog.text)]
  assert logged[0] == 1 and logged[-1] == 40
  assert len(logged) >= 4, caplog.text
  assert logged == sorted(set(logged))
  assert [step for step, _ in result["history"]] == list(range(1, 41))
