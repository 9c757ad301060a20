"""`serving.servable.model_variables`: the tf.Variables a SavedModel saves, each once by path."""

import keras
import pytest

from serving import servable


def dense_model(name, shared=None):
  inputs = keras.Input((3,))
  outputs = keras.layers.Dense(2, name=name)(inputs)
  if shared is not None:
    outputs = shared(outputs)
  return keras.Model(inputs, outputs)


def test_a_weight_two_models_share_is_listed_once():
  shared = keras.layers.Dense(2, name="shared")
  first, second = dense_model("first", shared), dense_model("second", shared)
  listed = servable.model_variables(first, second)
  assert sorted(listed) == ["first/bias", "first/kernel", "second/bias", "second/kernel",
                            "shared/bias", "shared/kernel"]
  assert listed["shared/kernel"] is shared.kernel.value


def test_two_variables_with_one_path_are_refused():
  with pytest.raises(ValueError, match="two variables named twin/kernel"):
    servable.model_variables(dense_model("twin"), dense_model("twin"))
