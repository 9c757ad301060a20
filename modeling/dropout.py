"""Dropout from 16 random bits an element: half the random numbers of Keras's, one fused pass."""

import keras
import tensorflow as tf

# Each element is kept when its 16 random bits, read as an integer, are at least
# `round(rate * 2**16)`: the rate is quantized to 1/65536 (0.1 -> 0.1000061).
_LEVELS = 1 << 16


class Dropout(keras.layers.Dropout):
  """`keras.layers.Dropout` (same arguments, config and seed state) computed from 16 random bits
  an element instead of a float32 uniform.

  Keras's dropout draws one float32 uniform per element with TensorFlow's Philox kernel, then
  compares, selects and scales in three more passes, and its gradient in two. Here one Philox
  call draws half as many uint32s, each split into two 16-bit draws (a bitcast, no copy), and
  one XLA kernel applies the mask and the scale, forward and backward. On a CPU the random
  numbers are most of dropout's cost: docs/benchmarks.md, "Measurements behind the code".

  The dropped share is `round(rate * 65536) / 65536` and the kept values are scaled by the inverse
  of its complement, so the expectation is the input's exactly. The random stream is not
  Keras's: the same seed drops other elements.

  Args:
    rate: the share of elements to drop, in [0, 1].
    noise_shape: unsupported (None): BERT drops elements independently.
    seed: an int, or None for a random seed.
    **kwargs: passed to `keras.layers.Layer`.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import dropout
    >>> layer = dropout.Dropout(0.1, seed=1)
    >>> dropped = layer(tf.ones([4, 256]), training=True)  # [4, 256]: 0 or 1 / (1 - 0.1000061)
  """

  def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
    if noise_shape is not None:
      raise ValueError("modeling.dropout.Dropout drops elements independently: noise_shape must "
                       f"be None, got {noise_shape}")
    super().__init__(rate, seed=seed, **kwargs)

  def call(self, inputs, training=False):
    """Args: inputs: float tensor of any shape. Returns: the same shape and dtype."""
    threshold = round(self.rate * _LEVELS)  # Keras's layer has checked 0 <= rate <= 1
    if not training or threshold == 0:
      return inputs
    if threshold == _LEVELS:
      return tf.zeros_like(inputs)
    return _dropout(inputs, self.seed_generator.next(), threshold)


def random_halves(shape, seed):
  """16-bit draws of `shape` from one Philox call of half as many uint32s.

  Args:
    shape: int32 `[rank]`.
    seed: int `[2]` (a Keras seed state, int64, or int32).

  Returns:
    uint16 tensor of `shape`.
  """
  size = tf.reduce_prod(shape)
  seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)  # as Keras casts its seeds
  words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None,
                                      dtype=tf.uint32)
  # An odd size drops the last half-word; the whole-tensor slice of an even size is no copy.
  return tf.reshape(tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size], shape)


@tf.function(jit_compile=True, autograph=False)
def _masked(values, bits, threshold):
  """`values` where `bits >= threshold`, scaled by 65536 / (65536 - threshold); 0 elsewhere.

  One XLA kernel, the same for the forward pass (on the input) and the backward pass (on the
  upstream gradient). Args: values float `[...]`; bits uint16 of its shape; threshold int32 `[]`.
  """
  scale = tf.cast(_LEVELS / (_LEVELS - tf.cast(threshold, tf.float32)), values.dtype)
  keep = tf.cast(bits, tf.int32) >= threshold
  return tf.where(keep, values * scale, tf.zeros_like(values))


def _dropout(inputs, seed, threshold):
  bits = random_halves(tf.shape(inputs), seed)
  threshold = tf.constant(threshold, tf.int32)

  # AutoGraph would convert the custom-gradient wrapper too and return its gradient function as
  # an output.
  @tf.autograph.experimental.do_not_convert
  @tf.custom_gradient
  def apply(values):
    return _masked(values, bits, threshold), lambda upstream: _masked(upstream, bits, threshold)

  return apply(inputs)
