"""The original's LayerNorm: epsilon 1e-12 over the last axis, always computed in float32."""

import keras

# Hard-coded in TF1 `tf.contrib.layers.layer_norm`, which the original used.
LAYER_NORM_EPSILON = 1e-12


def make_layer_norm(name):
  """Returns a LayerNormalization that runs in float32 under any mixed-precision policy.

  Under `mixed_float16`/`mixed_bfloat16` the mean and variance of a half-precision input lose too
  much precision, so the layer's dtype policy is pinned to float32 (its inputs are cast up; the next
  layer casts the output back down).
  """
  return keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, dtype="float32", name=name)
