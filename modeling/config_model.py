"""`BertConfigModel`: a Keras model made from a `BertConfig` alone, and serialised as it."""

import keras


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
