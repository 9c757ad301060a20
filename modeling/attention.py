"""Multi-head self-attention as the original's `attention_layer`."""

import math

import keras
import tensorflow as tf

from modeling import dropout
from modeling import token_rows as token_rows_lib

# The original adds this to the scores of masked positions; it stays finite in float16.
MASK_ADDER = -10000.0


def attention_mask_adder(attention_mask, dtype=tf.float32):
  """Turns an attention mask into the additive mask of the attention scores.

  A padding mask `[batch_size, seq_length]` masks, as the original's
  `create_attention_mask_from_input_mask`, only the attended-to ("to") positions: every query
  position, padding included, attends to the real tokens. A mask `[batch_size, seq_length,
  seq_length]` (`packed_attention_mask`) says for each query ("from") position which positions
  it attends to.

  Args:
    attention_mask: int `[batch_size, seq_length]`, 1 for real tokens and 0 for padding; or int
      `[batch_size, from_length, to_length]`, 1 where the "from" position attends to the "to" one.
    dtype: dtype of the result.

  Returns:
    `[batch_size, 1, 1, seq_length]` or `[batch_size, 1, from_length, to_length]`: 0 where
    attended to, -10000 elsewhere.
  """
  mask = tf.cast(attention_mask, dtype)
  if mask.shape.rank == 2:
    mask = mask[:, tf.newaxis, :]
  return (1.0 - mask[:, tf.newaxis]) * MASK_ADDER


class PackedAttentionMask(keras.layers.Layer):
  """The block-diagonal attention mask of packed rows: a token attends only to the tokens of its
  own instance, so instances sharing a row do not see each other (no cross-contamination).

  Example:
    >>> import tensorflow as tf
    >>> from modeling import attention as attention_lib
    >>> attention_lib.PackedAttentionMask()(tf.constant([[1, 1, 2, 0]])).numpy()[0]
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [0, 0, 1, 0],
           [0, 0, 0, 0]], dtype=int32)
  """

  def call(self, instance_ids):
    """int `[batch_size, seq_length]` (1, 2, ... per instance, 0 at padding) -> int32
    `[batch_size, seq_length, seq_length]`, 1 where both positions hold the same instance."""
    instance_ids = tf.cast(instance_ids, tf.int32)
    same_instance = tf.equal(instance_ids[:, :, tf.newaxis], instance_ids[:, tf.newaxis, :])
    is_token = tf.not_equal(instance_ids, 0)[:, tf.newaxis, :]
    return tf.cast(tf.logical_and(same_instance, is_token), tf.int32)


class SelfAttention(keras.layers.Layer):
  """Scaled dot-product self-attention with separate query, key and value projections.

  Scores are `query . key / sqrt(head_size)` plus the mask adder; scores and softmax run in the
  compute dtype; dropout applies to the probabilities.

  Args:
    hidden_size: input and output width H.
    num_attention_heads: number of heads A; `H / A` is the head size.
    initializer_range: stddev of the truncated-normal kernel initializer.
    dropout_rate: dropout on attention probabilities.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import attention as attention_lib
    >>> attention = attention_lib.SelfAttention(hidden_size=16, num_attention_heads=2)
    >>> mask_adder = attention_lib.attention_mask_adder(tf.ones([2, 8]))  # [2, 1, 1, 8]
    >>> context = attention(tf.zeros([2 * 8, 16]), mask_adder)
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
    self.dropout = dropout.Dropout(dropout_rate)

  def build(self, input_shape):
    for projection in (self.query, self.key, self.value):
      projection.build(input_shape)
    self.built = True

  def call(self, hidden_states, mask_adder, training=False, token_rows=None, query_states=None):
    """Attends every position of `hidden_states` (or `query_states`) to every unmasked position.

    Args:
      hidden_states: float `[batch_size * seq_length, hidden_size]`, flattened to 2-D as the
        original keeps it (a 2-D matmul is several times faster than a broadcast 3-D one on CPU);
        with `token_rows`, `[num_tokens, hidden_size]`, the real tokens' rows alone.
      mask_adder: float `[batch_size, 1, 1 or seq_length, seq_length]` from
        `attention_mask_adder` (`[batch_size, 1, num_queries, seq_length]` with per-query
        masks and `query_states`).
      training: apply dropout.
      token_rows: None, or int64 `[num_tokens, 1]`, the row of each row of `hidden_states` in
        `[batch_size * seq_length]` (`token_rows.RealTokenRows`): the projections run on the
        real tokens alone, and the scores between them with copies of their rows, masked, in
        the padding's place (`token_rows.spread_rows`).
      query_states: None to attend from every row of `hidden_states`; or `[batch_size *
        num_queries, hidden_size]`, the same number of queries per sequence (the states of the
        positions a `TransformerLayer` computes alone: the first, or those it is given), each
        attending to every position.

    Returns:
      context `[batch_size * seq_length, hidden_size]` (heads concatenated, before the output
      projection), `[num_tokens, hidden_size]` with `token_rows`, or `[batch_size *
      num_queries, hidden_size]` with `query_states`.
    """
    batch_size = tf.shape(mask_adder)[0]
    seq_length = tf.shape(mask_adder)[3]

    if token_rows is not None:
      state_rows = token_rows_lib.source_rows(token_rows, batch_size * seq_length)

    def padded(rows):
      """`[num_tokens, H]` -> `[batch_size * seq_length, H]`. At padding, whatever `spread_rows`
      copies there: a masked key and value, a query whose context is dropped."""
      if token_rows is None:
        return rows
      return token_rows_lib.spread_rows(rows, token_rows, state_rows)

    def split_heads(tensor, length=seq_length):
      """`[batch_size * length, H]` -> `[batch_size, A, length, H / A]`."""
      return tf.transpose(
          tf.reshape(tensor, [batch_size, length, self.num_attention_heads, self.head_size]),
          [0, 2, 1, 3])

    # Heads moved ahead of positions and two batched matmuls, as the original's
    # `transpose_for_scores`: with oneDNN on, the pretraining step at the Base shape is faster
    # than with the same contractions written as one `einsum` each (docs/benchmarks.md).
    if query_states is None:
      query = split_heads(padded(self.query(hidden_states)))
    else:
      # max: an empty batch (a served request without text) has no queries.
      query = split_heads(self.query(query_states),
                          length=tf.shape(query_states)[0] // tf.maximum(batch_size, 1))
    key = split_heads(padded(self.key(hidden_states)))
    value = split_heads(padded(self.value(hidden_states)))
    # Scaled, masked and normalised in the compute dtype, so that oneDNN fuses the scale and the
    # mask into the scores' product; its bfloat16 softmax sums in float32 and rounds once, the
    # same probabilities as a float32 softmax cast back, without the float32 copies
    # (docs/benchmarks.md).
    scores = tf.matmul(query, key, transpose_b=True) * (1.0 / math.sqrt(self.head_size))
    scores += tf.cast(mask_adder, scores.dtype)
    probabilities = tf.nn.softmax(scores, axis=-1)
    probabilities = self.dropout(probabilities, training=training)
    context = tf.transpose(tf.matmul(probabilities, value), [0, 2, 1, 3])
    context = tf.reshape(context, [-1, self.hidden_size])
    if token_rows is None or query_states is not None:
      return context
    return token_rows_lib.gather_rows(context, token_rows)

  def get_config(self):
    config = super().get_config()
    config.update({
        "hidden_size": self.hidden_size,
        "num_attention_heads": self.num_attention_heads,
        "initializer_range": self.initializer_range,
        "dropout_rate": self.dropout_rate,
    })
    return config
