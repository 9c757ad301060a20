"""`modeling.layer_norm.LayerNorm`: Keras's layer norm in value and gradient, epsilon 1e-12, fused
kernels in training; for inference `_MklLayerNorm`, or the formula's ops for small inputs."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.util import _pywrap_util_port

from benchmarks import xplane
from modeling import layer_norm

WIDTH = 32


def _layer_pair(seed=0):
  """Keras's `LayerNormalization` and ours, built with the same random gamma and beta."""
  rng = np.random.default_rng(seed)
  keras_norm = keras.layers.LayerNormalization(epsilon=layer_norm.LAYER_NORM_EPSILON)
  ours = layer_norm.make_layer_norm("LayerNorm")
  for layer in (keras_norm, ours):
    layer.build((None, WIDTH))
  for keras_weight, our_weight in zip(keras_norm.weights, ours.weights, strict=True):
    value = rng.normal(size=keras_weight.shape).astype(np.float32)
    keras_weight.assign(value)
    our_weight.assign(value)
  return keras_norm, ours


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(6, WIDTH), (3, 5, WIDTH)])
def test_values_and_gradients_match_keras_layer_normalization(shape, training):
  keras_norm, ours = _layer_pair()
  inputs = tf.constant(np.random.default_rng(1).normal(2.0, 3.0, size=shape), tf.float32)
  output_gradients = tf.constant(np.random.default_rng(2).normal(size=shape), tf.float32)
  results = []
  for layer in (keras_norm, ours):
    with tf.GradientTape() as tape:
      tape.watch(inputs)
      outputs = layer(inputs, training=training)
    gradients = tape.gradient(outputs, [inputs, layer.gamma, layer.beta],
                              output_gradients=output_gradients)
    results.append([outputs.numpy()] + [g.numpy() for g in gradients])
  for name, expected, actual in zip(["value", "d inputs", "d gamma", "d beta"], *results):
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max(),
                               err_msg=name)


@pytest.mark.parametrize("training", [True, False])
def test_epsilon_stays_1e_12(training):
  # Rows whose variance (about 1e-10) is far below the 1.001e-5 that `tf.nn.fused_batch_norm`
  # would silently use: with it, these rows would come out about 300 times smaller.
  _, ours = _layer_pair()
  rng = np.random.default_rng(3)
  inputs = (1.0 + 1e-5 * rng.normal(size=(4, WIDTH))).astype(np.float64)
  centered = inputs - inputs.mean(axis=-1, keepdims=True)
  normalized = centered / np.sqrt((centered ** 2).mean(axis=-1, keepdims=True) + 1e-12)
  expected = normalized * ours.gamma.numpy() + ours.beta.numpy()
  np.testing.assert_allclose(ours(inputs.astype(np.float32), training=training).numpy(),
                             expected, atol=0.05)


def test_refuses_other_axes_and_switches():
  with pytest.raises(ValueError, match="axis=-1"):
    layer_norm.LayerNorm(axis=1)
  with pytest.raises(ValueError, match="center=True"):
    layer_norm.LayerNorm(center=False)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16", "bfloat16"])
def test_every_policy_keeps_it_in_float32(policy):
  """Training's mixed policies and a bfloat16 export's alike: float32 weights, statistics and
  output (the residual stream), whatever the input's dtype."""
  keras_norm, _ = _layer_pair()
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(policy)
  try:
    ours = layer_norm.make_layer_norm("LayerNorm")
  finally:
    keras.mixed_precision.set_global_policy(previous)
  ours.build((None, WIDTH))
  for keras_weight, our_weight in zip(keras_norm.weights, ours.weights, strict=True):
    our_weight.assign(keras_weight)
  assert ours.compute_dtype == "float32"
  assert [weight.dtype for weight in ours.weights] == ["float32", "float32"]
  inputs = tf.constant(np.random.default_rng(4).normal(size=(6, WIDTH)), tf.bfloat16)
  outputs = ours(inputs)
  assert outputs.dtype == tf.float32
  np.testing.assert_allclose(outputs.numpy(), keras_norm(tf.cast(inputs, tf.float32)).numpy(),
                             rtol=1e-5, atol=1e-5)


def _executed_op_types(function, inputs, trace_dir):
  """Op types that ran in a traced call of `function(inputs)` (after Grappler and oneDNN's
  rewrites, which a graph read before the call does not show)."""
  function(inputs)
  tf.profiler.experimental.start(str(trace_dir))
  function(inputs)
  tf.profiler.experimental.stop()
  return {op_type for _, op_type, _ in xplane.leaf_op_events(str(trace_dir))}


@pytest.mark.skipif(not _pywrap_util_port.IsMklEnabled(), reason="TensorFlow without oneDNN")
def test_training_runs_the_fused_kernels_and_inference_picks_by_size(tmp_path):
  norm = layer_norm.make_layer_norm("LayerNorm")
  norm.build((None, WIDTH))
  small = tf.ones([2, 3, WIDTH], norm.compute_dtype)
  large = tf.ones([2, layer_norm.FORMULA_MAX_ELEMENTS // WIDTH, WIDTH], norm.compute_dtype)

  @tf.function
  def train(inputs):
    with tf.GradientTape() as tape:
      tape.watch(inputs)
      outputs = norm(inputs, training=True)
    return tape.gradient(outputs, [inputs] + norm.trainable_weights)

  trained = _executed_op_types(train, small, tmp_path / "train")
  assert {"_MklNativeFusedBatchNormV3", "_MklNativeFusedBatchNormGradV3"} <= trained
  serve = tf.function(norm, input_signature=[tf.TensorSpec([None, None, WIDTH],
                                                           norm.compute_dtype)])
  formula_ops = {"Mean", "Rsqrt"}
  served_small = _executed_op_types(serve, small, tmp_path / "small")
  assert formula_ops <= served_small
  assert not served_small & {"_MklLayerNorm", "FusedBatchNormV3", "_MklNativeFusedBatchNormV3"}
  served_large = _executed_op_types(serve, large, tmp_path / "large")
  assert "_MklLayerNorm" in served_large
  assert not served_large & (formula_ops | {"FusedBatchNormV3", "_MklNativeFusedBatchNormV3"})


def _compare_with_keras(rows, training, jit_compile, input_signature=None, seed=5):
  """Keras's layer and ours on the same random `[rows, WIDTH]` input, in one `tf.function` each:
  asserts the same value and gradients; returns our function's traced graph."""
  keras_norm, ours = _layer_pair()
  rng = np.random.default_rng(seed)
  inputs = tf.constant(rng.normal(2.0, 3.0, size=(rows, WIDTH)), tf.float32)
  output_gradients = tf.constant(rng.normal(size=(rows, WIDTH)), tf.float32)
  results = []
  for layer in (keras_norm, ours):

    @tf.function(input_signature=input_signature, jit_compile=jit_compile)
    def value_and_gradients(inputs, output_gradients, layer=layer):
      with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = layer(inputs, training=training)
      return [outputs] + tape.gradient(outputs, [inputs, layer.gamma, layer.beta],
                                       output_gradients=output_gradients)

    results.append([t.numpy() for t in value_and_gradients(inputs, output_gradients)])
  for name, expected, actual in zip(["value", "d inputs", "d gamma", "d beta"], *results):
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max(),
                               err_msg=name)
  return value_and_gradients.get_concrete_function(inputs, output_gradients).graph


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("rows", [5, layer_norm.FORMULA_MAX_ELEMENTS // WIDTH + 5])
def test_inference_of_unknown_size_matches_keras_in_value_and_gradient(rows, jit_compile):
  _compare_with_keras(rows, False, jit_compile,
                      input_signature=[tf.TensorSpec([None, WIDTH], tf.float32)] * 2)


def test_training_under_xla_takes_the_formula_and_matches_keras_in_value_and_gradient():
  """XLA lowers the fused batch norm of a channel per row to slow loops: a compiled training step
  normalizes by the formula's ops instead, with Keras's values and gradients."""
  graph = _compare_with_keras(6, True, jit_compile=True, seed=7)
  op_types = {op.type for op in graph.get_operations()}
  assert "Rsqrt" in op_types and not any("BatchNorm" in t for t in op_types), op_types
