"""The servable of `run_ner.py`: sentences in, one tag per whitespace-separated word out."""

import tensorflow as tf

from data import graph_packing
from serving import servable


class TaggerServer(servable.Servable):
  """A fine-tuned token tagger (`BertClassifier(per_token=True)`) with its tokenizer.

  Signatures:
    serving_default: `sentences` string `[batch_size]`, words separated by whitespace (as the
      CoNLL token column) -> `words` and `tags` string `[batch_size, max_words]`, padded with "".
      One window per sentence: words whose pieces do not fit in `max_seq_length` get the tag "O"
      (`run_ner.py` splits such sentences into several windows instead).
    predict_ids: `input_ids`, `input_mask`, `segment_ids` int32 `[batch_size, seq_length]` ->
      `tag_ids` int32 and `tags` string `[batch_size, seq_length]` for every position.

  Args:
    model: the built tagger holding the weights to export.
    vocab_file, do_lower_case: its tokenizer (the vocab is copied into the assets).
    label_list: tag names in label-id order.
    max_seq_length: pieces per window, `[CLS]` and `[SEP]` included.
    with_text: include the tokenizer and `serving_default` (see `ClassifierServer`).
  """

  def __init__(self, model, vocab_file, do_lower_case, label_list, max_seq_length,
               with_text=True):
    super().__init__("tagger_server", model, vocab_file, do_lower_case, with_text)
    self.label_names = tf.constant(list(label_list), tf.string)
    self.max_seq_length = max_seq_length

  def _tag_ids(self, input_ids, input_mask, segment_ids):
    logits = self.model({"input_ids": input_ids, "input_mask": input_mask,
                         "segment_ids": segment_ids}, training=False)
    return tf.argmax(logits, axis=-1, output_type=tf.int32)

  @tf.function(input_signature=[servable.IDS_SPEC, servable.IDS_SPEC, servable.IDS_SPEC])
  def predict_ids(self, input_ids, input_mask, segment_ids):
    length = self.max_seq_length
    tag_ids = self._tag_ids(input_ids[:, :length], input_mask[:, :length],
                            segment_ids[:, :length])
    return {"tag_ids": tag_ids, "tags": tf.gather(self.label_names, tag_ids)}

  def _serve_sentences(self, sentences):
    budget = self.max_seq_length - 2
    words = tf.strings.split(sentences)                                  # [batch, (words)]
    pieces = self.tokenizer.tokenize(words.flat_values)                  # [all words, (pieces)]
    # As the runner: a word without pieces is [UNK]; a word longer than a window keeps its start.
    pieces = tf.concat([pieces, tf.fill([pieces.nrows(), 1], tf.cast(self.unk_id, pieces.dtype))],
                       axis=1)
    counts = tf.clip_by_value(pieces.row_lengths() - 1, 1, budget)
    pieces = graph_packing.keep_first(pieces, counts)
    ends = tf.cumsum(counts)
    sentence_starts = tf.gather(ends - counts, words.row_starts())
    # Pieces up to and including each word, counted from its sentence's start.
    within = ends - tf.repeat(sentence_starts, words.row_lengths())
    kept = words.with_flat_values(within <= budget)                      # [batch, (words)]
    per_sentence = tf.RaggedTensor.from_row_lengths(pieces, words.row_lengths())
    kept_pieces = tf.ragged.boolean_mask(per_sentence, kept).merge_dims(1, 2)
    inputs = graph_packing.pack(kept_pieces, None, self.max_seq_length, self.cls_id,
                                self.sep_id)
    tag_ids = self._tag_ids(**inputs)
    # The first piece of each word sits after [CLS] and the pieces of the words before it.
    positions = words.with_flat_values(tf.where(kept.flat_values, within - counts + 1, 0))
    word_tag_ids = tf.gather(tag_ids, positions.to_tensor(), batch_dims=1)
    tags = tf.where(kept.to_tensor(), tf.gather(self.label_names, word_tag_ids), "O")
    mask = tf.sequence_mask(words.row_lengths(), tf.shape(tags)[1])
    return {"words": words.to_tensor(""), "tags": tf.where(mask, tags, "")}

  def signatures(self):
    """{"serving_default": sentences, "predict_ids": token ids} (only "predict_ids" without
    `with_text`)."""
    signatures = {"predict_ids": self.predict_ids.get_concrete_function()}
    if self.with_text:
      self.serve_sentences = tf.function(
          self._serve_sentences, input_signature=[servable.TEXT_SPEC])
      signatures["serving_default"] = self.serve_sentences.get_concrete_function()
    return signatures
