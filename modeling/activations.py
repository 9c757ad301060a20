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


def _xla_fused(activation):
  """Returns `activation` as two XLA kernels: one for its value and one for its gradient.

  For training only. Written as TensorFlow ops, a GELU's value and gradient are a dozen
  elementwise passes over `[batch_size * seq_length, intermediate_size]` each; XLA fuses each into
  one pass (docs/benchmarks.md, "Measurements behind the code", and "Model step"). The gradient is TensorFlow's own derivative
  of `activation`, compiled, not a hand-written formula. Inference and exports keep the plain ops:
  TensorFlow Serving runs XLA-compiled functions only behind a flag.

  A bfloat16 or float16 input (mixed precision) is computed in float32 inside the kernel and
  rounded once at its end: XLA's CPU backend runs half-precision arithmetic several times slower
  than float32 (docs/benchmarks.md, "Measurements behind the code"), and the value is the more
  precise for it.

  Args:
    activation: an elementwise function of one tensor.

  Returns:
    A function with the same values (up to XLA's rounding) whose gradient runs as one kernel.
  """
  def in_float32(x):
    return tf.cast(activation(tf.cast(x, tf.float32)), x.dtype)

  # Straight-line code: AutoGraph would only add tracing time.
  value = tf.function(in_float32, jit_compile=True, autograph=False)

  @tf.function(jit_compile=True, autograph=False)
  def gradient(x, upstream):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = in_float32(x)
    return tape.gradient(y, x, output_gradients=upstream)

  # AutoGraph would convert the custom-gradient wrapper too and return its gradient function as
  # an output.
  @tf.autograph.experimental.do_not_convert
  @tf.custom_gradient
  def fused(x):
    return value(x), lambda upstream: gradient(x, upstream)

  return fused


# Activations whose training form is worth fusing; the rest are single TensorFlow kernels already.
_FUSED_FOR_TRAINING = {"gelu": _xla_fused(gelu), "gelu_exact": _xla_fused(gelu_exact)}


def get_training_activation(name):
  """Returns the form of `get_activation(name)` to run when training: XLA-fused for the GELUs.

  Raises:
    ValueError: an unknown name.
  """
  activation = get_activation(name)
  return _FUSED_FOR_TRAINING.get(canonical_name(name), activation)
