"""The servable of `run_squad.py`: a question and its context in, the answer and its character
offsets out."""

import tensorflow as tf

from data import graph_packing
from serving import servable
from tasks.squad import spans as squad_spans



class SquadServer(servable.Servable):
  """A fine-tuned `BertSpanModel` with its tokenizer and the runner's answer rules.

  Signatures:
    serving_default: `question`, `context` string `[batch_size]` -> `start_logits`, `end_logits`
      float32 `[batch_size, seq_length]` (the packed window; positions past a row's last
      `[SEP]` are padding), `answer` string `[batch_size]`, `answer_start`, `answer_end` int32
      `[batch_size]`: character offsets in the context, `answer == context[answer_start:
      answer_end]` (for context bytes that are not UTF-8: in the context decoded with each
      invalid sequence replaced by U+FFFD). v2.0 exports add `null_score_diff` float32
      `[batch_size]` (null score minus best span score) and answer "" when it exceeds
      `null_score_diff_threshold`. Offsets are -1 for "" and for "empty", the runner's answer
      when no span qualifies.
      ONE window per request: the question is cut to `max_query_length` pieces and the context to
      the pieces that fit after it (`run_squad.py` slides further windows over a longer context);
      the answer is then the one `run_squad.py` writes for a context that fits in one window.
    predict_ids: `input_ids`, `input_mask`, `segment_ids` int32 `[batch_size, seq_length]` (any
      length; cut to `max_seq_length`) -> `start_logits`, `end_logits` float32.

  Args:
    model: a built `BertSpanModel` holding the weights to export.
    vocab_file, do_lower_case: its tokenizer (the vocab is copied into the assets).
    max_seq_length, max_query_length, max_answer_length, n_best_size: the runner's flags.
    version_2_with_negative, null_score_diff_threshold: the null answer (SQuAD v2.0).
    with_text: include the tokenizer and `serving_default` (see `ClassifierServer`).

  Usage:
    server = SquadServer(model, "vocab.txt", True, 384, 64, 30, 20, False, 0.0)
    saved_model_export.export(server, "export", server.signatures())
  """

  def __init__(self, model, vocab_file, do_lower_case, max_seq_length, max_query_length,
               max_answer_length, n_best_size, version_2_with_negative,
               null_score_diff_threshold, with_text=True):
    super().__init__("squad_server", model, vocab_file, do_lower_case, with_text)
    self.max_seq_length = max_seq_length
    self.max_query_length = max_query_length
    self.max_answer_length = max_answer_length
    self.n_best_size = n_best_size
    self.version_2_with_negative = version_2_with_negative
    self.null_score_diff_threshold = null_score_diff_threshold

  def _logits(self, input_ids, input_mask, segment_ids):
    """`start_logits`, `end_logits` float32 `[batch_size, seq_length]` of int32 inputs of that
    shape."""
    outputs = self.model({"input_ids": input_ids, "input_mask": input_mask,
                          "segment_ids": segment_ids}, training=False)
    return {name: tf.cast(outputs[name], tf.float32) for name in ("start_logits", "end_logits")}

  @tf.function(input_signature=[servable.IDS_SPEC, servable.IDS_SPEC, servable.IDS_SPEC])
  def predict_ids(self, input_ids, input_mask, segment_ids):
    length = self.max_seq_length
    return self._logits(input_ids[:, :length], input_mask[:, :length], segment_ids[:, :length])

  def _serve_text(self, question, context):
    """`serving_default`: string `[batch_size]` each -> the outputs in the class docstring."""
    context = tf.strings.unicode_transcode(context, input_encoding="UTF-8",
                                           output_encoding="UTF-8", errors="replace",
                                           replacement_char=0xFFFD)
    question_pieces = self.tokenizer.tokenize(question)[:, :self.max_query_length]
    question_lengths = tf.cast(question_pieces.row_lengths(), tf.int32)
    pieces = squad_spans.context_pieces(self.tokenizer, context)
    # The runner's first window: whatever follows [CLS] question [SEP] before the last [SEP].
    kept = tf.minimum(tf.cast(pieces["pieces"].row_lengths(), tf.int32),
                      self.max_seq_length - 3 - question_lengths)
    window = {name: graph_packing.keep_first(values, kept) for name, values in pieces.items()}
    inputs = graph_packing.pack(question_pieces, window["pieces"], self.max_seq_length,
                                self.cls_id, self.sep_id)
    outputs = self._logits(**inputs)
    context_start = question_lengths + 2
    span = squad_spans.best_spans(
        outputs["start_logits"], outputs["end_logits"], tf.reduce_sum(inputs["input_mask"], 1),
        context_start, kept, self.n_best_size, self.max_answer_length)
    first = tf.where(span["has_span"], span["start"] - context_start, 0)
    last = tf.where(span["has_span"], span["end"] - context_start, 0)
    start, end = squad_spans.answer_offsets(window, first, last)
    answered = span["has_span"]
    answer = tf.where(answered, tf.strings.substr(context, start, end - start, unit="UTF8_CHAR"),
                      "empty")
    if self.version_2_with_negative:
      null_score = (tf.cast(outputs["start_logits"][:, 0], tf.float64)
                    + tf.cast(outputs["end_logits"][:, 0], tf.float64))
      null_score_diff = null_score - span["score"]
      is_null = null_score_diff > self.null_score_diff_threshold
      answer = tf.where(is_null, "", answer)
      answered &= ~is_null
      outputs["null_score_diff"] = tf.cast(null_score_diff, tf.float32)
    outputs["answer"] = answer
    outputs["answer_start"] = tf.where(answered, tf.cast(start, tf.int32), -1)
    outputs["answer_end"] = tf.where(answered, tf.cast(end, tf.int32), -1)
    return outputs

  def signatures(self):
    """{"serving_default": question and context, "predict_ids": token ids} concrete functions
    (only "predict_ids" without `with_text`)."""
    signatures = {"predict_ids": self.predict_ids.get_concrete_function()}
    if self.with_text:
      self.serve_text = tf.function(self._serve_text,
                                    input_signature=[servable.TEXT_SPEC, servable.TEXT_SPEC])
      signatures["serving_default"] = self.serve_text.get_concrete_function()
    return signatures
