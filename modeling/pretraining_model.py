"""`BertPretrainingModel`: the encoder with the masked-LM and next-sentence heads."""

import keras
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from modeling import encoder as encoder_lib
from modeling import heads
from modeling import task_model

PRETRAINING_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
# What a packed model also takes (`tasks.pretraining.features.packed_pretraining_feature_spec`).
PACKED_PRETRAINING_INPUTS = PRETRAINING_INPUTS + ("position_ids", "instance_ids",
                                                  "next_sentence_positions")


class PredictionPositions(keras.layers.Layer):
  """The positions pretraining's heads read, for an encoder whose last layer computes them alone
  (`BertEncoder(last_layer_positions=True)`): first the next-sentence ones (`[CLS]`, or each
  instance's when packed), then the masked ones; and where each lands in that layer's output.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import pretraining_model
    >>> positions, cls_rows, masked_rows = pretraining_model.PredictionPositions()(
    ...     tf.constant([[3, 5]]))
    >>> positions.numpy(), cls_rows.numpy(), masked_rows.numpy()
    (array([[0, 3, 5]], dtype=int32), array([[0]], dtype=int32), array([[1, 2]], dtype=int32))
  """

  def call(self, masked_lm_positions, next_sentence_positions=None):
    """int32 `[batch_size, num_predictions]` (and `[batch_size, max_sequences_per_pack]` when
    packed) -> (positions `[batch_size, num_cls + num_predictions]`, their rows of the `[CLS]`
    positions `[batch_size, num_cls]` and of the masked ones `[batch_size, num_predictions]`)."""
    masked_lm_positions = tf.cast(masked_lm_positions, tf.int32)
    if next_sentence_positions is None:
      next_sentence_positions = tf.zeros_like(masked_lm_positions[:, :1])
    next_sentence_positions = tf.cast(next_sentence_positions, tf.int32)
    positions = tf.concat([next_sentence_positions, masked_lm_positions], axis=1)
    rows = tf.broadcast_to(tf.range(tf.shape(positions)[1])[tf.newaxis], tf.shape(positions))
    num_cls = tf.shape(next_sentence_positions)[1]
    return positions, rows[:, :num_cls], rows[:, num_cls:]


class BertPretrainingModel(task_model.BertTaskModel):
  """The model `run_pretraining.py` trains: encoder + masked-LM head + next-sentence head.

  Checkpoint names are the original's: the encoder under `bert/`, the masked-LM head under
  `cls/predictions` (its output matrix is the word-embedding table, so there is no kernel), the
  next-sentence head `cls/seq_relationship/output_weights` `[2, H]` and `output_bias` `[2]`.
  A packed model has the same variables, so its checkpoints are those of an unpacked one.

  Args:
    config: a `BertConfig` (or its dict).
    packed: read packed rows (`tasks.pretraining.features.packed_pretraining_feature_spec`):
      several instances per row, each attending only to itself, with positions restarting at 0,
      and a next-sentence prediction at each instance's `[CLS]`.
    last_layer_at_predictions: the encoder's last layer computes the positions the heads read
      alone (`BertEncoder(last_layer_positions=True)`, `PredictionPositions`): the same logits,
      the last layer's query, output projection and feed-forward on about a sixth of the rows
      (21 of 128 at the original's settings). `run_pretraining.py` trains so; a model whose
      `sequence_output` is read (the encoder export) is built without it.
    **kwargs: passed to `keras.Model`.

  Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[batch_size, seq_length]`;
    `masked_lm_positions` int32 `[batch_size, num_predictions]`; when `packed`, also
    `position_ids`, `instance_ids` int32 `[batch_size, seq_length]` and `next_sentence_positions`
    int32 `[batch_size, max_sequences_per_pack]`. Other keys are ignored.

  Outputs (dict):
    masked_lm_logits: float32 `[batch_size, num_predictions, vocab_size]`.
    next_sentence_logits: float32 `[batch_size, 2]`, or `[batch_size, max_sequences_per_pack, 2]`
      when `packed`; class 1 means "B is a random sentence".
    sequence_output: the encoder's (with `last_layer_at_predictions`, at the
      `PredictionPositions` alone).
    pooled_output: `[batch_size, hidden_size]`, or `[batch_size, max_sequences_per_pack,
      hidden_size]` when `packed`.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import pretraining_model
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> model = pretraining_model.BertPretrainingModel(config)
    >>> ids = tf.constant([[2, 5, 6, 7, 8, 3, 7, 3]] * 2)  # [batch_size, seq_length]
    >>> outputs = model({"input_ids": ids, "input_mask": tf.ones_like(ids),
    ...                  "segment_ids": tf.zeros_like(ids),
    ...                  "masked_lm_positions": tf.constant([[1, 2], [3, 4]])})
    >>> outputs["masked_lm_logits"].shape  # [batch_size, max_predictions_per_seq, vocab_size]
    TensorShape([2, 2, 9])
    >>> outputs["next_sentence_logits"].shape
    TensorShape([2, 2])
  """

  def __init__(self, config, packed=False, last_layer_at_predictions=False, **kwargs):
    if isinstance(config, dict):
      config = bert_config_lib.BertConfig.from_dict(config)

    # === Layers ===
    encoder = encoder_lib.BertEncoder(config, packed=packed,
                                      last_layer_positions=last_layer_at_predictions, name="bert")
    masked_lm = heads.MaskedLMHead(encoder.embeddings, hidden_act=config.hidden_act,
                                   initializer_range=config.initializer_range,
                                   name="predictions")
    next_sentence = heads.OutputProjection(2, config.hidden_size, config.initializer_range,
                                           name="seq_relationship")

    # === Functional model ===
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
              for name in (PACKED_PRETRAINING_INPUTS if packed else PRETRAINING_INPUTS)}
    encoder_inputs = {name: inputs[name] for name in (
        encoder_lib.PACKED_ENCODER_INPUTS if packed else encoder_lib.ENCODER_INPUTS)}
    cls_positions, masked_lm_positions = (
        inputs["next_sentence_positions"] if packed else None, inputs["masked_lm_positions"])
    if last_layer_at_predictions:
      (encoder_inputs[encoder_lib.LAST_LAYER_POSITIONS], cls_positions,
       masked_lm_positions) = PredictionPositions(name="prediction_positions")(
           masked_lm_positions, cls_positions)
    encoder_outputs = encoder(encoder_inputs)
    sequence_output = encoder_outputs["sequence_output"]
    pooled_output = (encoder.pooler(sequence_output, cls_positions)
                     if packed else encoder_outputs["pooled_output"])
    outputs = {
        "masked_lm_logits": masked_lm(sequence_output, masked_lm_positions),
        "next_sentence_logits": next_sentence(pooled_output),
        "sequence_output": sequence_output,
        "pooled_output": pooled_output,
    }
    super().__init__(config, encoder,
                     {"cls/predictions": masked_lm, "cls/seq_relationship": next_sentence},
                     inputs, outputs, **kwargs)

    # === Config ===
    self.packed = packed
    self.last_layer_at_predictions = last_layer_at_predictions
    self.masked_lm = masked_lm
    self.next_sentence = next_sentence

  def get_config(self):
    config = super().get_config()
    if self.packed:
      config["packed"] = True
    if self.last_layer_at_predictions:
      config["last_layer_at_predictions"] = True
    return config
