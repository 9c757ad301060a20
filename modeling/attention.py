"""Multi-head self-attention as the original's `attention_layer`."""

import math

import keras
import tensorflow as tf

# The original adds this to the scores of masked positions; it stays finite in float16.
MASK_ADDER = -10000.0


def attention_mask_adder(input_mask, dtype=tf.float32):
  """Turns a padding mask into the additive mask of the attention scores.

  As the original's `create_attention_mask_from_input_mask`, only the attended-to ("to") positions
  are masked; every query position, padding included, attends to the real tokens.

  Args:
    input_mask: int `[batch_size, seq_length]`, 1 for real tokens and 0 for padding.
    dtype: dtype of the result.

  Returns:
    `[batch_size, 1, 1, seq_length]`: 0 for real tokens, -10000 for padding.
  """
  mask = tf.cast(input_mask, dtype)[:, tf.newaxis, tf.newaxis, :]
  return (1.0 - mask) * MASK_ADDER


class SelfAttention(keras.layers.Layer):
  """Scaled dot-product self-attention with separate query, key and value projections.

  Scores are `query . key / sqrt(head_size)` plus the mask adder; the softmax runs in float32
  whatever the compute dtype; dropout applies to the probabilities.

  Args:
    hidden_size: input and output width H.
    num_attention_heads: number of heads A; `H / A` is the head size.
    initializer_range: stddev of the truncated-normal kernel initializer.
    dropout_rate: dropout on attention probabilities.

  Example:
    >>> attention = SelfAttention(hidden_size=16, num_attention_heads=2)
    >>> context = attention(tf.zeros([2 * 8, 16]), attention_mask_adder(tf.ones([2, 8])))
  """

  def __init__(self, hidden_size, num_attention_heads, initializer_range=0.02, dropout_rate=0.1,
               **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_attention_heads = num_attention_heads
    self.head_size = hidden_size // num_attention_heads
    self.initializer_range = initializer_range
    self.dropout_rate = dropout_rate

    def projection(name):
      return keras.layers.Dense(
          hidden_size, name=name,
          kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))

    self.query = projection("query")
    self.key = projection("key")
    self.value = projection("value")
    self.dropout = keras.layers.Dropout(dropout_rate)

  def build(self, input_shape):
    for projection in (self.query, self.key, self.value):
      projection.build(input_shape)
    self.built = True

  def call(self, hidden_states, mask_adder, training=False):
    """Attends every position of `hidden_states` to every unmasked position.

    Args:
      hidden_states: float `[batch_size * seq_length, hidden_size]`, flattened to 2-D as the
        original keeps it (a 2-D matmul is several times faster than a broadcast 3-D one on CPU).
      mask_adder: float `[batch_size, 1, 1, seq_length]` from `attention_mask_adder`.
      training: apply dropout.

    Returns:
      context `[batch_size * seq_length, hidden_size]` (heads concatenated, before the output
      projection).
    """
    batch_size = tf.shape(mask_adder)[0]
    seq_length = tf.shape(mask_adder)[3]

    def split_heads(tensor):
      """`[batch_size * seq_length, H]` -> `[batch_size, A, seq_length, H / A]`."""
      return tf.transpose(
          tf.reshape(tensor, [batch_size, seq_length, self.num_attention_heads, self.head_size]),
          [0, 2, 1, 3])

    # Heads moved ahead of positions and two batched matmuls, as the original's
    # `transpose_for_scores`: with oneDNN on, the pretraining step at the Base shape is 0-6%
    # faster than with the same contractions written as one `einsum` each (README, Model step).
    query = split_heads(self.query(hidden_states))
    key = split_heads(self.key(hidden_states))
    value = split_heads(self.value(hidden_states))
    scores = tf.matmul(query, key, transpose_b=True)
    scores = tf.cast(scores, tf.float32) * (1.0 / math.sqrt(self.head_size))
    scores += tf.cast(mask_adder, tf.float32)
    probabilities = tf.cast(tf.nn.softmax(scores, axis=-1), self.compute_dtype)
    probabilities = self.dropout(probabilities, training=training)
    context = tf.transpose(tf.matmul(probabilities, value), [0, 2, 1, 3])
    return tf.reshape(context, [-1, self.hidden_size])

  def get_config(self):
    config = super().get_config()
    config.update({
        "hidden_size": self.hidden_size,
        "num_attention_heads": self.num_attention_heads,
        "initializer_range": self.initializer_range,
        "dropout_rate": self.dropout_rate,
    })
    return config
