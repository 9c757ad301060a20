"""The shared training loop on one device: checkpoints, resume, accumulation, NaN stop, eval."""

import os

import numpy as np
import pytest
import tensorflow as tf

from base import errors
from base import frozen_weights
from modeling import checkpoint_io
from modeling import optimization
from tests import toy_task
from training import checkpointing
from training import engine
from training import input_pipeline
from training import mixed_precision

STRATEGY = tf.distribute.OneDeviceStrategy("/cpu:0")


def _trainer(output_dir, num_train_steps=6, train_batch_size=8, schedule_steps=None,
             optimizer_fn=None, **config):
  config = engine.RunConfig(output_dir=str(output_dir), num_train_steps=num_train_steps,
                            train_batch_size=train_batch_size,
                            **dict(dict(steps_per_loop=2, save_checkpoints_steps=3), **config))
  return engine.Trainer(
      STRATEGY, toy_task.ToyTask(), config,
      optimizer_fn or (lambda: optimization.create_optimizer(
          0.05, schedule_steps or num_train_steps, 2)))


def _gradient_scale_sensitive_optimizer():
  """Adam with a huge epsilon and no clipping: the update is ~0.01 * gradient, so a wrongly scaled
  gradient (e.g. summed instead of averaged over micro-batches or replicas) changes the result."""
  return optimization.AdamWeightDecay(1.0, epsilon=10.0, clip_norm=None)


def _input_fn(path, batch_size, is_training=True):
  return input_pipeline.make_input_fn([path], toy_task.FEATURE_SPEC, batch_size, is_training,
                                      shuffle_buffer_size=0, seed=0)


def _weights(trainer):
  return {name: v.numpy() for name, v in trainer.model_variables.items()}


@pytest.fixture(scope="module")
def data_path(tmp_path_factory):
  return toy_task.write_records(tmp_path_factory.mktemp("data") / "toy.tfrecord", 64)


def test_relative_output_dir_gets_a_state_file_that_finds_its_checkpoints(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  manager = checkpointing.CheckpointManager(os.path.join("runs", "out"),
                                            {"v": tf.Variable(1.0)})
  manager.save(3)
  manager.save(5)
  assert tf.train.latest_checkpoint(os.path.join("runs", "out")) == os.path.join(
      "runs", "out", "model.ckpt-5")
  assert manager.restore_latest() == 5


def test_checkpoints_use_original_names_and_state_file(tmp_path, data_path):
  trainer = _trainer(tmp_path, num_train_steps=7, keep_checkpoint_max=2, log_every_steps=2)
  result = trainer.train(_input_fn(data_path, 8))
  assert result["global_step"] == 7
  assert [step for step, _ in result["history"]] == list(range(1, 8))
  latest = tf.train.latest_checkpoint(str(tmp_path))
  assert latest == str(tmp_path / "model.ckpt-7")
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
      "model.ckpt-6", "model.ckpt-7"]
  assert not tf.io.gfile.glob(str(tmp_path / "model.ckpt-3.*"))
  names = dict(checkpoint_io.list_checkpoint_variables(latest))
  model_names = set(trainer.model_variables)
  assert set(names) == (model_names | {f"{n}/adam_m" for n in model_names}
                        | {f"{n}/adam_v" for n in model_names} | {"global_step"})
  assert names["toy/dense/kernel"] == [4, 8] and names["toy/dense/kernel/adam_v"] == [4, 8]
  values = checkpoint_io.read_checkpoint(latest)
  assert values["global_step"] == 7
  np.testing.assert_array_equal(values["toy/output/bias"],
                                trainer.model_variables["toy/output/bias"].numpy())
  assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]
  # TensorBoard scalars, one point per log line: after the first step, every 2 steps and at the
  # end (loops of at most 2 steps also end at the checkpoints, every 3, without a line).
  scalars = {}
  for event_file in tf.io.gfile.glob(str(tmp_path / "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(event_file):
      for value in event.summary.value:
        scalars.setdefault(value.tag, []).append(event.step)
  for tag in ("loss", "learning_rate", "examples_per_second", "accuracy", "cross_entropy"):
    assert scalars[tag] == [1, 2, 4, 6, 7], tag


def test_resume_continues_weights_slots_and_step(tmp_path):
  # The data file holds exactly one batch, so every step sees the same examples whether or not
  # the input restarts; the loss curve then depends only on the restored state.
  one_batch = toy_task.write_records(tmp_path / "one_batch.tfrecord", 8)
  full = _trainer(tmp_path / "full", num_train_steps=6)
  full_result = full.train(_input_fn(one_batch, 8))
  # The first run stops at step 3 (same 6-step schedule), the second resumes from its checkpoint.
  _trainer(tmp_path / "resumed", num_train_steps=3, schedule_steps=6).train(
      _input_fn(one_batch, 8))
  resumed = _trainer(tmp_path / "resumed", num_train_steps=6)
  resumed_result = resumed.train(_input_fn(one_batch, 8))
  assert [s for s, _ in resumed_result["history"]] == [4, 5, 6]
  np.testing.assert_allclose([l for _, l in resumed_result["history"]],
                             [l for _, l in full_result["history"][3:]], rtol=1e-5)
  full_state = checkpoint_io.read_checkpoint(str(tmp_path / "full"))
  resumed_state = checkpoint_io.read_checkpoint(str(tmp_path / "resumed"))
  assert sorted(full_state) == sorted(resumed_state)
  for name, value in full_state.items():
    np.testing.assert_allclose(resumed_state[name], value, rtol=1e-5, atol=1e-7, err_msg=name)


def test_warm_start_loads_weights_only(tmp_path, data_path):
  source = _trainer(tmp_path / "source", num_train_steps=3)
  source.train(_input_fn(data_path, 8))
  warm = _trainer(tmp_path / "warm", init_checkpoint=str(tmp_path / "source"))
  warm.initialize()
  assert int(warm.global_step.numpy()) == 0
  np.testing.assert_array_equal(_weights(warm)["toy/dense/kernel"],
                                _weights(source)["toy/dense/kernel"])
  assert not np.any(warm.optimizer.slot_name_to_variable()["toy/dense/kernel/adam_m"].numpy())


@pytest.mark.parametrize("accumulation_steps", [2, 4])
def test_gradient_accumulation_equals_one_large_batch(tmp_path, data_path, accumulation_steps):
  large = _trainer(tmp_path / "large", num_train_steps=4, train_batch_size=16,
                   optimizer_fn=_gradient_scale_sensitive_optimizer)
  large_result = large.train(_input_fn(data_path, 16))
  micro = _trainer(tmp_path / "micro", num_train_steps=4, train_batch_size=16,
                   optimizer_fn=_gradient_scale_sensitive_optimizer,
                   gradient_accumulation_steps=accumulation_steps)
  micro_result = micro.train(_input_fn(data_path, 16))
  assert tf.config.optimizer.get_experimental_options().get("arithmetic_optimization", True), (
      "the accumulation loop's Grappler option outlived its run")
  np.testing.assert_allclose([l for _, l in micro_result["history"]],
                             [l for _, l in large_result["history"]], rtol=1e-5)
  assert micro_result["metrics"] == pytest.approx(large_result["metrics"], rel=1e-5)
  for name, value in _weights(large).items():
    np.testing.assert_allclose(_weights(micro)[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_batch_not_divisible_by_micro_batches_is_a_clear_error(tmp_path, data_path):
  trainer = _trainer(tmp_path, train_batch_size=8, gradient_accumulation_steps=3)
  with pytest.raises(ValueError, match=r"--train_batch_size=8 must be divisible by replicas \(1\) "
                                       r"\* --gradient_accumulation_steps \(3\)"):
    trainer.train(_input_fn(data_path, 8))


def test_training_under_the_frozen_weights_setting_is_refused_before_a_step(
    tmp_path, data_path, monkeypatch):
  monkeypatch.setenv(frozen_weights.VARIABLE, "1")
  trainer = _trainer(tmp_path)
  before = _weights(trainer)
  with pytest.raises(errors.ConfigError, match=r"^Trainer\.train with "
                     r"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 in the environment: "):
    trainer.train(_input_fn(data_path, 8))
  assert int(trainer.global_step.numpy()) == 0
  assert not tf.train.latest_checkpoint(str(tmp_path))
  for name, value in _weights(trainer).items():
    np.testing.assert_array_equal(value, before[name])


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
  # Batch 7 (records 48..55) holds a NaN input.
  path = toy_task.write_records(tmp_path / "nan.tfrecord", 64, nan_records=(50,))
  trainer = _trainer(tmp_path / "out", num_train_steps=10, save_checkpoints_steps=5,
                     steps_per_loop=3)
  with pytest.raises(engine.NonFiniteLossError,
                     match=r"training loss is nan at step 7; stopped without saving, last good "
                           r"checkpoint: .*model\.ckpt-5"):
    trainer.train(_input_fn(path, 8))
  assert tf.train.latest_checkpoint(str(tmp_path / "out")).endswith("model.ckpt-5")
  assert not tf.io.gfile.glob(str(tmp_path / "out" / "model.ckpt-[6-9]*"))
  assert int(trainer.global_step.numpy()) == 7


def test_jit_compile_gives_the_same_losses(tmp_path, data_path):
  plain = _trainer(tmp_path / "plain", num_train_steps=4).train(_input_fn(data_path, 8))
  jit = _trainer(tmp_path / "jit", num_train_steps=4, jit_compile=True).train(
      _input_fn(data_path, 8))
  np.testing.assert_allclose([l for _, l in jit["history"]], [l for _, l in plain["history"]],
                             rtol=1e-4)


def test_mixed_float16_trains_close_to_float32(tmp_path, data_path):
  float32 = _trainer(tmp_path / "f32", num_train_steps=6).train(_input_fn(data_path, 8))
  float16 = _trainer(tmp_path / "f16", num_train_steps=6, mixed_precision="mixed_float16")
  result = float16.train(_input_fn(data_path, 8))
  mixed_precision.set_policy("float32")
  assert float16.model.dense.compute_dtype == "float16"
  assert float16.model_variables["toy/dense/kernel"].dtype == tf.float32
  np.testing.assert_allclose([l for _, l in result["history"]],
                             [l for _, l in float32["history"]], rtol=2e-2)
  assert float(float16.loss_scale.scale.numpy()) == 2.0 ** 15


def test_dynamic_loss_scale_skips_and_halves_on_overflow():
  loss_scale = mixed_precision.DynamicLossScale(initial_scale=8.0, growth_steps=2)
  assert not bool(loss_scale.update([tf.constant([1.0, np.inf])]))
  assert float(loss_scale.scale.numpy()) == 4.0
  assert bool(loss_scale.update([tf.constant([1.0])]))
  assert bool(loss_scale.update([tf.constant([1.0])]))
  assert float(loss_scale.scale.numpy()) == 8.0
  np.testing.assert_allclose(loss_scale.unscale([tf.constant(16.0)])[0].numpy(), 2.0)


def test_evaluate_writes_eval_results_like_the_original(tmp_path, data_path):
  trainer = _trainer(tmp_path, num_train_steps=3)
  trainer.train(_input_fn(data_path, 8))
  results = trainer.evaluate(_input_fn(data_path, 8, is_training=False), max_eval_steps=3)
  assert set(results) == {"accuracy", "cross_entropy", "loss", "global_step"}
  assert results["global_step"] == 3
  lines = (tmp_path / "eval_results.txt").read_text().splitlines()
  assert lines == [f"{k} = {results[k]}" for k in sorted(results)]
  # Exact aggregation over the 24 examples evaluated, against a direct computation.
  dataset = input_pipeline.make_dataset([data_path], toy_task.FEATURE_SPEC, 24, False)
  features = next(iter(dataset))
  logits = trainer.model(features)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(features["label"], logits)
  np.testing.assert_allclose(results["loss"], per_example.numpy().mean(), rtol=1e-5)
  accuracy = np.mean(np.argmax(logits.numpy(), -1) == features["label"].numpy())
  np.testing.assert_allclose(results["accuracy"], accuracy)
  # An evaluation-only trainer restores the latest checkpoint of output_dir.
  evaluator = engine.Trainer(STRATEGY, toy_task.ToyTask(), trainer.config)
  again = evaluator.evaluate(_input_fn(data_path, 8, is_training=False), max_eval_steps=3)
  assert again == pytest.approx(results)
