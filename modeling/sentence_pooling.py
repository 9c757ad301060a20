"""One vector per input from the encoder's outputs: `[CLS]`, the mean of real tokens, or the pooler."""

import tensorflow as tf

POOLING_METHODS = ("cls", "mean", "pooled")


def mean_over_tokens(sequence_output, input_mask):
  """Mean of the vectors of real tokens (`[CLS]` and `[SEP]` included, padding excluded).

  Args:
    sequence_output: float `[batch_size, seq_length, hidden_size]`.
    input_mask: int `[batch_size, seq_length]`, 1 for real tokens.

  Returns:
    float32 `[batch_size, hidden_size]`.
  """
  mask = tf.cast(input_mask, tf.float32)[:, :, tf.newaxis]
  total = tf.reduce_sum(tf.cast(sequence_output, tf.float32) * mask, axis=1)
  return total / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)


def pool(encoder_outputs, input_mask, method, layer_indices=(-1,)):
  """Sentence vectors.

  Args:
    encoder_outputs: the dict of `BertEncoder`.
    input_mask: int `[batch_size, seq_length]`.
    method: "cls" (the `[CLS]` vector), "mean" (`mean_over_tokens`) or "pooled" (the pooler's
      dense-tanh `[CLS]` vector, ignoring `layer_indices`).
    layer_indices: encoder layers pooled, their vectors concatenated in this order.

  Returns:
    float32 `[batch_size, hidden_size * len(layer_indices)]` (`[batch_size, hidden_size]` for
    "pooled").
  """
  if method == "pooled":
    return tf.cast(encoder_outputs["pooled_output"], tf.float32)
  layers = [encoder_outputs["encoder_outputs"][index] for index in layer_indices]
  if method == "cls":
    vectors = [tf.cast(layer[:, 0], tf.float32) for layer in layers]
  elif method == "mean":
    vectors = [mean_over_tokens(layer, input_mask) for layer in layers]
  else:
    raise ValueError(f"pooling must be one of {POOLING_METHODS}, got {method!r}")
  return tf.concat(vectors, axis=-1)
