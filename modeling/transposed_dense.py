"""A dense layer whose kernel is stored `[units, input_dim]`: the layout models served on AVX2
processors use for the feed-forward's first product (`serving.servable.served_copy`).

TensorFlow's oneDNN kernel takes a variable kernel in the layout it is stored in. On an AVX2
processor, for a few hundred rows by a `[hidden_size, intermediate_size]` product, it runs faster
when the kernel is stored transposed, `[intermediate_size, hidden_size]`, and multiplied with
`transpose_b`; with AVX-512 it runs slower so (figures in docs/serving.md). Checkpoints keep the
original's `[in, out]` layout; a model is given this layout by `BertConfigModel.rebuilt`, which
transposes the values it copies (`copied_value`).
"""

import keras
import tensorflow as tf

# The variable's name, where `keras.layers.Dense` has "kernel".
TRANSPOSED_KERNEL = "kernel_transposed"


class TransposedDense(keras.layers.Layer):
  """`keras.layers.Dense(units)` (no activation) on 2-D inputs, its kernel stored transposed.

  Args:
    units: output width.
    kernel_initializer: initializer of the `[in, out]` kernel it stands for (a truncated normal
      has the same distribution either way).
    **kwargs: passed to `keras.layers.Layer` (`name`).

  Example:
    >>> import tensorflow as tf
    >>> from modeling import transposed_dense
    >>> dense = transposed_dense.TransposedDense(32)
    >>> outputs = dense(tf.zeros([5, 16]))  # [5, 32]
    >>> tuple(dense.kernel_transposed.shape)  # [units, input_dim]
    (32, 16)
  """

  def __init__(self, units, kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.units = units
    self.kernel_initializer = keras.initializers.get(kernel_initializer)

  def build(self, input_shape):
    self.kernel_transposed = self.add_weight(
        name=TRANSPOSED_KERNEL, shape=(self.units, input_shape[-1]),
        initializer=self.kernel_initializer)
    self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
    self.built = True

  def call(self, inputs):
    """`[rows, input_dim]` -> `[rows, units]`: `inputs . kernel + bias`."""
    return tf.nn.bias_add(tf.matmul(inputs, self.kernel_transposed, transpose_b=True), self.bias)

  def get_config(self):
    config = super().get_config()
    config.update({"units": self.units,
                   "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)})
    return config


def copied_value(source, target):
  """The value of Keras variable `source` laid out for `target`, its counterpart in a rebuilt
  model: as it is when path and shape agree; transposed when `target` is the
  `kernel_transposed` of the `[in, out]` `kernel` `source`.

  Raises:
    ValueError: the two are not the same weight.
  """
  if source.path == target.path and tuple(source.shape) == tuple(target.shape):
    return source.value
  if (source.path.endswith("/kernel")
      and target.path == source.path[:-len("kernel")] + TRANSPOSED_KERNEL
      and tuple(target.shape) == tuple(reversed(source.shape))):
    return tf.transpose(source.value)
  raise ValueError(f"{source.path} {tuple(source.shape)} has no counterpart in "
                   f"{target.path} {tuple(target.shape)}")
