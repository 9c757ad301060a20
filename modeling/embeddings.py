"""The embedding layer: word + token type + position, then LayerNorm and dropout."""

import keras
import tensorflow as tf

from modeling import dropout
from modeling import layer_norm


class BertEmbeddings(keras.layers.Layer):
  """Sums word, token-type and position embeddings, as the original's `embedding_lookup` +
  `embedding_postprocessor`.

  The position table is sliced to the sequence length, unless position ids are fed (packed
  rows). The original
  looked token types up by a one-hot matmul, which for 0/1 one-hot rows equals the gather used
  here. No scaling of the embeddings.

  Args:
    vocab_size: rows of the word table.
    hidden_size: embedding width H.
    max_position_embeddings: rows of the position table.
    type_vocab_size: rows of the token-type table.
    initializer_range: stddev of the truncated-normal initializer of the three tables.
    dropout_rate: dropout after the LayerNorm.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import embeddings as embeddings_lib
    >>> embeddings = embeddings_lib.BertEmbeddings(vocab_size=100, hidden_size=16,
    ...                                            max_position_embeddings=32, type_vocab_size=2)
    >>> output = embeddings(tf.zeros([2, 8], tf.int32), tf.zeros([2, 8], tf.int32))  # [2, 8, 16]
  """

  def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size,
               initializer_range=0.02, dropout_rate=0.1, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range
    self.dropout_rate = dropout_rate
    self.layer_norm = layer_norm.make_layer_norm(name="LayerNorm")
    # On the layer norm's float32 output: the residual stream, which a compute-dtype dropout
    # would round.
    self.dropout = dropout.Dropout(dropout_rate, dtype=layer_norm.RESIDUAL_DTYPE)

  def build(self, input_shape=None):
    initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
    self.word_embeddings = self.add_weight(
        name="word_embeddings", shape=(self.vocab_size, self.hidden_size),
        initializer=initializer)
    self.token_type_embeddings = self.add_weight(
        name="token_type_embeddings", shape=(self.type_vocab_size, self.hidden_size),
        initializer=initializer)
    self.position_embeddings = self.add_weight(
        name="position_embeddings", shape=(self.max_position_embeddings, self.hidden_size),
        initializer=initializer)
    self.layer_norm.build((None, None, self.hidden_size))
    self.built = True

  def call(self, input_ids, segment_ids, position_ids=None, training=False):
    """Embeds a batch of token ids.

    Args:
      input_ids: int32 `[batch_size, seq_length]` word-piece ids.
      segment_ids: int32 `[batch_size, seq_length]` token-type ids.
      position_ids: None for positions 0 .. seq_length - 1 (the original's); or int32
        `[batch_size, seq_length]`, each token's position (packed rows restart at each instance).
      training: apply dropout.

    Returns:
      float32 `[batch_size, seq_length, hidden_size]`, the layer norm's output (the residual
      stream, `layer_norm.RESIDUAL_DTYPE`, under every policy).
    """
    seq_length = input_ids.shape[1]
    if seq_length is not None and seq_length > self.max_position_embeddings:
      raise ValueError(f"sequence length {seq_length} exceeds max_position_embeddings "
                       f"{self.max_position_embeddings}")
    word = tf.gather(self.word_embeddings, input_ids)
    token_type = tf.gather(self.token_type_embeddings, segment_ids)
    if position_ids is None:
      position = self.position_embeddings[:tf.shape(input_ids)[1]][tf.newaxis]
    else:
      position = tf.gather(self.position_embeddings, position_ids)
    summed = word + token_type + position
    normalized = self.layer_norm(summed)
    return self.dropout(normalized, training=training)

  def get_config(self):
    config = super().get_config()
    config.update({
        "vocab_size": self.vocab_size,
        "hidden_size": self.hidden_size,
        "max_position_embeddings": self.max_position_embeddings,
        "type_vocab_size": self.type_vocab_size,
        "initializer_range": self.initializer_range,
        "dropout_rate": self.dropout_rate,
    })
    return config
