"""`BertClassifier`: the encoder with the original's classification output layer, on the pooled
output (sequence classification) or on every position (token tagging)."""

import keras

from modeling import bert_config as bert_config_lib
from modeling import encoder as encoder_lib
from modeling import heads
from modeling import task_model

# The original's `run_classifier.create_model` applies dropout with keep_prob 0.9 to the pooled
# output whatever the config's hidden_dropout_prob.
CLASSIFIER_DROPOUT = 0.1


class BertClassifier(task_model.BertTaskModel):
  """Encoder + dropout + `output_weights [num_outputs, H]` / `output_bias` on the pooled output
  (or on every position of the sequence output with `per_token`).

  A sequence classifier's encoder computes its last layer at `[CLS]` alone
  (`BertEncoder(first_position_only=True)`), the only position the pooled output reads.

  The output variables keep the original's root-scope names `output_weights` and `output_bias`,
  so fine-tuned checkpoints load in the original's `run_classifier.py` and back.

  Args:
    config: a `BertConfig` (or its dict).
    num_outputs: classes (classification), labels (multi-label), 1 (regression) or tags.
    per_token: classify every token (NER) instead of the sequence.
    drop_padding: the encoder computes the real tokens alone (`BertEncoder`); the logits are
      the same, but with `per_token` the padding's are the bias alone. Not under XLA.
    intermediate_kernel_transposed: each encoder layer's first feed-forward kernel stored
      transposed (`BertEncoder`); the logits are the same. For exports.
    **kwargs: passed to `keras.Model`.

  Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[batch_size, seq_length]`;
    other keys (labels, `is_real_example`) are ignored.

  Outputs: float32 logits `[batch_size, num_outputs]`, or `[batch_size, seq_length, num_outputs]`
    with `per_token`.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import classifier_model
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> model = classifier_model.BertClassifier(config, num_outputs=2)
    >>> ids = tf.constant([[2, 5, 6, 7, 8, 3, 7, 3]] * 2)  # [batch_size, seq_length]
    >>> logits = model({"input_ids": ids, "input_mask": tf.ones_like(ids),
    ...                 "segment_ids": tf.zeros_like(ids)})
    >>> logits.shape  # [batch_size, num_outputs]
    TensorShape([2, 2])
  """

  def __init__(self, config, num_outputs, per_token=False, drop_padding=False,
               intermediate_kernel_transposed=False, **kwargs):
    if isinstance(config, dict):
      config = bert_config_lib.BertConfig.from_dict(config)

    # === Layers ===
    encoder = encoder_lib.BertEncoder(
        config, drop_padding=drop_padding, first_position_only=not per_token,
        intermediate_kernel_transposed=intermediate_kernel_transposed, name="bert")
    output_layer = heads.OutputProjection(num_outputs, config.hidden_size,
                                          config.initializer_range,
                                          dropout_rate=CLASSIFIER_DROPOUT, name="classifier")

    # === Functional model ===
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
              for name in encoder_lib.ENCODER_INPUTS}
    encoder_outputs = encoder(inputs)
    logits = output_layer(
        encoder_outputs["sequence_output" if per_token else "pooled_output"])
    super().__init__(config, encoder, {"": output_layer}, inputs, logits, **kwargs)

    # === Config ===
    self.num_outputs = num_outputs
    self.per_token = per_token
    self.drop_padding = drop_padding
    self.intermediate_kernel_transposed = intermediate_kernel_transposed
    self.output_layer = output_layer

  def get_config(self):
    return {**super().get_config(), "num_outputs": self.num_outputs, "per_token": self.per_token,
            "drop_padding": self.drop_padding,
            "intermediate_kernel_transposed": self.intermediate_kernel_transposed}
