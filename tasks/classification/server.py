"""The servable of `run_classifier.py`: raw text or token ids in, class probabilities and label out."""

import tensorflow as tf

from data import graph_packing
from serving import servable
from tasks import classifier


class ClassifierServer(servable.Servable):
  """A fine-tuned `BertClassifier` with its tokenizer, for `tf.saved_model.save`.

  Signatures:
    serving_default: `text_a` (and `text_b` for pair tasks) string `[batch_size]` -> outputs.
      Tokenization, pair truncation and padding run in the graph with the same ids as the runner;
      inputs longer than `max_seq_length` are truncated.
    predict_ids: `input_ids`, `input_mask`, `segment_ids` int32 `[batch_size, seq_length]` (any
      length; cut to `max_seq_length`) -> outputs.

  Outputs: classification `probabilities` float32 `[batch_size, num_labels]` and `label` string
  `[batch_size]`; multi-label `probabilities` (sigmoid) and `labels` (predicted labels joined by
  ","); regression `value` float32 `[batch_size]`. `logits` always.

  The served model computes the real tokens alone (`BertClassifier(drop_padding=True)`, a copy
  of `model`): a batch's padding to its longest input costs nothing in the encoder's dense layers
  (the attention still spans the padded length), and the outputs are the same.

  Args:
    model: a built `BertClassifier` holding the weights to export.
    vocab_file: its vocab; copied into the SavedModel's assets.
    do_lower_case: its casing.
    label_list: label names in class-id order (empty for regression).
    kind: CLASSIFICATION, REGRESSION or MULTI_LABEL.
    max_seq_length: inputs are cut to this many pieces.
    has_pairs: `serving_default` takes `text_b` too.
    with_text: include the tokenizer and `serving_default`; False exports `predict_ids` alone,
      a SavedModel without tensorflow-text ops (loadable by a stock TensorFlow Serving binary).

  Usage:
    server = ClassifierServer(model, "vocab.txt", True, ["0", "1"], classifier.CLASSIFICATION,
                              128, has_pairs=True)
    saved_model_export.export(server, "export", server.signatures())
  """

  def __init__(self, model, vocab_file, do_lower_case, label_list, kind, max_seq_length,
               has_pairs, with_text=True):
    super().__init__("classifier_server", model, vocab_file, do_lower_case, with_text,
                     drop_padding=True)
    self.label_names = tf.constant(list(label_list) or [""], tf.string)
    self.kind = kind
    self.max_seq_length = max_seq_length
    self.has_pairs = has_pairs

  def _outputs(self, input_ids, input_mask, segment_ids):
    logits = tf.cast(self.model({"input_ids": input_ids, "input_mask": input_mask,
                                 "segment_ids": segment_ids}, training=False), tf.float32)
    if self.kind == classifier.REGRESSION:
      return {"value": logits[:, 0], "logits": logits}
    if self.kind == classifier.MULTI_LABEL:
      probabilities = tf.sigmoid(logits)
      chosen = tf.ragged.boolean_mask(
          tf.broadcast_to(self.label_names, tf.shape(logits)), probabilities > 0.5)
      return {"probabilities": probabilities, "logits": logits,
              "labels": tf.strings.reduce_join(chosen, axis=1, separator=",")}
    return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
            "label": tf.gather(self.label_names, tf.argmax(logits, axis=-1))}

  @tf.function(input_signature=[servable.IDS_SPEC, servable.IDS_SPEC, servable.IDS_SPEC])
  def predict_ids(self, input_ids, input_mask, segment_ids):
    length = self.max_seq_length
    return self._outputs(input_ids[:, :length], input_mask[:, :length], segment_ids[:, :length])

  def _serve_text(self, text_a, text_b=None):
    pieces_b = None if text_b is None else self.tokenizer.tokenize(text_b)
    inputs = graph_packing.pack(self.tokenizer.tokenize(text_a), pieces_b, self.max_seq_length,
                                self.cls_id, self.sep_id)
    return self._outputs(**inputs)

  def signatures(self):
    """{"serving_default": raw text, "predict_ids": token ids} concrete functions (only
    "predict_ids" without `with_text`)."""
    signatures = {"predict_ids": self.predict_ids.get_concrete_function()}
    if not self.with_text:
      return signatures
    if self.has_pairs:
      serve = tf.function(lambda text_a, text_b: self._serve_text(text_a, text_b),
                          input_signature=[servable.TEXT_SPEC, servable.TEXT_SPEC])
    else:
      serve = tf.function(lambda text_a: self._serve_text(text_a),
                          input_signature=[servable.TEXT_SPEC])
    self.serve_text = serve
    signatures["serving_default"] = serve.get_concrete_function()
    return signatures
