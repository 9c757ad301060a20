"""`BertSpanModel`: the encoder with the original `run_squad.py` output layer, a start and an end
logit for every position."""

import keras
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from modeling import encoder as encoder_lib
from modeling import heads
from modeling import task_model

# The original's variable scope of the span weights.
SPAN_SCOPE = "cls/squad"


class BertSpanModel(task_model.BertTaskModel):
  """Encoder + `cls/squad/output_weights [2, H]` / `output_bias [2]` on every position.

  As the original, no dropout is applied before the span layer (the encoder's own dropout still
  is).

  Args:
    config: a `BertConfig` (or its dict).
    intermediate_kernel_transposed: each encoder layer's first feed-forward kernel stored
      transposed (`BertEncoder`); the logits are the same. For exports.
    **kwargs: passed to `keras.Model`.

  Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[batch_size, seq_length]`;
    other keys (`unique_ids`, positions) are ignored.

  Outputs: dict of float32 `start_logits` and `end_logits`, `[batch_size, seq_length]` each.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import span_model
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> model = span_model.BertSpanModel(config)
    >>> ids = tf.constant([[2, 5, 6, 7, 8, 3, 7, 3]] * 2)  # [batch_size, seq_length]
    >>> logits = model({"input_ids": ids, "input_mask": tf.ones_like(ids),
    ...                 "segment_ids": tf.zeros_like(ids)})
    >>> logits["start_logits"].shape  # [batch_size, seq_length]
    TensorShape([2, 8])
  """

  def __init__(self, config, intermediate_kernel_transposed=False, **kwargs):
    if isinstance(config, dict):
      config = bert_config_lib.BertConfig.from_dict(config)

    # === Layers ===
    encoder = encoder_lib.BertEncoder(
        config, intermediate_kernel_transposed=intermediate_kernel_transposed, name="bert")
    span_layer = heads.OutputProjection(2, config.hidden_size, config.initializer_range,
                                        name="span")

    # === Functional model ===
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
              for name in encoder_lib.ENCODER_INPUTS}
    logits = span_layer(encoder(inputs)["sequence_output"])
    start_logits, end_logits = keras.layers.Lambda(
        lambda x: tf.unstack(x, num=2, axis=-1), name="split_start_end")(logits)
    super().__init__(config, encoder, {SPAN_SCOPE: span_layer}, inputs,
                     {"start_logits": start_logits, "end_logits": end_logits}, **kwargs)

    # === Config ===
    self.span_layer = span_layer
    self.intermediate_kernel_transposed = intermediate_kernel_transposed

  def get_config(self):
    return {**super().get_config(),
            "intermediate_kernel_transposed": self.intermediate_kernel_transposed}
