"""Output heads: masked-LM, and the `[out, in]` output projections of the other tasks.

The original's task heads store their weights as `output_weights` `[num_outputs, hidden_size]`
(used with `transpose_b=True`) and `output_bias` `[num_outputs]`: next-sentence
(`cls/seq_relationship`), classification (root scope), SQuAD spans (`cls/squad`). `OutputProjection`
is that layer, so its variables map one to one onto those checkpoint names.
"""

import keras
import tensorflow as tf

from modeling import activations
from modeling import dropout
from modeling import layer_norm
from modeling import variable_names


class MaskedLMHead(keras.layers.Layer):
  """Gathers the masked positions, transforms them, and scores them against the word embeddings.

  `dense(hidden_act) -> LayerNorm -> matmul(word_embeddings^T) + output_bias`, as the original's
  `get_masked_lm_output`; the output matrix is tied to the encoder's embedding table.

  Args:
    embeddings: the encoder's `BertEmbeddings` layer, whose `word_embeddings` `[vocab_size, H]`
      is the tied output matrix.
    hidden_act: a `modeling.activations` name for the transform.
    initializer_range: stddev of the truncated-normal kernel initializer.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import encoder as encoder_lib
    >>> from modeling import heads
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> encoder = encoder_lib.BertEncoder(config)
    >>> ids = tf.constant([[2, 5, 6, 7, 8, 3, 7, 3]] * 2)  # [batch_size, seq_length]
    >>> sequence_output = encoder({"input_ids": ids, "input_mask": tf.ones_like(ids),
    ...                            "segment_ids": tf.zeros_like(ids)})["sequence_output"]
    >>> head = heads.MaskedLMHead(encoder.embeddings, hidden_act="gelu")
    >>> head(sequence_output, tf.constant([[1, 2], [3, 4]])).shape  # [batch, predictions, vocab]
    TensorShape([2, 2, 9])
  """

  def __init__(self, embeddings, hidden_act="gelu", initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.embeddings = embeddings
    self.hidden_act = hidden_act
    self.initializer_range = initializer_range
    self.transform_dense = keras.layers.Dense(
        embeddings.hidden_size, activation=activations.get_activation(hidden_act),
        name="transform_dense",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))
    self.transform_layer_norm = layer_norm.make_layer_norm("transform_LayerNorm")

  def build(self, input_shape=None):
    hidden_size = self.embeddings.hidden_size
    self.transform_dense.build((None, hidden_size))
    self.transform_layer_norm.build((None, hidden_size))
    self.output_bias = self.add_weight(name="output_bias", shape=(self.embeddings.vocab_size,),
                                       initializer="zeros")
    self.built = True

  def call(self, sequence_output, masked_lm_positions):
    """Scores the vocabulary at the masked positions.

    Args:
      sequence_output: float `[batch_size, seq_length, hidden_size]`.
      masked_lm_positions: int32 `[batch_size, num_predictions]` positions in the sequence.

    Returns:
      float32 logits `[batch_size, num_predictions, vocab_size]`.
    """
    hidden_size = self.embeddings.hidden_size
    gathered = tf.gather(sequence_output, masked_lm_positions, batch_dims=1)
    # 2-D [batch * predictions, H] matmuls: a broadcast 3-D matmul against the [V, H] table is
    # several times slower on CPU.
    transformed = self.transform_layer_norm(
        self.transform_dense(tf.reshape(gathered, [-1, hidden_size])))
    table = tf.cast(self.embeddings.word_embeddings, self.compute_dtype)
    logits = tf.matmul(tf.cast(transformed, self.compute_dtype), table, transpose_b=True)
    logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
    # The vocabulary size, not -1: an empty batch has no elements to infer it from.
    return tf.reshape(logits, tf.concat([tf.shape(masked_lm_positions),
                                         [self.embeddings.vocab_size]], axis=0))

  def name_to_variable(self, scope="cls/predictions"):
    names = variable_names.dense_variables(f"{scope}/transform/dense", self.transform_dense)
    names.update(variable_names.layer_norm_variables(f"{scope}/transform/LayerNorm",
                                                     self.transform_layer_norm))
    names[f"{scope}/output_bias"] = self.output_bias
    return names

  def get_config(self):
    config = super().get_config()
    config.update({"hidden_act": self.hidden_act, "initializer_range": self.initializer_range})
    return config


class OutputProjection(keras.layers.Layer):
  """`logits = inputs . output_weights^T + output_bias`, with optional dropout on the inputs.

  Works on any rank: pooled `[batch_size, H]` -> `[batch_size, num_outputs]` (classification,
  next sentence), sequence `[batch_size, seq_length, H]` -> `[batch_size, seq_length, num_outputs]`
  (SQuAD spans, token tagging).

  Args:
    num_outputs: number of logits per input vector.
    hidden_size: input width H.
    initializer_range: stddev of the truncated-normal initializer of `output_weights`.
    dropout_rate: dropout on the inputs while training (the classifier's 0.1; 0 for the others).
    train_bias: whether training updates `output_bias`. False where the loss cannot depend on it
      (multiple choice: every choice's score gets the same bias, and a softmax ignores a shift
      common to all its logits), so that float32 rounding, which Adam's step normalisation turns
      into full-size updates, does not move every score by the same noise.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import heads
    >>> next_sentence = heads.OutputProjection(2, hidden_size=768)
    >>> next_sentence(tf.zeros([4, 768])).shape  # [batch_size, 2]
    TensorShape([4, 2])
  """

  def __init__(self, num_outputs, hidden_size, initializer_range=0.02, dropout_rate=0.0,
               train_bias=True, **kwargs):
    super().__init__(**kwargs)
    self.num_outputs = num_outputs
    self.hidden_size = hidden_size
    self.initializer_range = initializer_range
    self.dropout_rate = dropout_rate
    self.train_bias = train_bias
    self.dropout = dropout.Dropout(dropout_rate)

  def build(self, input_shape=None):
    self.output_weights = self.add_weight(
        name="output_weights", shape=(self.num_outputs, self.hidden_size),
        initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range))
    self.output_bias = self.add_weight(name="output_bias", shape=(self.num_outputs,),
                                       initializer="zeros", trainable=self.train_bias)
    self.built = True

  def call(self, inputs, training=False):
    """`[..., hidden_size]` -> float32 logits `[..., num_outputs]`."""
    inputs = self.dropout(inputs, training=training)
    weights = tf.cast(self.output_weights, self.compute_dtype)
    flat_inputs = tf.reshape(tf.cast(inputs, self.compute_dtype), [-1, self.hidden_size])
    logits = tf.matmul(flat_inputs, weights, transpose_b=True)
    logits = tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)
    return tf.reshape(logits, tf.concat([tf.shape(inputs)[:-1], [self.num_outputs]], axis=0))

  def name_to_variable(self, scope):
    """`{scope/output_weights, scope/output_bias}`; an empty scope gives the root-scope names."""
    prefix = f"{scope}/" if scope else ""
    return {f"{prefix}output_weights": self.output_weights,
            f"{prefix}output_bias": self.output_bias}

  def get_config(self):
    config = super().get_config()
    config.update({
        "num_outputs": self.num_outputs,
        "hidden_size": self.hidden_size,
        "initializer_range": self.initializer_range,
        "dropout_rate": self.dropout_rate,
        "train_bias": self.train_bias,
    })
    return config
