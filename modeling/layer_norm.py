"""The original's LayerNorm: epsilon 1e-12 over the last axis, as one fused TensorFlow kernel."""

import keras
import tensorflow as tf

# Hard-coded in TF1 `tf.contrib.layers.layer_norm`, which the original used.
LAYER_NORM_EPSILON = 1e-12


class LayerNorm(keras.layers.LayerNormalization):
  """`keras.layers.LayerNormalization` over the last axis, computed by `FusedBatchNormV3`.

  The same variables (`gamma`, `beta`), config and values as Keras's layer, but each row of
  the input is one channel of a training-mode batch norm over `[1, rows, width, 1]` (NCHW),
  followed by `* gamma + beta`. That is the graph TensorFlow's oneDNN remapper rewrites into one
  `_MklLayerNorm` kernel when nothing takes its gradient (exports, evaluation), and in training
  one kernel and its gradient kernel, where Keras's formula runs about ten elementwise ops and
  their gradients. The raw op is called so that epsilon stays 1e-12:
  `tf.nn.fused_batch_norm` raises any epsilon below 1.001e-5 (an old cuDNN limit).

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

  def call(self, inputs):
    """Normalizes each vector of the last axis.

    Args:
      inputs: `[..., width]` (rank 2 or 3 for the fused inference kernel), any float dtype.

    Returns:
      `[..., width]` in the compute dtype; mean and variance are accumulated in float32 even for
      bfloat16 or float16 inputs.
    """
    inputs = tf.cast(inputs, self.compute_dtype)
    shape = tf.shape(inputs)
    rows = tf.reduce_prod(shape[:-1])
    # Scale 1 and offset 0 as `Fill`s and no statistics: the remapper's pattern.
    unit_scale = tf.ones([rows], tf.float32)
    zero_offset = tf.zeros([rows], tf.float32)
    no_statistics = tf.constant([], tf.float32)
    normalized = tf.raw_ops.FusedBatchNormV3(
        x=tf.reshape(inputs, [1, rows, shape[-1], 1]), scale=unit_scale, offset=zero_offset,
        mean=no_statistics, variance=no_statistics, epsilon=self.epsilon, data_format="NCHW",
        is_training=True).y
    # Keras's layer norm does not autocast its variables: float32 stays float32 under any policy.
    return (tf.reshape(normalized, shape) * tf.cast(self.gamma, normalized.dtype)
            + tf.cast(self.beta, normalized.dtype))


def make_layer_norm(name):
  """Returns the `LayerNorm` of a layer being built, in the dtype the global policy asks for.

  Under a mixed policy (`mixed_float16`/`mixed_bfloat16`) and in float32 the layer is pinned to
  float32 (its inputs are cast up; the next layer casts the output back down): training keeps its
  statistics' inputs, and the gradients of its output, in float32. Under the `bfloat16` policy of
  a bfloat16 export (`serving/export_precision.py`) it reads and writes bfloat16 with float32
  `gamma` and `beta` (policy `mixed_bfloat16`): its kernel still accumulates in float32, and the
  casts around it are gone.
  """
  exporting_bfloat16 = keras.mixed_precision.global_policy().name == "bfloat16"
  return LayerNorm(epsilon=LAYER_NORM_EPSILON, name=name,
                   dtype="mixed_bfloat16" if exporting_bfloat16 else "float32")
