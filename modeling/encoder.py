"""`BertEncoder`: the original's `BertModel` as a Keras functional model."""

import functools

import keras
import tensorflow as tf

from modeling import attention
from modeling import bert_config as bert_config_lib
from modeling import config_model
from modeling import embeddings as embeddings_lib
from modeling import token_rows as token_rows_lib
from modeling import transformer_layer
from modeling import variable_names

# The original's variable scopes under `bert/embeddings/` of the embedding tables.
EMBEDDING_TABLES = ("word_embeddings", "token_type_embeddings", "position_embeddings")

# The original's scope under `bert/encoder/layer_N/` -> the `TransformerLayer` sub-layer holding
# its variables (a Dense, or a LayerNorm for scopes ending in LayerNorm).
TRANSFORMER_LAYER_SCOPES = (
    ("attention/self/query", "self_attention.query"),
    ("attention/self/key", "self_attention.key"),
    ("attention/self/value", "self_attention.value"),
    ("attention/output/dense", "attention_output_dense"),
    ("attention/output/LayerNorm", "attention_layer_norm"),
    ("intermediate/dense", "intermediate_dense"),
    ("output/dense", "output_dense"),
    ("output/LayerNorm", "output_layer_norm"),
)

# The encoder's inputs, in the original's names.
ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")
# What a packed encoder also takes (`tasks.pretraining.features.packed_pretraining_feature_spec`).
PACKED_ENCODER_INPUTS = ENCODER_INPUTS + ("position_ids", "instance_ids")
# What an encoder whose last layer computes given positions alone also takes.
LAST_LAYER_POSITIONS = "last_layer_positions"


class Pooler(keras.layers.Layer):
  """Dense + tanh on the first (`[CLS]`) token, as the original's `bert/pooler`.

  Args:
    hidden_size: width H.
    initializer_range: stddev of the truncated-normal kernel initializer.
  """

  def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.initializer_range = initializer_range
    self.dense = keras.layers.Dense(
        hidden_size, activation="tanh", name="dense",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))

  def build(self, input_shape):
    self.dense.build((None, self.hidden_size))
    self.built = True

  def call(self, sequence_output, cls_positions=None):
    """Pools the `[CLS]` token(s).

    Args:
      sequence_output: `[batch_size, seq_length, hidden_size]`.
      cls_positions: None to pool position 0 (the original); or int32 `[batch_size,
        num_sequences]`, the `[CLS]` position of each instance of a packed row.

    Returns:
      `[batch_size, hidden_size]`, or `[batch_size, num_sequences, hidden_size]` with
      `cls_positions`.
    """
    if cls_positions is None:
      return self.dense(sequence_output[:, 0, :])
    return self.dense(tf.gather(sequence_output, cls_positions, batch_dims=1))

  def get_config(self):
    config = super().get_config()
    config.update({"hidden_size": self.hidden_size, "initializer_range": self.initializer_range})
    return config


class BertEncoder(config_model.BertConfigModel):
  """The BERT encoder: embeddings, `num_hidden_layers` Transformer layers, pooler.

  Inputs carry the original names; every output the original's `BertModel` exposes is returned.
  LayerNorm runs in float32 under a mixed-precision policy, the attention softmax in the compute
  dtype; the model also runs under `jit_compile=True`.

  Args:
    config: a `BertConfig`.
    packed: take packed rows, several instances per row (`create_pretraining_data.py
      --pack_sequences`): positions restart and attention stays within each instance. The
      variables are the same either way.
    drop_padding: run the layers on the real tokens alone (`token_rows`, `TransformerLayer`):
      `sequence_output` and `encoder_outputs` hold zeros at padding (when training, but at the
      few padding rows that round the rows up, `token_rows.RealTokenRows`), every other value is
      the same; not with `packed`. Not under XLA (the number of real tokens is only known when
      the graph runs): for exports, and for training outside XLA, where padded batches take
      fewer operations (docs/benchmarks.md).
    first_position_only: the last layer computes the first position (`[CLS]`) alone, for a
      model that reads only `pooled_output`: `sequence_output` and the last of `encoder_outputs`
      are `[batch_size, 1, hidden_size]`, every value the same as the whole layer's (the last
      layer's query, output projection and feed-forward on one row a sequence); not with
      `packed`.
    last_layer_positions: the last layer computes the positions of the input
      `last_layer_positions` alone, for a model that reads only those (pretraining's heads):
      `sequence_output` and the last of `encoder_outputs` are `[batch_size, num_positions,
      hidden_size]`, in that input's order, every value the same as the whole layer's at those
      positions; `pooled_output` pools the first of them. Not with `drop_padding` or
      `first_position_only`.
    intermediate_kernel_transposed: store each layer's first feed-forward kernel
      `[intermediate_size, hidden_size]` (`transposed_dense`), faster for inference on a few
      hundred rows on an AVX2 processor; such a model gets its weights by `rebuilt` from one in
      the checkpoint layout, and has no `name_to_variable`. For exports.
    **kwargs: passed to `keras.Model` (e.g. `name`).

  Inputs (dict):
    input_ids: int32 `[batch_size, seq_length]`.
    input_mask: int32 `[batch_size, seq_length]`, 1 for real tokens, 0 for padding.
    segment_ids: int32 `[batch_size, seq_length]`.
    position_ids, instance_ids: int32 `[batch_size, seq_length]`, only when `packed` (see
      `tasks.pretraining.features.packed_pretraining_feature_spec`).
    last_layer_positions: int32 `[batch_size, num_positions]`, only with
      `last_layer_positions`.

  Outputs (dict):
    sequence_output: `[batch_size, seq_length, hidden_size]`, the last layer.
    pooled_output: `[batch_size, hidden_size]`; not when `packed` (a row has a `[CLS]` per
      instance: `pooler(sequence_output, cls_positions)` pools them).
    encoder_outputs: list of `num_hidden_layers` tensors `[batch_size, seq_length, hidden_size]`,
      every layer's output (the original's `get_all_encoder_layers()`).
    embedding_output: `[batch_size, seq_length, hidden_size]`.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import encoder as encoder_lib
    >>> config = bert_config_lib.BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> encoder = encoder_lib.BertEncoder(config)
    >>> ids = tf.constant([[2, 5, 6, 7, 8, 3, 7, 3]] * 2)  # [batch_size, seq_length]
    >>> outputs = encoder({"input_ids": ids, "input_mask": tf.ones_like(ids),
    ...                    "segment_ids": tf.zeros_like(ids)})
    >>> outputs["sequence_output"].shape  # [batch_size, seq_length, hidden_size]
    TensorShape([2, 8, 16])
    >>> outputs["pooled_output"].shape  # [batch_size, hidden_size]
    TensorShape([2, 16])
  """

  def __init__(self, config, packed=False, drop_padding=False, first_position_only=False,
               last_layer_positions=False, intermediate_kernel_transposed=False, **kwargs):
    if isinstance(config, dict):
      config = bert_config_lib.BertConfig.from_dict(config)
    if packed and (drop_padding or first_position_only):
      raise ValueError("drop_padding and first_position_only take a padding mask; packed rows "
                       "have none")
    if last_layer_positions and (drop_padding or first_position_only):
      raise ValueError("last_layer_positions takes every position's rows: not with "
                       "drop_padding or first_position_only")

    # === Layers ===
    embeddings = embeddings_lib.BertEmbeddings(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        initializer_range=config.initializer_range,
        dropout_rate=config.hidden_dropout_prob,
        name="embeddings")
    layers = [
        transformer_layer.TransformerLayer(
            hidden_size=config.hidden_size,
            num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
            hidden_act=config.hidden_act,
            hidden_dropout_prob=config.hidden_dropout_prob,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            initializer_range=config.initializer_range,
            intermediate_kernel_transposed=intermediate_kernel_transposed,
            name=f"layer_{index}")
        for index in range(config.num_hidden_layers)
    ]
    pooler = Pooler(config.hidden_size, config.initializer_range, name="pooler")

    # === Functional model ===
    input_names = (PACKED_ENCODER_INPUTS if packed else ENCODER_INPUTS) + (
        (LAST_LAYER_POSITIONS,) if last_layer_positions else ())
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in input_names}
    if packed:
      embedding_output = embeddings(inputs["input_ids"], inputs["segment_ids"],
                                    position_ids=inputs["position_ids"])
      attention_mask = attention.PackedAttentionMask(name="packed_attention_mask")(
          inputs["instance_ids"])
    else:
      embedding_output = embeddings(inputs["input_ids"], inputs["segment_ids"])
      attention_mask = inputs["input_mask"]
    if drop_padding:
      # The real tokens' rows are found once; the layers pass them on packed as
      # `[num_tokens, hidden_size]`, laid out with padding only for the outputs.
      token_rows = token_rows_lib.RealTokenRows(name="real_token_rows")(attention_mask)
      scatter = token_rows_lib.ScatterTokenRows(name="scatter_token_rows")
      token_states = token_rows_lib.GatherTokenRows(name="gather_token_rows")(embedding_output,
                                                                              token_rows)
      encoder_outputs = []
      for layer in layers[:-1] if first_position_only else layers:
        token_states = layer(token_states, attention_mask, token_rows)
        encoder_outputs.append(scatter(token_states, token_rows, attention_mask))
      if first_position_only:
        encoder_outputs.append(layers[-1](token_states, attention_mask, token_rows,
                                          first_position_only=True))
    else:
      hidden_states = embedding_output
      encoder_outputs = []
      for index, layer in enumerate(layers):
        is_last = index == len(layers) - 1
        hidden_states = layer(
            hidden_states, attention_mask, first_position_only=first_position_only and is_last,
            query_positions=inputs[LAST_LAYER_POSITIONS] if last_layer_positions and is_last
            else None)
        encoder_outputs.append(hidden_states)
    sequence_output = encoder_outputs[-1]
    outputs = {
        "sequence_output": sequence_output,
        "encoder_outputs": encoder_outputs,
        "embedding_output": embedding_output,
    }
    if not packed:
      outputs["pooled_output"] = pooler(sequence_output)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # === Config ===
    self.config = config
    self.packed = packed
    self.drop_padding = drop_padding
    self.first_position_only = first_position_only
    self.last_layer_positions = last_layer_positions
    self.intermediate_kernel_transposed = intermediate_kernel_transposed
    self.embeddings = embeddings
    self.transformer_layers = layers
    self.pooler = pooler

  def get_config(self):
    config = super().get_config()
    if self.packed:
      config["packed"] = True
    if self.drop_padding:
      config["drop_padding"] = True
    if self.first_position_only:
      config["first_position_only"] = True
    if self.last_layer_positions:
      config["last_layer_positions"] = True
    if self.intermediate_kernel_transposed:
      config["intermediate_kernel_transposed"] = True
    return config

  def get_embedding_table(self):
    """The word-embedding variable `[vocab_size, hidden_size]` (tied to the masked-LM output)."""
    return self.embeddings.word_embeddings

  def name_to_variable(self, scope="bert"):
    """Returns {original checkpoint name: variable}, e.g. `bert/embeddings/word_embeddings`.

    Raises:
      ValueError: the model stores kernels transposed (`intermediate_kernel_transposed`).
    """
    if self.intermediate_kernel_transposed:
      raise ValueError("an encoder with intermediate_kernel_transposed does not hold the "
                       "checkpoint layout: read and write checkpoints with the model it was "
                       "rebuilt from")
    names = {f"{scope}/embeddings/{name}": getattr(self.embeddings, name)
             for name in EMBEDDING_TABLES}
    names.update(variable_names.layer_norm_variables(f"{scope}/embeddings/LayerNorm",
                                                     self.embeddings.layer_norm))
    for index, layer in enumerate(self.transformer_layers):
      for original_scope, sublayer_path in TRANSFORMER_LAYER_SCOPES:
        sublayer = functools.reduce(getattr, sublayer_path.split("."), layer)
        variables_of = (variable_names.layer_norm_variables if original_scope.endswith("LayerNorm")
                        else variable_names.dense_variables)
        names.update(variables_of(f"{scope}/encoder/layer_{index}/{original_scope}", sublayer))
    names.update(variable_names.dense_variables(f"{scope}/pooler/dense", self.pooler.dense))
    return names
