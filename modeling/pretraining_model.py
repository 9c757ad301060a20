"""`BertPretrainingModel`: the encoder with the masked-LM and next-sentence heads."""

import keras

from modeling import bert_config as bert_config_lib
from modeling import encoder as encoder_lib
from modeling import heads

PRETRAINING_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")


class BertPretrainingModel(keras.Model):
  """The model `run_pretraining.py` trains: encoder + masked-LM head + next-sentence head.

  Checkpoint names are the original's: the encoder under `bert/`, the masked-LM head under
  `cls/predictions` (its output matrix is the word-embedding table, so there is no kernel), the
  next-sentence head `cls/seq_relationship/output_weights` `[2, H]` and `output_bias` `[2]`.

  Args:
    config: a `BertConfig` (or its dict).
    **kwargs: passed to `keras.Model`.

  Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[batch_size, seq_length]`;
    `masked_lm_positions` int32 `[batch_size, max_predictions_per_seq]`. Other keys are ignored.

  Outputs (dict):
    masked_lm_logits: float32 `[batch_size, max_predictions_per_seq, vocab_size]`.
    next_sentence_logits: float32 `[batch_size, 2]`; class 1 means "B is a random sentence".
    sequence_output, pooled_output: the encoder's.

  Example:
    >>> model = BertPretrainingModel(BertConfig.from_json_file("bert_config.json"))
    >>> outputs = model(features)
    >>> total_loss, _, _ = losses.pretraining_loss(outputs, features)
  """

  def __init__(self, config, **kwargs):
    if isinstance(config, dict):
      config = bert_config_lib.BertConfig.from_dict(config)

    # === Layers ===
    encoder = encoder_lib.BertEncoder(config, name="bert")
    masked_lm = heads.MaskedLMHead(encoder.embeddings, hidden_act=config.hidden_act,
                                   initializer_range=config.initializer_range,
                                   name="predictions")
    next_sentence = heads.OutputProjection(2, config.hidden_size, config.initializer_range,
                                           name="seq_relationship")

    # === Functional model ===
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
              for name in PRETRAINING_INPUTS}
    encoder_outputs = encoder({name: inputs[name]
                               for name in ("input_ids", "input_mask", "segment_ids")})
    outputs = {
        "masked_lm_logits": masked_lm(encoder_outputs["sequence_output"],
                                      inputs["masked_lm_positions"]),
        "next_sentence_logits": next_sentence(encoder_outputs["pooled_output"]),
        "sequence_output": encoder_outputs["sequence_output"],
        "pooled_output": encoder_outputs["pooled_output"],
    }
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # === Config ===
    self.config = config
    self.encoder = encoder
    self.masked_lm = masked_lm
    self.next_sentence = next_sentence

  def call(self, inputs, training=False):
    """Runs the model on `inputs`, dropping keys that are not model inputs (labels, weights)."""
    return super().call({name: inputs[name] for name in PRETRAINING_INPUTS}, training=training)

  def name_to_variable(self):
    """Returns {original checkpoint name: variable} of the encoder and both heads."""
    names = self.encoder.name_to_variable()
    names.update(self.masked_lm.name_to_variable("cls/predictions"))
    names.update(self.next_sentence.name_to_variable("cls/seq_relationship"))
    return names

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}

  @classmethod
  def from_config(cls, config):
    return cls(**config)
