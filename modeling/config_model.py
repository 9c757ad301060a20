"""`BertConfigModel`: a Keras model made from a `BertConfig` alone, and serialised as it."""

import keras

from modeling import transposed_dense


class BertConfigModel(keras.Model):
  """Base of the models whose constructor takes a `BertConfig` (or its dict) and `keras.Model`
  keyword arguments: `get_config()` is the config's dict and the model's name, so
  `from_config(get_config())` rebuilds the model. Subclasses set `self.config`; one with more
  constructor arguments adds them to `get_config()`.
  """

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}

  @classmethod
  def from_config(cls, config):
    return cls(**config)

  def rebuilt(self, dtype_policy=None, **changes):
    """The same class built from `get_config()` updated with `changes` (e.g.
    `drop_padding=True`), under `dtype_policy` (default this model's), holding a copy of this
    model's weights cast to its variables' dtypes (and transposed where the copy stores a kernel
    transposed, `intermediate_kernel_transposed=True`).

    Raises:
      ValueError: the rebuilt model's variables differ in name or shape.
    """
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(dtype_policy or self.dtype_policy)
    try:
      copy = type(self).from_config({**self.get_config(), **changes})
    finally:
      keras.mixed_precision.set_global_policy(previous)
    for source, target in zip(self.weights, copy.weights, strict=True):
      try:
        value = transposed_dense.copied_value(source, target)
      except ValueError as error:
        raise ValueError(f"the rebuilt {type(self).__name__} differs: {error}") from None
      target.assign(keras.ops.cast(value, target.dtype))
    return copy
