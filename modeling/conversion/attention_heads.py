"""The per-head layout of attention weights used by Keras' `MultiHeadAttention`.

The original stores each attention projection as a dense layer over the concatenated heads
(`query/kernel` `[hidden_size, num_heads * size_per_head]`, head-major); Keras'
`MultiHeadAttention` (Model Garden's encoders, TF Hub's exports, keras-hub's `TransformerEncoder`)
stores the same numbers with the heads as an axis of an `EinsumDense`. Converting is a reshape,
so values stay bit-identical both ways.
"""

import numpy as np


def per_head_name(original_name):
  """The name `to_heads` takes of an original variable stored per head (`self/query/kernel` for
  `bert/encoder/layer_0/attention/self/query/kernel`); None for every other variable."""
  _, found, rest = original_name.partition("/attention/")
  return rest if found and not rest.startswith("output/LayerNorm") else None


def to_heads(attention_name, value, num_heads):
  """Reshapes one original attention variable to the per-head layout.

  Args:
    attention_name: the variable's name after `attention/`: `self/{query,key,value}/{kernel,bias}`
      or `output/dense/{kernel,bias}`.
    value: the original array: projection kernels `[hidden_size, hidden_size]`, their biases
      `[hidden_size]`, the output kernel `[hidden_size, hidden_size]` and bias `[hidden_size]`.
    num_heads: number of attention heads.

  Returns:
    projection kernels `[hidden_size, num_heads, size_per_head]`, their biases
    `[num_heads, size_per_head]`, the output kernel `[num_heads, size_per_head, hidden_size]`;
    the output bias unchanged.
  """
  hidden_size = value.shape[-1]
  size_per_head = hidden_size // num_heads
  if attention_name.startswith("self/"):
    return np.reshape(value, value.shape[:-1] + (num_heads, size_per_head))
  if attention_name == "output/dense/kernel":
    return np.reshape(value, (num_heads, size_per_head, hidden_size))
  return value


def from_heads(attention_name, value):
  """Inverse of `to_heads`: the original `[hidden_size, hidden_size]` / `[hidden_size]` array."""
  if attention_name.startswith("self/"):
    return np.reshape(value, value.shape[:-2] + (value.shape[-2] * value.shape[-1],))
  if attention_name == "output/dense/kernel":
    return np.reshape(value, (value.shape[0] * value.shape[1], value.shape[2]))
  return value


def num_heads_of(query_kernel):
  """The number of heads of a per-head query kernel `[hidden_size, num_heads, size_per_head]`."""
  return int(query_kernel.shape[1])
