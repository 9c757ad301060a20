"""Preemption: SIGTERM during training saves a checkpoint at the step reached, the run stops with
`errors.StoppedBySignal` (status 128 + 15 from a script), and the same call resumes to the end."""

import os
import signal

import pytest
import tensorflow as tf

from base import errors
from modeling import optimization
from tests import toy_task
from training import engine
from training import input_pipeline
from training import periodic_evaluation
from training import preemption

STRATEGY = tf.distribute.OneDeviceStrategy("/cpu:0")
NUM_TRAIN_STEPS = 12


def _trainer(output_dir, grace_seconds=30.0):
  config = engine.RunConfig(output_dir=str(output_dir), num_train_steps=NUM_TRAIN_STEPS,
                            train_batch_size=8, steps_per_loop=3, save_checkpoints_steps=100,
                            preemption_grace_seconds=grace_seconds)
  return engine.Trainer(STRATEGY, toy_task.ToyTask(), config,
                        lambda: optimization.create_optimizer(0.05, NUM_TRAIN_STEPS, 1))


def _input_fn(tmp_path, sigterm_at_batch=None):
  """The toy records, repeated; the process sends itself SIGTERM when the input pipeline makes
  batch `sigterm_at_batch` (as a preemption comes, in the middle of a training loop)."""
  data_path = toy_task.write_records(tmp_path / "toy.tfrecord", 64)
  make = input_pipeline.make_input_fn([data_path], toy_task.FEATURE_SPEC, 8, True,
                                      shuffle_buffer_size=0, seed=0)
  batches = []

  def count(batch_x):
    batches.append(1)
    if len(batches) == sigterm_at_batch:
      os.kill(os.getpid(), signal.SIGTERM)
    return batch_x

  def counted(features):
    x = tf.py_function(count, [features["x"]], tf.float32)
    x.set_shape(features["x"].shape)
    return dict(features, x=x)

  def input_fn(context):
    return make(context).map(counted)
  return input_fn


def _latest_step(output_dir):
  return int(tf.train.latest_checkpoint(str(output_dir)).rsplit("-", 1)[1])


def test_sigterm_during_training_saves_the_step_reached_and_the_run_resumes(tmp_path):
  output_dir = tmp_path / "out"
  handler_before = signal.getsignal(signal.SIGTERM)
  with pytest.raises(errors.StoppedBySignal) as stopped:
    _trainer(output_dir).train(_input_fn(tmp_path, sigterm_at_batch=5))
  assert stopped.value.signal_number == signal.SIGTERM
  assert signal.getsignal(signal.SIGTERM) is handler_before
  step = _latest_step(output_dir)
  # The loop under way when the signal came was finished and saved; no periodic checkpoint
  # (every 100 steps) would have been.
  assert 0 < step < NUM_TRAIN_STEPS
  assert f"stopped by SIGTERM at step {step} of {NUM_TRAIN_STEPS}" in str(stopped.value)
  resumed = _trainer(output_dir)
  assert resumed.train(_input_fn(tmp_path))["global_step"] == NUM_TRAIN_STEPS
  assert resumed.train(_input_fn(tmp_path))["history"] == []


def test_sigterm_during_an_evaluation_stops_it_and_the_step_is_evaluated_again(tmp_path):
  output_dir = tmp_path / "out"
  config = periodic_evaluation.EvaluationConfig(every_steps=4, metric="score")
  evaluated = []
  trainer = _trainer(output_dir)

  def evaluate_preempted_at_8():
    step = int(trainer.global_step.numpy())
    if step == 8 and 8 not in evaluated:
      evaluated.append(8)
      os.kill(os.getpid(), signal.SIGTERM)
      trainer.predict(tf.data.Dataset.from_tensor_slices(
          {"x": tf.zeros([16, toy_task.NUM_FEATURES])}).batch(8))
      raise AssertionError("the prediction went on after SIGTERM")
    evaluated.append(step)
    return {"score": step}

  with pytest.raises(errors.StoppedBySignal, match="at step 8 of 12"):
    trainer.train(_input_fn(tmp_path), config, evaluate_preempted_at_8)
  trainer = _trainer(output_dir)
  trainer.train(_input_fn(tmp_path), config, evaluate_preempted_at_8)
  assert evaluated == [4, 8, 8, 12]
  assert [entry["step"] for entry in trainer.evaluation.history] == [4, 8, 12]


def test_loops_are_kept_within_a_share_of_the_grace_period(tmp_path):
  trainer = _trainer(tmp_path / "out", grace_seconds=4.0)
  # At 0.5 s a step, a quarter of 4 s holds 2 steps.
  assert trainer._loop_length(0, (2, 1.0), seconds_since_log=0.0) == 2
  assert _trainer(tmp_path / "out")._loop_length(0, (2, 1.0), seconds_since_log=0.0) == 3


def test_the_watch_records_the_signal_and_puts_the_handler_back():
  before = signal.getsignal(signal.SIGTERM)
  with preemption.TerminationWatch(grace_seconds=10) as watch:
    assert not watch.requested and watch.seconds_left() == 10
    os.kill(os.getpid(), signal.SIGTERM)
    assert watch.requested and 9 < watch.seconds_left() <= 10
  assert signal.getsignal(signal.SIGTERM) is before
