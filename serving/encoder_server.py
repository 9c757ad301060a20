"""The servable of `export_model.py`: a pretrained encoder as a feature extractor.

Raw text or token ids in; per-token vectors, the pooled vector, masked-LM logits at every position
and one sentence embedding per input out.
"""

import tensorflow as tf

from data import graph_packing
from data import graph_tokenization
from data import tokenization
from modeling import heads
from modeling import sentence_pooling
from modeling import tracking
from serving import servable

TEXT_SPEC = tf.TensorSpec([None], tf.string)
IDS_SPEC = tf.TensorSpec([None, None], tf.int32)


class EncoderServer(tf.Module):
  """A `BertEncoder` (and its masked-LM head) with its tokenizer, for `tf.saved_model.save`.

  Signatures:
    serving_default: `text_a`, `text_b` string `[batch_size]`; a row whose `text_b` is empty (or
      only whitespace) is a single text, others are pairs `[CLS] A [SEP] B [SEP]` (the lines
      `A` and `A ||| B` of `extract_features.py`). Inputs longer than `max_seq_length` are
      truncated as the original. -> the outputs below.
    predict_ids: `input_ids`, `input_mask`, `segment_ids` int32 `[batch_size, seq_length]` (any
      length; cut to `max_seq_length`) -> the outputs below.
    embed: `text_a`, `text_b` as `serving_default` -> `embedding` only (the masked-LM head does
      not run).

  Outputs (`seq_length` = the longest packed input of the batch):
    sequence_output: float32 `[batch_size, seq_length, hidden_size]`, the last layer.
    pooled_output: float32 `[batch_size, hidden_size]`, the pooler's.
    mlm_logits: float32 `[batch_size, seq_length, vocab_size]`, the masked-LM head at every
      position (absent when the checkpoint has no masked-LM head).
    embedding: float32 `[batch_size, hidden_size]`, `sentence_pooling.pool(..., pooling)` of the
      last layer: what `extract_features.py --pooling=<pooling> --layers=-1` writes.
    input_ids, input_mask: int32 `[batch_size, seq_length]`, the packed ids and which positions
      are real tokens.

  Args:
    encoder: a built `BertEncoder` holding the weights to export; the server computes with,
      and exports, its `servable.served_copy`.
    masked_lm: its `MaskedLMHead`, or None to export without `mlm_logits`.
    vocab_file: its vocab; copied into the SavedModel's assets.
    do_lower_case: its casing.
    max_seq_length: inputs are cut to this many pieces.
    pooling: one of `sentence_pooling.POOLING_METHODS`.
    with_text: include the tokenizer, `serving_default` and `embed`; False exports `predict_ids`
      alone, a SavedModel without tensorflow-text ops (loadable by a stock TensorFlow Serving).

  Usage:
    server = EncoderServer(model.encoder, model.masked_lm, "vocab.txt", True, 128, "mean")
    saved_model_export.export(server, "export", server.signatures())
  """

  def __init__(self, encoder, masked_lm, vocab_file, do_lower_case, max_seq_length, pooling,
               with_text=True):
    super().__init__(name="encoder_server")
    if pooling not in sentence_pooling.POOLING_METHODS:
      raise ValueError(f"pooling must be one of {sentence_pooling.POOLING_METHODS}, got "
                       f"{pooling!r}")
    # Every padded position is computed: `sequence_output` and `mlm_logits` return them. The
    # head moves onto the copy's word-embedding table.
    encoder = servable.served_copy(encoder)
    if masked_lm is not None:
      masked_lm = _head_on(encoder, masked_lm)
    tracking.set_untracked(self, "encoder", encoder)
    tracking.set_untracked(self, "masked_lm", masked_lm)
    # Listed so that the TF1-style loader of TensorFlow Serving and saved_model_cli restores them
    # (see `servable.Servable`); the head shares the word-embedding table, listed once.
    self.model_variables = servable.model_variables(
        encoder, *([masked_lm] if masked_lm is not None else []))
    self.with_text = with_text
    if with_text:
      self.tokenizer = graph_tokenization.GraphTokenizer(vocab_file, do_lower_case)
    self.vocab_file = tf.saved_model.Asset(vocab_file)
    self.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
    self.max_seq_length = max_seq_length
    self.pooling = pooling
    vocab = tokenization.load_vocab(vocab_file)
    self.cls_id, self.sep_id = vocab["[CLS]"], vocab["[SEP]"]

  def _encode(self, input_ids, input_mask, segment_ids, embedding_only=False):
    """The outputs of the class docstring (`embedding` alone if `embedding_only`) for int32
    `[batch_size, seq_length]` inputs."""
    outputs = self.encoder({"input_ids": input_ids, "input_mask": input_mask,
                            "segment_ids": segment_ids}, training=False)
    embedding = sentence_pooling.pool(outputs, input_mask, self.pooling)
    if embedding_only:
      return {"embedding": embedding}
    result = {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
              "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
              "embedding": embedding, "input_ids": input_ids, "input_mask": input_mask}
    if self.masked_lm is not None:
      every_position = tf.broadcast_to(tf.range(tf.shape(input_ids)[1]), tf.shape(input_ids))
      logits = self.masked_lm(outputs["sequence_output"], every_position)
      # The head's reshape leaves the vocabulary axis unknown; the signature should state it.
      result["mlm_logits"] = tf.ensure_shape(
          logits, [None, None, self.masked_lm.embeddings.vocab_size])
    return result

  @tf.function(input_signature=[IDS_SPEC, IDS_SPEC, IDS_SPEC])
  def predict_ids(self, input_ids, input_mask, segment_ids):
    length = self.max_seq_length
    return self._encode(input_ids[:, :length], input_mask[:, :length], segment_ids[:, :length])

  def _pack_text(self, text_a, text_b):
    """Packs string `[batch_size]` texts into int32 `[batch_size, seq_length]` model inputs."""
    is_pair = tf.strings.length(tf.strings.strip(text_b)) > 0
    return graph_packing.pack_pairs_or_singles(
        self.tokenizer.tokenize(text_a), self.tokenizer.tokenize(text_b), is_pair,
        self.max_seq_length, self.cls_id, self.sep_id)

  def signatures(self):
    """{"serving_default": raw text, "predict_ids": token ids, "embed": raw text -> embedding}
    concrete functions (only "predict_ids" without `with_text`)."""
    signatures = {"predict_ids": self.predict_ids.get_concrete_function()}
    if not self.with_text:
      return signatures
    self.serve_text = tf.function(
        lambda text_a, text_b: self._encode(**self._pack_text(text_a, text_b)),
        input_signature=[TEXT_SPEC, TEXT_SPEC])
    self.embed = tf.function(
        lambda text_a, text_b: self._encode(**self._pack_text(text_a, text_b),
                                              embedding_only=True),
        input_signature=[TEXT_SPEC, TEXT_SPEC])
    signatures["serving_default"] = self.serve_text.get_concrete_function()
    signatures["embed"] = self.embed.get_concrete_function()
    return signatures


def _head_on(encoder, masked_lm):
  """A copy of `masked_lm` scoring against `encoder`'s word-embedding table: its own weights
  (transform, layer norm, output bias) copied by original name."""
  head = heads.MaskedLMHead(encoder.embeddings, hidden_act=masked_lm.hidden_act,
                            initializer_range=masked_lm.initializer_range, name=masked_lm.name,
                            dtype=masked_lm.dtype_policy)
  head.build()
  sources = masked_lm.name_to_variable()
  for name, variable in head.name_to_variable().items():
    variable.assign(sources[name])
  return head
