"""The original's LayerNorm: epsilon 1e-12 over the last axis; in training one fused TensorFlow
kernel and its gradient kernel."""

import keras
import tensorflow as tf

# Hard-coded in TF1 `tf.contrib.layers.layer_norm`, which the original used.
LAYER_NORM_EPSILON = 1e-12

# The dtype of the layer norms and of the residual stream they normalize, under every policy, as
# PyTorch's autocast keeps it: rounded to bfloat16 after every layer norm, it added to a bfloat16
# model's error and saved no time (docs/benchmarks.md, "Measurements behind the code").
RESIDUAL_DTYPE = "float32"

# At inference, inputs of fewer elements are normalized by the formula's ops: `_MklLayerNorm`
# pays a fixed cost per call that they do not, and below about this size it is most of its time.
FORMULA_MAX_ELEMENTS = 1 << 16


class LayerNorm(keras.layers.LayerNormalization):
  """`keras.layers.LayerNormalization` over the last axis; in training by `FusedBatchNormV3`.

  The same variables (`gamma`, `beta`), config and values as Keras's layer. In training each row
  of the input is one channel of a training-mode batch norm over `[1, rows, width, 1]` (NCHW),
  followed by `* gamma + beta`: one kernel and its gradient kernel, where Keras's formula runs
  about ten elementwise ops and their gradients. The raw op is called so that epsilon stays
  1e-12: `tf.nn.fused_batch_norm` raises any epsilon below 1.001e-5 (an old cuDNN limit).
  Otherwise (exports, evaluation) the same graph becomes one `_MklLayerNorm` kernel (TensorFlow's
  oneDNN remapper rewrites it when nothing takes its gradient), but for inputs of fewer than
  `FORMULA_MAX_ELEMENTS` elements (a few sentences), which the formula's ops normalize faster,
  with their statistics in float32 (docs/benchmarks.md, "Measurements behind the code"). Under
  XLA, training and inputs of unknown size take the formula's ops, which XLA fuses.

  Args:
    **kwargs: `keras.layers.LayerNormalization`'s, with `axis=-1`, `center` and `scale` on and
      `rms_scaling` off (its defaults but `epsilon`).

  Example:
    >>> import tensorflow as tf
    >>> from modeling import layer_norm
    >>> norm = layer_norm.LayerNorm(epsilon=1e-12)
    >>> normalized = norm(tf.random.normal([2, 8, 16]))  # [2, 8, 16]
  """

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    if self.axis not in (-1, [-1]) or not (self.center and self.scale) or self.rms_scaling:
      raise ValueError("LayerNorm normalizes the last axis with gamma and beta: axis=-1, "
                       "center=True, scale=True, rms_scaling=False")

  def call(self, inputs, training=None):
    """Normalizes each vector of the last axis.

    Args:
      inputs: `[..., width]`, any float dtype.
      training: True for the fused kernel and its gradient kernel (the formula's ops under
        XLA); otherwise (exports, evaluation, prediction) `_MklLayerNorm`, or the formula's ops
        for small inputs.

    Returns:
      `[..., width]` in the compute dtype; mean and variance are accumulated in float32 even for
      bfloat16 or float16 inputs.
    """
    inputs = tf.cast(inputs, self.compute_dtype)
    # Keras's layer norm does not autocast its variables: float32 stays float32 under any policy.
    gamma, beta = tf.cast(self.gamma, inputs.dtype), tf.cast(self.beta, inputs.dtype)
    in_xla = tf.__internal__.get_enclosing_xla_context() is not None
    if training:
      # XLA fuses the formula's ops itself, and lowers the batch norm of a channel per row to
      # loops that made a compiled training step several times slower (docs/benchmarks.md).
      normalized = self._normalized(inputs) if in_xla else self._fused_normalized(inputs)
      return normalized * gamma + beta
    is_small = tf.size(inputs) < FORMULA_MAX_ELEMENTS
    static_small = tf.get_static_value(is_small)
    if static_small is None and in_xla:
      static_small = True  # XLA compiles no `Switch`; it fuses the formula's ops itself
    if static_small is not None:
      normalized = self._normalized(inputs) if static_small else self._fused_normalized(inputs)
      return normalized * gamma + beta
    return self._chosen_by_size(inputs, gamma, beta, is_small)

  def _chosen_by_size(self, inputs, gamma, beta, is_small):
    """The formula's output where `is_small`, else the fused kernel's, chosen by `Switch` and
    `Merge`, the low-level form of a `tf.cond`: TensorFlow's remapper does not look into
    `tf.cond`'s branch functions, and its pattern ends with the scale and offset. A gradient
    (which `GradientTape` cannot take through `Switch`) is the formula's."""

    @tf.custom_gradient
    def chosen(inputs, gamma, beta):
      large, small = tf.raw_ops.Switch(data=inputs, pred=is_small)
      outputs = tf.raw_ops.Merge(inputs=[self._normalized(small) * gamma + beta,
                                         self._fused_normalized(large) * gamma + beta]).output

      def gradient(upstream):
        with tf.GradientTape() as tape:
          tape.watch([inputs, gamma, beta])
          recomputed = self._normalized(inputs) * gamma + beta
        return tape.gradient(recomputed, [inputs, gamma, beta], output_gradients=upstream)

      return outputs, gradient

    return chosen(inputs, gamma, beta)

  def _fused_normalized(self, inputs):
    """`[..., width]` -> the same, normalized, by one `FusedBatchNormV3` (and, when a gradient
    is taken, one `FusedBatchNormGradV3`)."""
    shape = tf.shape(inputs)
    rows = tf.reduce_prod(shape[:-1])
    unit_scale = tf.ones([rows], tf.float32)
    zero_offset = tf.zeros([rows], tf.float32)
    no_statistics = tf.constant([], tf.float32)
    normalized = tf.raw_ops.FusedBatchNormV3(
        x=tf.reshape(inputs, [1, rows, shape[-1], 1]), scale=unit_scale, offset=zero_offset,
        mean=no_statistics, variance=no_statistics, epsilon=self.epsilon, data_format="NCHW",
        is_training=True).y
    return tf.reshape(normalized, shape)

  def _normalized(self, inputs):
    """`[..., width]` -> the same, normalized, by the formula; statistics in float32."""
    values = tf.cast(inputs, tf.float32)
    mean = tf.reduce_mean(values, axis=-1, keepdims=True)
    centered = values - mean
    variance = tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
    return tf.cast(centered * tf.math.rsqrt(variance + self.epsilon), inputs.dtype)


def make_layer_norm(name):
  """Returns the `LayerNorm` of a layer being built: float32 under every policy.

  Its inputs are cast up and its output is float32, the dtype of the residual stream
  (`RESIDUAL_DTYPE`), which the next matrix product casts down to the compute dtype. Under
  mixed precision, training keeps the statistics' inputs and the gradients of the output in
  float32; a bfloat16 export (`serving/export_precision.py`) computes as a model trained under
  mixed_bfloat16 does.
  """
  return LayerNorm(epsilon=LAYER_NORM_EPSILON, name=name, dtype=RESIDUAL_DTYPE)
