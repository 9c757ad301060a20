"""AdamWeightDecay, LAMB and the learning-rate schedule against NumPy transcriptions."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import keras_variables
from modeling import optimization
from tests import xla_functions

EXCLUDE = ("LayerNorm", "layer_norm", "bias")
SHAPES = {
    "bert/embeddings/word_embeddings": (5, 3),
    "bert/encoder/layer_0/attention/self/query/kernel": (3, 4),
    "bert/encoder/layer_0/attention/self/query/bias": (4,),
    "bert/encoder/layer_0/output/LayerNorm/gamma": (4,),
    "cls/predictions/output_bias": (5,),
}


def numpy_learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
  """The original `create_optimizer` schedule: polynomial_decay(power=1), warmup override."""
  learning_rate = init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)
  if num_warmup_steps and step < num_warmup_steps:
    learning_rate = init_lr * step / num_warmup_steps
  return learning_rate


def numpy_step(params, slots, grads, learning_rate, use_lamb):
  """One step of the original `AdamWeightDecayOptimizer` (or ALBERT's `LAMBOptimizer`) in NumPy."""
  global_norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads.values()))
  clip_scale = 1.0 / max(global_norm, 1.0)
  for name, param in params.items():
    grad = grads[name] * clip_scale
    m, v = slots[name]
    next_m = 0.9 * m + 0.1 * grad
    next_v = 0.999 * v + 0.001 * grad ** 2
    update = next_m / (np.sqrt(next_v) + 1e-6)
    excluded = any(re.search(pattern, name) for pattern in EXCLUDE)
    if not excluded:
      update = update + 0.01 * param
    ratio = 1.0
    if use_lamb and not excluded:
      param_norm, update_norm = np.linalg.norm(param), np.linalg.norm(update)
      ratio = param_norm / update_norm if param_norm > 0 and update_norm > 0 else 1.0
    params[name] = param - ratio * learning_rate * update
    slots[name] = (next_m, next_v)
  return global_norm


def _initial_values(seed):
  rng = np.random.default_rng(seed)
  return {name: rng.normal(size=shape).astype(np.float32) for name, shape in SHAPES.items()}


def _gradients(seed, num_steps):
  rng = np.random.default_rng(seed)
  # Alternate large and small gradients so that steps with and without clipping are both covered.
  return [{name: (rng.normal(size=shape) * (3.0 if step % 2 == 0 else 0.05)).astype(np.float32)
           for name, shape in SHAPES.items()} for step in range(num_steps)]


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_matches_numpy_transcription(optimizer_type, jit_compile):
  init_lr, num_train_steps, num_warmup_steps, num_steps = 0.1, 5, 2, 7
  initial = _initial_values(0)
  # One variable is a Keras variable, as the model's weights are.
  variables = {name: (keras.Variable(value, name=name.replace("/", "_"))
                      if name.endswith("word_embeddings") else tf.Variable(value))
               for name, value in initial.items()}
  optimizer = optimization.create_optimizer(init_lr, num_train_steps, num_warmup_steps,
                                            optimizer_type)
  optimizer.build(variables)
  tf_variables = [keras_variables.as_tf_variable(variables[n]) for n in optimizer.variable_names]

  @tf.function(jit_compile=jit_compile)
  def step(grads):
    return optimizer.apply_gradients(zip(grads, tf_variables))

  params = {name: value.astype(np.float64) for name, value in initial.items()}
  slots = {name: (np.zeros(shape), np.zeros(shape)) for name, shape in SHAPES.items()}
  clipped_steps = 0
  for step_index, grads in enumerate(_gradients(1, num_steps)):
    learning_rate = numpy_learning_rate(step_index, init_lr, num_train_steps, num_warmup_steps)
    np.testing.assert_allclose(optimizer.current_learning_rate().numpy(), learning_rate, rtol=1e-6)
    global_norm = step([grads[n] for n in optimizer.variable_names])
    expected_norm = numpy_step(params, slots, grads, learning_rate, optimizer_type == "lamb")
    clipped_steps += expected_norm > 1.0
    np.testing.assert_allclose(global_norm.numpy(), expected_norm, rtol=1e-5)
    for name in SHAPES:
      np.testing.assert_allclose(keras_variables.as_tf_variable(variables[name]).numpy(),
                                 params[name], rtol=2e-5, atol=1e-6,
                                 err_msg=f"{name} step {step_index}")
  assert 0 < clipped_steps < num_steps
  assert int(optimizer.iterations.numpy()) == num_steps
  slot_values = {n: v.numpy() for n, v in optimizer.slot_name_to_variable().items()}
  for name in SHAPES:
    np.testing.assert_allclose(slot_values[f"{name}/adam_m"], slots[name][0], rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(slot_values[f"{name}/adam_v"], slots[name][1], rtol=2e-5, atol=1e-9)


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_update_is_one_xla_kernel_per_set_of_options(optimizer_type):
  variables = {name: tf.Variable(value) for name, value in _initial_values(0).items()}
  optimizer = optimization.create_optimizer(0.1, 5, 2, optimizer_type)
  optimizer.build(variables)

  @tf.function
  def step():
    return optimizer.apply_gradients(
        [(tf.ones_like(variable), variable) for variable in optimizer.trainable_variables])

  graph_def = step.get_concrete_function().graph.as_graph_def()
  # Five variables of four shapes, with and without weight decay: one kernel for each option.
  assert len(xla_functions.xla_compiled_functions(graph_def)) == 2


def test_object_checkpoint_of_a_stepped_optimizer_round_trips(tmp_path):
  variable = tf.Variable([1.0, -2.0])
  optimizer = optimization.AdamWeightDecay(0.1)
  optimizer.build({"w": variable})
  optimizer.apply_gradients([(tf.constant([0.5, 1.0]), variable)])
  slots = {name: slot.numpy() for name, slot in optimizer.slot_name_to_variable().items()}
  path = tf.train.Checkpoint(optimizer=optimizer, w=variable).save(str(tmp_path / "ckpt"))

  restored_variable = tf.Variable([0.0, 0.0])
  restored = optimization.AdamWeightDecay(0.1)
  restored.build({"w": restored_variable})
  tf.train.Checkpoint(optimizer=restored, w=restored_variable).restore(path).assert_consumed()
  assert int(restored.iterations.numpy()) == 1
  np.testing.assert_array_equal(restored_variable.numpy(), variable.numpy())
  for name, slot in restored.slot_name_to_variable().items():
    np.testing.assert_array_equal(slot.numpy(), slots[name])


def test_exclusions_use_original_names():
  adamw = optimization.AdamWeightDecay(1e-3)
  lamb = optimization.Lamb(1e-3)
  assert adamw.use_weight_decay("bert/encoder/layer_0/attention/self/query/kernel")
  for name in ["bert/embeddings/LayerNorm/gamma", "cls/predictions/output_bias",
               "bert/encoder/layer_0/attention/self/query/bias", "my/layer_norm/beta"]:
    assert not adamw.use_weight_decay(name)
    assert not lamb.use_layer_adaptation(name)
  assert lamb.use_layer_adaptation("bert/embeddings/word_embeddings")


def test_schedule_has_the_original_discontinuity_after_warmup():
  schedule = optimization.WarmupPolynomialDecay(1e-4, decay_steps=100, warmup_steps=10)
  values = [float(schedule(step)) for step in (0, 5, 9, 10, 100, 150)]
  np.testing.assert_allclose(values, [0.0, 5e-5, 9e-5, 9e-5, 0.0, 0.0], atol=1e-12, rtol=1e-6)
  np.testing.assert_allclose(float(schedule(11)), 1e-4 * (1 - 11 / 100), rtol=1e-6)
  no_warmup = optimization.WarmupPolynomialDecay(1e-4, decay_steps=100)
  np.testing.assert_allclose(float(no_warmup(0)), 1e-4, rtol=1e-6)


def test_skipped_step_keeps_weights_and_slots_but_counts():
  variable = tf.Variable([1.0, -2.0])
  optimizer = optimization.AdamWeightDecay(0.1)
  optimizer.build({"w": variable})
  optimizer.apply_gradients([(tf.constant([np.nan, 1.0]), variable)],
                            should_apply=tf.constant(False))
  np.testing.assert_array_equal(variable.numpy(), [1.0, -2.0])
  assert not np.any(optimizer.slot_name_to_variable()["w/adam_m"].numpy())
  assert int(optimizer.iterations.numpy()) == 1


def test_unknown_variable_and_optimizer_type_are_clear_errors():
  optimizer = optimization.AdamWeightDecay(0.1)
  optimizer.build({"w": tf.Variable([1.0])})
  with pytest.raises(ValueError, match="not built with variable"):
    optimizer.apply_gradients([(tf.constant([1.0]), tf.Variable([2.0], name="stray"))])
  with pytest.raises(ValueError, match="--optimizer must be one of"):
    optimization.create_optimizer(1e-4, 10, 1, "sgd")
