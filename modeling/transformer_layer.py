"""One post-LayerNorm Transformer layer, as a layer of the original's `transformer_model`."""

import keras
import tensorflow as tf

from modeling import activations
from modeling import attention
from modeling import dropout
from modeling import layer_norm
from modeling import token_rows as token_rows_lib
from modeling import transposed_dense


class TransformerLayer(keras.layers.Layer):
  """Self-attention -> dense -> dropout -> LayerNorm(+input), then feed-forward -> dropout ->
  LayerNorm(+attention output).

  Sub-layers are named after the original scopes (`attention_self` for `attention/self`, ...;
  Keras names cannot hold `/`); `BertEncoder.name_to_variable` maps them to checkpoint names.

  Args:
    hidden_size: width H.
    num_attention_heads: heads A.
    intermediate_size: width of the feed-forward layer.
    hidden_act: a `modeling.activations` name for the feed-forward layer.
    hidden_dropout_prob: dropout on the two sub-layer outputs.
    attention_probs_dropout_prob: dropout on attention probabilities.
    initializer_range: stddev of the truncated-normal kernel initializer.
    intermediate_kernel_transposed: store the feed-forward's first kernel as
      `[intermediate_size, hidden_size]` (`transposed_dense.TransposedDense`), the layout models
      served on AVX2 processors use; its checkpoint name then maps to no variable.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import transformer_layer
    >>> layer = transformer_layer.TransformerLayer(hidden_size=16, num_attention_heads=2,
    ...                                            intermediate_size=32)
    >>> output = layer(tf.zeros([2, 8, 16]), tf.ones([2, 8], tf.int32))  # [2, 8, 16]
  """

  def __init__(self, hidden_size, num_attention_heads, intermediate_size, hidden_act="gelu",
               hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02,
               intermediate_kernel_transposed=False, **kwargs):
    # Keras would round the hidden states to the compute dtype on the way in: under a bfloat16 or
    # mixed policy the residual stream they carry stays float32 (see `call`).
    kwargs["autocast"] = False
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_attention_heads = num_attention_heads
    self.intermediate_size = intermediate_size
    self.hidden_act = hidden_act
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.initializer_range = initializer_range
    self.intermediate_kernel_transposed = intermediate_kernel_transposed

    def dense(units, name, activation=None):
      return keras.layers.Dense(
          units, activation=activation, name=name,
          kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))

    self.self_attention = attention.SelfAttention(
        hidden_size, num_attention_heads, initializer_range, attention_probs_dropout_prob,
        name="attention_self")
    self.attention_output_dense = dense(hidden_size, "attention_output_dense")
    self.attention_dropout = dropout.Dropout(hidden_dropout_prob)
    self.attention_layer_norm = layer_norm.make_layer_norm("attention_output_LayerNorm")
    if intermediate_kernel_transposed:
      self.intermediate_dense = transposed_dense.TransposedDense(
          intermediate_size, name="intermediate_dense",
          kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))
    else:
      self.intermediate_dense = dense(intermediate_size, "intermediate_dense")
    self.activation = activations.get_activation(hidden_act)
    self.training_activation = activations.get_training_activation(hidden_act)
    self.output_dense = dense(hidden_size, "output_dense")
    self.output_dropout = dropout.Dropout(hidden_dropout_prob)
    self.output_layer_norm = layer_norm.make_layer_norm("output_LayerNorm")

  def build(self, input_shape):
    hidden_shape = (None, self.hidden_size)
    self.self_attention.build(hidden_shape)
    self.attention_output_dense.build(hidden_shape)
    self.attention_layer_norm.build(hidden_shape)
    self.intermediate_dense.build(hidden_shape)
    self.output_dense.build((None, self.intermediate_size))
    self.output_layer_norm.build(hidden_shape)
    self.built = True

  def call(self, hidden_states, attention_mask, token_rows=None, training=False,
           first_position_only=False, query_positions=None):
    """Runs the layer.

    The residual stream (each sub-layer's input, added to its output, and the layer norms'
    outputs) is float32 under every policy, as PyTorch's autocast keeps it: only the operands of
    the matrix products, and what runs between them, are in the compute dtype.

    Args:
      hidden_states: float `[batch_size, seq_length, hidden_size]`; or, with `token_rows`,
        `[num_tokens, hidden_size]`, the real tokens' rows alone.
      attention_mask: int `[batch_size, seq_length]`, 1 for real tokens, 0 for padding (the
        original's input mask); or int `[batch_size, seq_length, seq_length]`, which positions
        each position attends to (`attention.PackedAttentionMask`).
      token_rows: None, or int64 `[num_tokens, 1]` (`token_rows.RealTokenRows` of a 2-D
        `attention_mask`): the projections, feed-forward and layer norms run on these rows
        alone. Not under XLA (the number of real tokens is only known when the graph runs).
      training: apply dropout, and run the GELU as its XLA-compiled training form
        (`activations.get_training_activation`).
      first_position_only: compute the output of each sequence's first position (`[CLS]`)
        alone, its query attending to every position: the same values as those rows of the
        whole output, for a model that reads nothing else of the last layer (the pooler). With
        a 2-D `attention_mask`.
      query_positions: None, or int32 `[batch_size, num_queries]`: compute the output at these
        positions of each sequence alone, in this order, each attending to every position it
        may (its row of a 3-D `attention_mask`); for a model that reads nothing else of the
        last layer (pretraining's heads). Without `token_rows`.

    Returns:
      `[batch_size, seq_length, hidden_size]`, `[num_tokens, hidden_size]` with `token_rows`,
      `[batch_size, 1, hidden_size]` with `first_position_only`, or `[batch_size, num_queries,
      hidden_size]` with `query_positions`; float32.
    """
    # 2-D [batch * seq, H] for every dense layer, as the original: a 3-D input makes the matmul a
    # broadcast batch matmul, several times slower on CPU.
    hidden_states = tf.cast(hidden_states, layer_norm.RESIDUAL_DTYPE)
    layer_input = tf.reshape(hidden_states, [-1, self.hidden_size])
    if first_position_only and token_rows is None:
      query_positions = tf.zeros([tf.shape(hidden_states)[0], 1], tf.int32)
    if query_positions is not None:
      query_positions = tf.cast(query_positions, tf.int32)
      query_input = tf.gather(hidden_states, query_positions, batch_dims=1)
      if attention_mask.shape.rank == 3:
        attention_mask = tf.gather(attention_mask, query_positions, batch_dims=1)
      layer_output = self._dense_part(
          layer_input, attention.attention_mask_adder(attention_mask), None, training,
          tf.reshape(query_input, [-1, self.hidden_size]))
      return tf.reshape(layer_output, tf.shape(query_input))
    mask_adder = attention.attention_mask_adder(attention_mask)
    if first_position_only:
      batch_size, seq_length = tf.unstack(tf.shape(attention_mask))
      query_input = token_rows_lib.first_rows(layer_input, token_rows, batch_size, seq_length)
      layer_output = self._dense_part(layer_input, mask_adder, token_rows, training, query_input)
      return layer_output[:, tf.newaxis, :]
    layer_output = self._dense_part(layer_input, mask_adder, token_rows, training)
    if token_rows is None:
      layer_output = tf.reshape(layer_output, tf.shape(hidden_states))
    return layer_output

  def _dense_part(self, layer_input, mask_adder, token_rows, training, query_input=None):
    """The layer on the rows of `layer_input` `[rows, hidden_size]` (every position, or the
    real tokens' with `token_rows`, see `SelfAttention.call`) -> `[rows, hidden_size]`; or, with
    `query_input` `[batch_size * num_queries, hidden_size]`, on those rows alone -> the same
    shape. Inputs and output in the residual stream's float32."""
    context = self.self_attention(
        tf.cast(layer_input, self.compute_dtype), mask_adder, training=training,
        token_rows=token_rows,
        query_states=None if query_input is None else tf.cast(query_input, self.compute_dtype))
    residual = layer_input if query_input is None else query_input
    attention_output = self.attention_dropout(self.attention_output_dense(context),
                                              training=training)
    attention_states = self.attention_layer_norm(
        tf.cast(attention_output, residual.dtype) + residual)
    activation = self.training_activation if training else self.activation
    intermediate = activation(
        self.intermediate_dense(tf.cast(attention_states, self.compute_dtype)))
    layer_output = self.output_dropout(self.output_dense(intermediate), training=training)
    return self.output_layer_norm(tf.cast(layer_output, attention_states.dtype) + attention_states)

  def get_config(self):
    config = super().get_config()
    config.update({
        "hidden_size": self.hidden_size,
        "num_attention_heads": self.num_attention_heads,
        "intermediate_size": self.intermediate_size,
        "hidden_act": self.hidden_act,
        "hidden_dropout_prob": self.hidden_dropout_prob,
        "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
        "initializer_range": self.initializer_range,
        "intermediate_kernel_transposed": self.intermediate_kernel_transposed,
    })
    return config
