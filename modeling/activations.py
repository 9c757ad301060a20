"""The `hidden_act` values of `bert_config.json` and the functions they name."""

import math

import tensorflow as tf


def gelu(x):
  """GELU, tanh approximation: the original's `modeling.gelu` at its last commit.

  `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
  """
  cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
  return x * cdf


def gelu_exact(x):
  """GELU with the exact erf: the first release's, and HuggingFace's `"gelu"`."""
  return 0.5 * x * (1.0 + tf.math.erf(x / tf.cast(math.sqrt(2.0), x.dtype)))


def linear(x):
  return x


ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": linear,
}

# Spellings the original's `get_activation` accepts for no activation.
_LINEAR_ALIASES = ("", None)


def canonical_name(name):
  """Returns the `ACTIVATIONS` key for a config's `hidden_act`, or None if it is unknown."""
  if name in _LINEAR_ALIASES:
    return "linear"
  if isinstance(name, str) and name.lower() in ACTIVATIONS:
    return name.lower()
  return None


def get_activation(name):
  """Returns the activation function a config's `hidden_act` names.

  Raises:
    ValueError: an unknown name.
  """
  key = canonical_name(name)
  if key is None:
    raise ValueError(f"unknown activation {name!r}; expected one of {', '.join(ACTIVATIONS)}")
  return ACTIVATIONS[key]
