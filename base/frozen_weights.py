"""oneDNN's frozen-weights setting: for serving processes only.

With `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` in a process's environment, TensorFlow's oneDNN matrix
products (`_MklNativeFusedMatMul`, a product with its bias) lay each weight out in oneDNN's
blocked format once, on their first call, and keep that copy for every later call. A bfloat16
export then skips a per-call repacking of every weight into the layout the bfloat16 dot-product
instructions read, which dominates small batches (docs/serving.md, "Weights laid out once").

A product keeps the weights of its first call even after the variable changes: a process that
trains would go on computing with its initial weights: `refuse_training` is called by the
engine's `Trainer.train` and, before any work, by the runners' checks
(`training.config.check_starting_weights`).

Example:
  >>> from base import frozen_weights
  >>> frozen_weights.assumed({"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "True"})
  True
  >>> frozen_weights.assumed({"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "0"}), frozen_weights.assumed({})
  (False, False)
"""

import os

from base import errors

VARIABLE = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"
# TensorFlow's ReadBoolFromEnvVar: "1" or "true" in any case is true, "0" or "false" false.
_TRUE_VALUES = ("1", "true")


def assumed(environ=None):
  """Whether the environment (default `os.environ`) asks oneDNN to assume frozen weights."""
  environ = os.environ if environ is None else environ
  return environ.get(VARIABLE, "").strip().lower() in _TRUE_VALUES


def refuse_training(what, environ=None):
  """Raises `errors.ConfigError` naming `what` (e.g. "--do_train") when the setting is on."""
  environ = os.environ if environ is None else environ
  if assumed(environ):
    raise errors.ConfigError(
        f"{what} with {VARIABLE}={environ[VARIABLE]} in the environment: oneDNN's matrix "
        "products would keep the weights of their first call and train nothing; unset it for "
        "training (it is for processes that serve an export)")
