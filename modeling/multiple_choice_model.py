"""`BertMultipleChoice`: the encoder scoring each (context, choice) pair with one learned vector;
a softmax over an example's scores picks the choice (the BERT paper's SWAG setup)."""

import keras
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from modeling import classifier_model
from modeling import encoder as encoder_lib
from modeling import heads
from modeling import task_model

# Checkpoint scope of the scoring vector, beside the original's `cls/squad`, `cls/predictions`.
MULTIPLE_CHOICE_SCOPE = "cls/multiple_choice"


def _fold_choices(ids):
  """`[batch_size, num_choices, seq_length]` -> `[batch_size * num_choices, seq_length]`."""
  return tf.reshape(ids, [-1, tf.shape(ids)[-1]])


def _unfold_scores(args):
  """Scores `[batch_size * num_choices, 1]` -> `[batch_size, num_choices]` (shape from ids)."""
  scores, ids = args
  return tf.reshape(scores, tf.shape(ids)[:2])


class BertMultipleChoice(task_model.BertTaskModel):
  """Encoder + dropout + `cls/multiple_choice/output_weights [1, H]` / `output_bias [1]` on the
  pooled output of every pair.

  Every choice of an example is encoded as its own `[CLS] context [SEP] choice [SEP]` sequence
  (the batch and choice dimensions are folded into one for the encoder); the score of a choice is
  `pooled . output_weights^T + output_bias`. Dropout 0.1 on the pooled output, as the classifier.
  Training leaves `output_bias` as initialised or loaded: it shifts every choice's score alike, so
  the softmax's loss gives it no gradient but float32 rounding. The encoder computes its last
  layer at `[CLS]` alone (`BertEncoder(first_position_only=True)`).

  Args:
    config: a `BertConfig` (or its dict).
    drop_padding: the encoder computes the real tokens alone (`BertEncoder`); the scores are the
      same. Not under XLA.
    intermediate_kernel_transposed: each encoder layer's first feed-forward kernel stored
      transposed (`BertEncoder`); the scores are the same. For exports.
    **kwargs: passed to `keras.Model`.

  Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32
    `[batch_size, num_choices, seq_length]` (any number of choices); other keys (`label_ids`,
    `is_real_example`) are ignored.

  Outputs: float32 scores (logits of the softmax over choices) `[batch_size, num_choices]`.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import multiple_choice_model
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> model = multiple_choice_model.BertMultipleChoice(config)
    >>> ids = tf.constant([[2, 5, 6, 7, 8, 3, 7, 3]] * 2)  # [batch_size, seq_length]
    >>> choices = tf.stack([ids, ids, ids], axis=1)  # [batch_size, num_choices, seq_length]
    >>> scores = model({"input_ids": choices, "input_mask": tf.ones_like(choices),
    ...                 "segment_ids": tf.zeros_like(choices)})
    >>> scores.shape
    TensorShape([2, 3])
  """

  def __init__(self, config, drop_padding=False,
               intermediate_kernel_transposed=False, **kwargs):
    if isinstance(config, dict):
      config = bert_config_lib.BertConfig.from_dict(config)

    # === Layers ===
    encoder = encoder_lib.BertEncoder(
        config, drop_padding=drop_padding, first_position_only=True,
        intermediate_kernel_transposed=intermediate_kernel_transposed, name="bert")
    score_layer = heads.OutputProjection(1, config.hidden_size, config.initializer_range,
                                         dropout_rate=classifier_model.CLASSIFIER_DROPOUT,
                                         train_bias=False, name="multiple_choice")
    fold = keras.layers.Lambda(_fold_choices, name="fold_choices")
    unfold = keras.layers.Lambda(_unfold_scores, name="unfold_scores")

    # === Functional model ===
    inputs = {name: keras.Input(shape=(None, None), dtype="int32", name=name)
              for name in encoder_lib.ENCODER_INPUTS}
    pooled = encoder({name: fold(value) for name, value in inputs.items()})["pooled_output"]
    scores = unfold([score_layer(pooled), inputs["input_ids"]])
    super().__init__(config, encoder, {MULTIPLE_CHOICE_SCOPE: score_layer}, inputs, scores,
                     **kwargs)

    # === Config ===
    self.drop_padding = drop_padding
    self.intermediate_kernel_transposed = intermediate_kernel_transposed
    self.score_layer = score_layer

  def get_config(self):
    return {**super().get_config(), "drop_padding": self.drop_padding,
            "intermediate_kernel_transposed": self.intermediate_kernel_transposed}
