"""The real tokens' rows of a padded batch: find them once, gather them, scatter them back.

An encoder built with `drop_padding` runs its layers on `[num_tokens, hidden_size]`, the real
tokens alone, and lays them out as `[batch_size, seq_length, hidden_size]` only for its outputs.
"""

import keras
import tensorflow as tf


def _holds_every_row(token_rows, num_rows):
  """Whether `token_rows` (`RealTokenRows`, in order) is every row: a batch without padding,
  whose rows are laid out alike both ways and need no gather or scatter."""
  return tf.equal(tf.shape(token_rows, out_type=tf.int64)[0], tf.cast(num_rows, tf.int64))


# The two layouts and each other's gradients. Each passes its input through when `every_row`
# (`_holds_every_row`); the `tf.cond` sits inside the custom gradients that call these, since a
# `tf.cond` around `tf.gather_nd` cannot be differentiated (its branches' gradients are
# IndexedSlices of different specs).
def _held_rows(rows, token_rows, every_row):
  """`[num_rows, hidden_size]` -> `[num_tokens, hidden_size]`, the rows `token_rows` holds."""
  rows = tf.convert_to_tensor(rows)
  return tf.cond(every_row, lambda: rows, lambda: tf.gather_nd(rows, token_rows))


def _placed_rows(token_states, token_rows, every_row, shape):
  """`[num_tokens, hidden_size]` -> `shape` (`[num_rows, hidden_size]`), each state at its row
  of `token_rows`, zeros elsewhere."""
  token_states = tf.convert_to_tensor(token_states)
  return tf.cond(every_row, lambda: token_states,
                 lambda: tf.scatter_nd(token_rows, token_states, shape))


def gather_rows(rows, token_rows):
  """`[num_rows, hidden_size]` -> `[num_tokens, hidden_size]`: the rows of `token_rows` (int64
  `[num_tokens, 1]`, `RealTokenRows`); `rows` itself when that is every row."""

  @tf.custom_gradient
  def gather(rows):
    every_row = _holds_every_row(token_rows, tf.shape(rows)[0])
    return _held_rows(rows, token_rows, every_row), lambda upstream: _placed_rows(
        upstream, token_rows, every_row, tf.shape(rows, tf.int64))

  return gather(rows)


def scatter_rows(token_states, token_rows, num_rows):
  """`[num_tokens, hidden_size]` -> `[num_rows, hidden_size]` (`num_rows` = batch_size *
  seq_length), each state at its row of `token_rows` (int64 `[num_tokens, 1]`), zeros
  elsewhere; `token_states` itself when `token_rows` is every row."""

  @tf.custom_gradient
  def scatter(states):
    every_row = _holds_every_row(token_rows, num_rows)
    placed = _placed_rows(states, token_rows, every_row, [num_rows, states.shape[-1]])
    return placed, lambda upstream: _held_rows(upstream, token_rows, every_row)

  return scatter(token_states)


def source_rows(token_rows, num_rows):
  """int64 `[num_tokens, 1]` (`RealTokenRows`) -> int32 `[num_rows]`: for each row of the padded
  layout, the row of `[num_tokens, ...]` that `spread_rows` copies there: its own where
  `token_rows` holds it, else the last held row before it (the first held row before any)."""
  is_held = tf.scatter_nd(token_rows, tf.ones([tf.shape(token_rows)[0]], tf.int32), [num_rows])
  return tf.maximum(tf.cumsum(is_held) - 1, 0)


def spread_rows(token_states, token_rows, state_rows):
  """`[num_tokens, hidden_size]` -> `[num_rows, hidden_size]` as `scatter_rows`, but the rows
  `token_rows` does not hold get a copy of some token's state instead of zeros: for consumers
  that read nothing from those rows, as attention does from masked keys and dropped queries.

  A gather, which copies whole rows on several threads, where `tf.scatter_nd` adds them one at a
  time into zeros: two to four times faster forward (docs/benchmarks.md). Its gradient is the
  upstream gradient's held rows, `tf.gather_nd` as `scatter_rows`' own: the gather's gradient
  wherever the rows not held get a zero gradient, exactly so for a consumer that reads nothing
  from them.

  Args:
    token_states: `[num_tokens, hidden_size]`.
    token_rows: int64 `[num_tokens, 1]` (`RealTokenRows`).
    state_rows: int32 `[num_rows]`, `source_rows(token_rows, num_rows)`.

  Returns:
    `[num_rows, hidden_size]`: `token_states` itself when `token_rows` is every row, zeros when
    there is no token.
  """

  @tf.custom_gradient
  def spread(states):
    num_rows = tf.shape(state_rows)[0]
    every_row = _holds_every_row(token_rows, num_rows)

    def spread_some():
      return tf.cond(tf.shape(states)[0] > 0, lambda: tf.gather(states, state_rows),
                     lambda: tf.zeros([num_rows, states.shape[-1]], states.dtype))
    return (tf.cond(every_row, lambda: states, spread_some),
            lambda upstream: _held_rows(upstream, token_rows, every_row))

  return spread(token_states)


def first_rows(token_states, token_rows, batch_size, seq_length):
  """`[num_tokens, hidden_size]` -> `[batch_size, hidden_size]`: each sequence's first position
  (its `[CLS]`), the row `source_rows` gives position `b * seq_length`.

  A sequence whose first position is padding gets the state `source_rows` copies there (any, for
  a consumer that drops it; zeros when there is no token), and its gradient goes there.

  Args:
    token_states: `[num_tokens, hidden_size]`.
    token_rows: int64 `[num_tokens, 1]` (`RealTokenRows`).
    batch_size, seq_length: int32 scalars, the padded layout's.

  Returns:
    `[batch_size, hidden_size]`.
  """
  num_tokens = tf.shape(token_rows)[0]
  rows = tf.gather(source_rows(token_rows, batch_size * seq_length),
                   tf.range(batch_size) * seq_length)

  @tf.custom_gradient
  def first(states):
    has_tokens = num_tokens > 0
    width = states.shape[-1]
    selected = tf.cond(has_tokens, lambda: tf.gather(states, rows),
                       lambda: tf.zeros([batch_size, width], states.dtype))

    def gradient(upstream):
      return tf.cond(has_tokens,
                     lambda: tf.scatter_nd(rows[:, tf.newaxis], upstream, tf.shape(states)),
                     lambda: tf.zeros_like(states))
    return selected, gradient

  return first(token_states)


# When training, the rows are rounded up to a multiple of this: the training step's XLA kernels
# (`activations.get_training_activation`, `dropout.Dropout`) compile once per row count, so a
# batch's exact count of real tokens would compile them anew almost every step.
TRAINING_ROW_MULTIPLE = 128


class RealTokenRows(keras.layers.Layer):
  """int `[batch_size, seq_length]` input mask -> int64 `[num_tokens, 1]`, the rows of its real
  tokens in `[batch_size * seq_length]`, in order.

  When training, the first padding rows join them until their number is a multiple of
  `TRAINING_ROW_MULTIPLE` (or every row): a padding row is computed as in the padded batch, and
  no real token attends to it.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import token_rows as token_rows_lib
    >>> token_rows_lib.RealTokenRows()(tf.constant([[1, 1, 0], [1, 0, 0]])).numpy()[:, 0]
    array([0, 1, 3])
  """

  def call(self, input_mask, training=False):
    is_token = tf.not_equal(tf.reshape(input_mask, [-1]), 0)
    if training:
      num_tokens = tf.reduce_sum(tf.cast(is_token, tf.int32))
      num_rows = tf.minimum(-(-num_tokens // TRAINING_ROW_MULTIPLE) * TRAINING_ROW_MULTIPLE,
                            tf.size(is_token))
      padding_rank = tf.cumsum(tf.cast(tf.logical_not(is_token), tf.int32))  # 1, 2, ... at padding
      is_token = tf.logical_or(is_token, padding_rank <= num_rows - num_tokens)
    return tf.where(is_token)


class _RowMover(keras.layers.Layer):
  """A layer that only moves rows, in its input's dtype: Keras would cast a float input to the
  compute dtype, rounding the float32 residual stream under a bfloat16 policy."""

  def __init__(self, **kwargs):
    kwargs["autocast"] = False
    super().__init__(**kwargs)


class GatherTokenRows(_RowMover):
  """`[batch_size, seq_length, hidden_size]` -> `[num_tokens, hidden_size]`, the real tokens'."""

  def call(self, hidden_states, token_rows):
    """Args: hidden_states `[batch_size, seq_length, hidden_size]`; token_rows int64
    `[num_tokens, 1]` (`RealTokenRows`). Returns `[num_tokens, hidden_size]`."""
    return gather_rows(tf.reshape(hidden_states, [-1, hidden_states.shape[-1]]), token_rows)


class ScatterTokenRows(_RowMover):
  """`[num_tokens, hidden_size]` -> `[batch_size, seq_length, hidden_size]`, zeros at the rows
  `token_rows` does not hold."""

  def call(self, token_states, token_rows, input_mask):
    """Args: token_states `[num_tokens, hidden_size]`; token_rows int64 `[num_tokens, 1]`
    (`RealTokenRows`); input_mask int `[batch_size, seq_length]`, for the shape.
    Returns `[batch_size, seq_length, hidden_size]`."""
    batch_size, seq_length = tf.unstack(tf.shape(input_mask))
    rows = scatter_rows(token_states, token_rows, batch_size * seq_length)
    return tf.reshape(rows, [batch_size, seq_length, token_states.shape[-1]])
