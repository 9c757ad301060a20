"""The servable of `run_multiple_choice.py`: a context and its choices in, the chosen index out."""

import tensorflow as tf

from data import graph_packing
from serving import servable

CONTEXT_SPEC = tf.TensorSpec([None], tf.string)
CHOICES_SPEC = tf.TensorSpec([None, None], tf.string)
CHOICE_IDS_SPEC = tf.TensorSpec([None, None, None], tf.int32)


class MultipleChoiceServer(servable.Servable):
  """A fine-tuned `BertMultipleChoice` with its tokenizer, for `tf.saved_model.save`.

  The vocab asset, casing, tokenizer and the explicit variable list are `servable.Servable`'s.
  The served model is a copy of `model` that computes the real tokens alone
  (`BertMultipleChoice(drop_padding=True)`): the pairs' padding to the longest costs nothing in
  the encoder's dense layers, and the outputs are the same.

  Signatures:
    serving_default: `context` string `[batch_size]` and `choices` string
      `[batch_size, num_choices]` (any number of choices, the same for the whole batch) -> outputs.
      Each `[CLS] context [SEP] choice [SEP]` is tokenized, truncated and packed in the graph with
      the same ids as the runner.
    predict_ids: `input_ids`, `input_mask`, `segment_ids` int32
      `[batch_size, num_choices, seq_length]` (any length; cut to `max_seq_length`) -> outputs.

  Outputs: `scores` and `probabilities` (softmax over the choices) float32
  `[batch_size, num_choices]`, `choice` int32 `[batch_size]` (index of the most probable choice).

  Args:
    model: a built `BertMultipleChoice` holding the weights to export.
    vocab_file: its vocab; copied into the SavedModel's assets.
    do_lower_case: its casing.
    max_seq_length: each (context, choice) pair is cut to this many pieces.
    with_text: include the tokenizer and `serving_default`; False exports `predict_ids` alone,
      without tensorflow-text ops (see `servable.Servable`).

  Usage:
    server = MultipleChoiceServer(model, "vocab.txt", True, 128)
    saved_model_export.export(server, "export", server.signatures())
  """

  def __init__(self, model, vocab_file, do_lower_case, max_seq_length, with_text=True):
    super().__init__("multiple_choice_server", model, vocab_file, do_lower_case, with_text,
                     drop_padding=True)
    self.max_seq_length = max_seq_length

  def _outputs(self, input_ids, input_mask, segment_ids):
    """Int32 `[batch_size, num_choices, seq_length]` inputs -> the signatures' outputs."""
    scores = tf.cast(self.model({"input_ids": input_ids, "input_mask": input_mask,
                                 "segment_ids": segment_ids}, training=False), tf.float32)
    return {"scores": scores, "probabilities": tf.nn.softmax(scores, axis=-1),
            "choice": tf.argmax(scores, axis=-1, output_type=tf.int32)}

  @tf.function(input_signature=[CHOICE_IDS_SPEC, CHOICE_IDS_SPEC, CHOICE_IDS_SPEC])
  def predict_ids(self, input_ids, input_mask, segment_ids):
    length = self.max_seq_length
    return self._outputs(input_ids[..., :length], input_mask[..., :length],
                         segment_ids[..., :length])

  def _serve_choices(self, context, choices):
    """`context` `[batch_size]`, `choices` `[batch_size, num_choices]` -> outputs."""
    num_choices = tf.shape(choices)[1]
    # Each context is tokenized once and paired with each of its choices.
    pair_context = tf.repeat(tf.range(tf.shape(context)[0]), num_choices)
    pieces_a = tf.gather(self.tokenizer.tokenize(context), pair_context)
    pieces_b = self.tokenizer.tokenize(tf.reshape(choices, [-1]))
    pairs = graph_packing.pack(pieces_a, pieces_b, self.max_seq_length, self.cls_id,
                               self.sep_id)                    # [batch * choices, length]
    return self._outputs(**{name: tf.reshape(value, [-1, num_choices, tf.shape(value)[-1]])
                            for name, value in pairs.items()})

  def signatures(self):
    """{"serving_default": context and choices, "predict_ids": token ids} concrete functions
    (only "predict_ids" without `with_text`)."""
    signatures = {"predict_ids": self.predict_ids.get_concrete_function()}
    if self.with_text:
      self.serve_choices = tf.function(self._serve_choices,
                                       input_signature=[CONTEXT_SPEC, CHOICES_SPEC])
      signatures["serving_default"] = self.serve_choices.get_concrete_function()
    return signatures
