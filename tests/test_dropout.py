"""`modeling.dropout.Dropout`: Keras's dropout in distribution, scale and gradient, from one
16-bit draw an element (half of Keras's random numbers) and one XLA kernel each way."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from modeling import dropout
from modeling import pretraining_model
from tests import xla_functions

QUANTIZED_RATE = 6554 / 65536  # round(0.1 * 65536) / 65536


def _value_and_gradient(layer, inputs, upstream):
  with tf.GradientTape() as tape:
    tape.watch(inputs)
    outputs = layer(inputs, training=True)
  return outputs, tape.gradient(outputs, inputs, output_gradients=upstream)


def test_drops_the_quantized_rate_and_scales_the_rest_to_keep_the_mean():
  layer = dropout.Dropout(0.1, seed=3)
  inputs = tf.constant(np.random.default_rng(0).uniform(1, 2, [64, 128, 96]), tf.float32)
  outputs = layer(inputs, training=True).numpy()
  kept = outputs != 0
  size = kept.size
  # The dropped share is binomial(size, QUANTIZED_RATE): 5 standard deviations either side.
  tolerance = 5 * np.sqrt(QUANTIZED_RATE * (1 - QUANTIZED_RATE) / size)
  assert abs((1 - kept.mean()) - QUANTIZED_RATE) < tolerance
  np.testing.assert_allclose(outputs[kept], inputs.numpy()[kept] / (1 - QUANTIZED_RATE),
                             rtol=1e-6)
  # Independent elements: the rate holds along every axis, not just overall.
  for axis in range(3):
    shares = 1 - kept.mean(axis=tuple(a for a in range(3) if a != axis))
    spread = 5 * np.sqrt(QUANTIZED_RATE * (1 - QUANTIZED_RATE) / (size / kept.shape[axis]))
    assert np.all(np.abs(shares - QUANTIZED_RATE) < spread), axis


def test_the_gradient_is_the_upstream_through_the_same_mask_and_scale():
  layer = dropout.Dropout(0.3, seed=5)
  inputs = tf.constant(np.random.default_rng(1).uniform(1, 2, [7, 13, 5]), tf.float32)  # odd
  upstream = tf.constant(np.random.default_rng(2).normal(size=[7, 13, 5]), tf.float32)
  for run in (_value_and_gradient, tf.function(_value_and_gradient)):
    outputs, gradient = run(layer, inputs, upstream)
    kept = outputs.numpy() != 0
    assert 0 < kept.mean() < 1
    scale = 65536 / (65536 - round(0.3 * 65536))
    np.testing.assert_allclose(gradient.numpy(), np.where(kept, upstream.numpy() * scale, 0),
                               rtol=1e-6)


def test_a_seed_repeats_its_masks_and_each_call_draws_new_ones():
  inputs = tf.ones([32, 48])
  first, second = dropout.Dropout(0.5, seed=7), dropout.Dropout(0.5, seed=7)
  a1, a2 = first(inputs, training=True), first(inputs, training=True)
  b1 = second(inputs, training=True)
  np.testing.assert_array_equal(a1, b1)
  assert not np.array_equal(a1, a2)


def test_random_halves_is_one_draw_of_half_as_many_words():
  seed = tf.constant([11, 12], tf.int64)
  for size in (6, 7):
    halves = dropout.random_halves(tf.constant([size]), seed)
    words = tf.random.stateless_uniform([(size + 1) // 2], tf.constant([11, 12], tf.int32),
                                        minval=None, maxval=None, dtype=tf.uint32)
    assert halves.dtype == tf.uint16 and halves.shape == [size]
    np.testing.assert_array_equal(halves, tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size])


def test_one_xla_kernel_each_way_and_no_float_uniform():
  layer = dropout.Dropout(0.1, seed=1)
  traced = tf.function(_value_and_gradient)
  graph = traced.get_concrete_function(layer, tf.TensorSpec([None, 8]),
                                       tf.TensorSpec([None, 8])).graph
  assert len(xla_functions.xla_compiled_functions(graph.as_graph_def())) == 1  # both ways
  op_types = {op.type for op in graph.get_operations()}
  assert "StatelessRandomUniformFullIntV2" in op_types
  assert "StatelessRandomUniformV2" not in op_types
  keras_graph = traced.get_concrete_function(keras.layers.Dropout(0.1), tf.TensorSpec([None, 8]),
                                             tf.TensorSpec([None, 8])).graph
  assert "StatelessRandomUniformV2" in {op.type for op in keras_graph.get_operations()}


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_computes_in_the_half_dtype(policy):
  dtype = tf.as_dtype(keras.DTypePolicy(policy).compute_dtype)
  inputs = tf.cast(tf.random.uniform([16, 40], 1, 2), dtype)
  outputs, gradient = _value_and_gradient(dropout.Dropout(0.1, seed=2, dtype=policy), inputs,
                                          tf.ones_like(inputs))
  assert outputs.dtype == gradient.dtype == dtype
  kept = outputs.numpy() != 0
  np.testing.assert_allclose(tf.cast(outputs, tf.float32).numpy()[kept],
                             tf.cast(inputs, tf.float32).numpy()[kept] / (1 - QUANTIZED_RATE),
                             rtol=1e-2)


def test_inference_zero_and_full_rates():
  inputs = tf.random.uniform([4, 8], 1, 2)
  assert dropout.Dropout(0.1)(inputs, training=False) is inputs
  assert dropout.Dropout(0.0)(inputs, training=True) is inputs
  np.testing.assert_array_equal(dropout.Dropout(1.0)(inputs, training=True), tf.zeros([4, 8]))


def test_config_round_trips_and_noise_shape_is_refused():
  layer = dropout.Dropout(0.2, seed=4, name="d")
  again = dropout.Dropout.from_config(layer.get_config())
  assert isinstance(again, dropout.Dropout) and (again.rate, again.seed) == (0.2, 4)
  with pytest.raises(ValueError, match="noise_shape must be None"):
    dropout.Dropout(0.1, noise_shape=(None, 1))


def test_every_dropout_of_the_model_is_this_one():
  config = bert_config_lib.BertConfig(vocab_size=20, hidden_size=16, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=32)
  model = pretraining_model.BertPretrainingModel(config)
  sublayers = model._flatten_layers()  # pylint: disable=protected-access
  layers = [layer for layer in sublayers if isinstance(layer, keras.layers.Dropout)]
  # The embeddings' and three a layer (attention probabilities, the two sub-layer outputs).
  assert sum(layer.rate > 0 for layer in layers) == 1 + 3 * config.num_hidden_layers
  assert all(isinstance(layer, dropout.Dropout) for layer in layers)
