"""`run_squad.py`'s answer rules for one window, as TensorFlow ops: the context's word pieces with
their character offsets, the best-span search and the answer's characters.

The runner recovers an answer's text with `tasks.squad.postprocessing.final_text`: it finds the
de-tokenized pieces in the normalised text of the answer's whitespace words and maps characters
back one for one, or returns those whole words when the lengths differ (a word holding a
character that normalisation drops, adds or maps to a space: a soft hyphen, a decomposed accent, a
no-break space, Hangul with lower-casing) or the pieces cannot be found (an `[UNK]` piece). Here
each piece carries its character offsets in the normalised text of its whitespace word
(`GraphTokenizer.tokenize_with_offsets`), which are its offsets in the word when the word
normalises character for character, and the same two fall-backs give whole words.

What can still differ from the runner's text:
  - an answer spanning whitespace other than one space (two spaces, a tab, a newline, U+202F):
    the runner joins the answer's words with one space, the export returns the context's own
    characters (`answer == context[answer_start:answer_end]` always holds);
  - the runner takes the FIRST place where the predicted text occurs in the answer's words, so a
    fragment that also occurs earlier in the answer's first word (the piece "##e" of "Ekberg",
    "s" of "Smith's") gives the runner that earlier occurrence with its casing ("E", "S"), the
    export the characters the model chose;
  - the runner compares the lengths of all the answer's words together, the export word by word:
    only a word that gains characters (Hangul syllables when lower-casing decomposes them) beside
    one that loses some could make the runner map characters one for one where the export
    returns whole words.
"""

import tensorflow as tf
import tensorflow_text as tf_text

# `tasks.squad.reader.split_context` splits contexts into words on these characters only.
_SQUAD_WHITESPACE = r"[ \t\r\n\x{202F}]"


def _row_cumsum(values):
  """Inclusive cumulative sums along each row of an int RaggedTensor `[batch_size, (n)]`."""
  return tf.RaggedTensor.from_tensor(tf.cumsum(values.to_tensor(), axis=1),
                                     lengths=values.row_lengths())


def _characters(contexts, byte_offsets):
  """Byte offsets in valid UTF-8 `contexts` (`[batch_size]`) -> character offsets.

  Args:
    contexts: string `[batch_size]`.
    byte_offsets: int64 RaggedTensor `[batch_size, (n)]`, each at a character boundary.

  Returns:
    int64 RaggedTensor `[batch_size, (n)]`: the number of characters before each offset.
  """
  _, character_bytes = tf.strings.unicode_decode_with_offsets(contexts, "UTF-8")
  # A sentinel column past every offset keeps empty contexts searchable.
  table = tf.concat([character_bytes.to_tensor(default_value=tf.int64.max),
                     tf.fill([tf.shape(contexts)[0], 1], tf.int64.max)], axis=1)
  found = tf.searchsorted(table, byte_offsets.to_tensor(), side="left", out_type=tf.int64)
  return tf.RaggedTensor.from_tensor(found, lengths=byte_offsets.row_lengths())


def context_pieces(tokenizer, contexts):
  """The word pieces of contexts as `run_squad.py` makes them, and where each comes from.

  Args:
    tokenizer: a `data.graph_tokenization.GraphTokenizer`.
    contexts: string `[batch_size]`, valid UTF-8.

  Returns:
    dict of int64 RaggedTensors `[batch_size, (num_pieces)]`:
      `pieces`: the ids (the runner's: each whitespace word tokenized on its own);
      `starts`, `ends`: the piece's first and one-past-last character in its context (meaningful
        where its whitespace word normalises character for character);
      `word_starts`, `word_ends`: the same for the piece's whitespace word;
      `changed_through`, `changed_before`: how many whitespace words of the context up to and
        including (before) the piece's word do not normalise character for character (words
        without any piece, such as a lone soft hyphen, count too);
      `unknown_through`, `unknown_before`: how many `[UNK]` pieces up to and including (before)
        this one.
  """
  words, begin_bytes, end_bytes = tf_text.regex_split_with_offsets(contexts, _SQUAD_WHITESPACE)
  word_starts = _characters(contexts, begin_bytes).flat_values
  word_ends = _characters(contexts, end_bytes).flat_values
  tokens = tokenizer.tokenize_with_offsets(words.flat_values)  # one row per whitespace word
  piece_counts = tokens["pieces"].row_lengths()
  changed = tf.cast(tokens["normalized_lengths"] != word_ends - word_starts, tf.int64)
  changed_through = _row_cumsum(words.with_flat_values(changed)).flat_values

  def per_context(piece_values):
    return words.with_flat_values(
        tokens["pieces"].with_flat_values(piece_values)).merge_dims(1, 2)

  def word_value(word_values):
    return per_context(tf.repeat(word_values, piece_counts))

  word_of_piece_start = tf.repeat(word_starts, piece_counts)
  pieces = per_context(tokens["pieces"].flat_values)
  unknown = tf.cast(pieces == tokenizer.unk_id, tf.int64)
  unknown_through = _row_cumsum(unknown)
  return {"pieces": pieces,
          "starts": per_context(word_of_piece_start + tokens["starts"].flat_values),
          "ends": per_context(word_of_piece_start + tokens["ends"].flat_values),
          "word_starts": word_value(word_starts),
          "word_ends": word_value(word_ends),
          "changed_through": word_value(changed_through),
          "changed_before": word_value(changed_through - changed),
          "unknown_through": unknown_through,
          "unknown_before": unknown_through - unknown}


def best_spans(start_logits, end_logits, lengths, context_starts, context_lengths, n_best_size,
               max_answer_length):
  """The best answer span of each window, by `squad_postprocessing.predict_example`'s rule.

  Starts are taken among the `n_best_size` largest start logits of the window's real positions,
  ends likewise; a span must lie in the context, end at or after its start and hold at most
  `max_answer_length` pieces; the largest start + end logit wins (summed in float64, as the
  runner sums Python floats).

  Args:
    start_logits, end_logits: float `[batch_size, seq_length]`.
    lengths: int32 `[batch_size]`, the window's real positions (`[CLS]` to the last `[SEP]`).
    context_starts, context_lengths: int32 `[batch_size]`, first position and number of the
      context's pieces.
    n_best_size, max_answer_length: Python ints.

  Returns:
    dict `has_span` bool `[batch_size]` (False: no valid span, the runner's answer "empty"),
    `start`, `end` int32 `[batch_size]` positions (0 without a span), `score` float64
    `[batch_size]` (0.0 without a span, the score the runner gives "empty").
  """
  seq_length = tf.shape(start_logits)[1]
  positions = tf.range(seq_length)
  real = positions[None, :] < lengths[:, None]
  in_context = ((positions[None, :] >= context_starts[:, None])
                & (positions[None, :] < (context_starts + context_lengths)[:, None]))

  def candidates(logits):
    masked = tf.where(real, tf.cast(logits, tf.float32), float("-inf"))
    top = tf.math.top_k(masked, k=tf.minimum(n_best_size, seq_length)).indices
    return (tf.reduce_max(tf.one_hot(top, seq_length), axis=1) > 0) & in_context

  span_shape = ((positions[None, :] >= positions[:, None])
                & (positions[None, :] - positions[:, None] < max_answer_length))  # [start, end]
  valid = (candidates(start_logits)[:, :, None] & candidates(end_logits)[:, None, :]
           & span_shape[None])
  scores = (tf.cast(start_logits, tf.float64)[:, :, None]
            + tf.cast(end_logits, tf.float64)[:, None, :])
  flat = tf.reshape(tf.where(valid, scores, float("-inf")), [tf.shape(scores)[0], -1])
  best = tf.argmax(flat, axis=1, output_type=tf.int32)
  has_span = tf.reduce_any(valid, axis=[1, 2])
  return {"has_span": has_span,
          "start": tf.where(has_span, best // seq_length, 0),
          "end": tf.where(has_span, best % seq_length, 0),
          "score": tf.where(has_span, tf.reduce_max(flat, axis=1), 0.0)}


def answer_offsets(context, first, last):
  """Character offsets of the answer made of context pieces `first`..`last`: what `final_text`
  recovers (module docstring).

  Args:
    context: `context_pieces` output, cut to the window.
    first, last: int32 `[batch_size]` indices of the answer's first and last piece in it.

  Returns:
    `(start, end)`, int64 `[batch_size]`: the answer is `context[start:end]` (in characters).
  """
  def at(name, index):
    # A zero column keeps rows without any piece gatherable (their result is not used).
    values = context[name].to_tensor()
    values = tf.concat([values, tf.zeros_like(values[:, :1])], axis=1)
    return tf.gather(values, index[:, None], batch_dims=1)[:, 0]

  whole_words = ((at("changed_through", last) > at("changed_before", first))
                 | (at("unknown_through", last) > at("unknown_before", first)))
  return (tf.where(whole_words, at("word_starts", first), at("starts", first)),
          tf.where(whole_words, at("word_ends", last), at("ends", last)))
