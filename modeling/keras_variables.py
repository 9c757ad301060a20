"""The TensorFlow variables behind Keras 3 variables, which gradients, optimizer updates and
SavedModel signatures must address."""

import keras


def as_tf_variable(variable):
  """Returns the `tf.Variable` behind a Keras 3 variable (or `variable` itself)."""
  if isinstance(variable, keras.Variable):
    # Read outside any autocast scope, `.value` is the float32 tf.Variable (mirrored under a
    # distribution strategy), which is what gradients and updates must address.
    return variable.value
  return variable
