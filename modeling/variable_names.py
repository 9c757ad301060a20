"""Original checkpoint names of the variables of Keras sub-layers.

Every model here exposes `name_to_variable()` -> {original name: variable}; the names are the
TF1 variable scopes of the original release (`bert/encoder/layer_0/attention/self/query/kernel`),
which is what checkpoints are written and read with.
"""


def dense_variables(scope, dense):
  """`{scope/kernel: [in, out], scope/bias: [out]}` of a `keras.layers.Dense`."""
  return {f"{scope}/kernel": dense.kernel, f"{scope}/bias": dense.bias}


def layer_norm_variables(scope, layer_norm):
  """`{scope/gamma, scope/beta}` of a `keras.layers.LayerNormalization` (TF1 contrib names)."""
  return {f"{scope}/gamma": layer_norm.gamma, f"{scope}/beta": layer_norm.beta}
