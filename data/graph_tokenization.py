"""In-graph WordPiece tokenization with the same ids as `data.tokenization.FullTokenizer`.

Built from TensorFlow string ops and tensorflow-text, so it runs inside `tf.data` pipelines, in
`tf.function`s and in exported SavedModels, in C++ and batched.

Why not `tensorflow_text.FastBertTokenizer(lower_case_nfd_strip_accents=True)` or
`BertTokenizer(lower_case=True)`: both lower-case with NFKC case folding, a compatibility
normalisation the original does not apply (`½`, `…`, U+2011 and ligatures come out differently).
Here each step of the original `BasicTokenizer` is one op: UTF-8 repair, text cleaning, spaces
around CJK ideographs, `lower` + NFD + dropping Mn marks, splitting on whitespace and punctuation;
then `FastWordpieceTokenizer` (longest-match-first, the same algorithm as the original's
`WordpieceTokenizer`) over the words.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from data import tokenization

# `_is_punctuation`: the four ASCII ranges of non-alphanumeric printable characters, or Unicode P*.
_PUNCTUATION = r"[\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E\p{P}]"
# What becomes a space: `_is_whitespace` (tab, newline, return, Zs) and the two characters that
# `str.split()` also splits on but that the original keeps through cleaning (neither Zs nor
# control): U+2028, U+2029. The space itself is left out (`[^\P{Zs} ]` is Zs but " "): replacing
# each of a text's many spaces by a space made this pass several times slower
# (docs/benchmarks.md, "Measurements behind the code").
_SPACES = r"[\t\n\r\x{2028}\x{2029}]|[^\P{Zs} ]"
_CJK_CHAR = "([" + "".join(f"\\x{{{low:X}}}-\\x{{{high:X}}}"
                            for low, high in tokenization.CJK_RANGES) + "])"


def basic_tokenize(texts, do_lower_case, repair_utf8=True):
  """Splits UTF-8 strings into basic tokens as `BasicTokenizer.tokenize` does.

  Args:
    texts: string Tensor of shape [batch_size]; invalid UTF-8 bytes are dropped like U+FFFD.
    do_lower_case: Python bool.
    repair_utf8: Python bool; False skips replacing invalid UTF-8 by U+FFFD (the first and
      costliest pass, docs/benchmarks.md), for texts known to be valid, such as
      Python strings encoded by `tf.constant`.

  Returns:
    string RaggedTensor [batch_size, (num_words)].
  """
  if repair_utf8:
    texts = tf.strings.unicode_transcode(
        texts, input_encoding="UTF-8", output_encoding="UTF-8", errors="replace",
        replacement_char=0xFFFD)
  texts = tf.strings.regex_replace(texts, _SPACES, " ")
  texts = tf.strings.regex_replace(texts, r"[\x00\x{FFFD}\p{Cc}\p{Cf}]", "")
  texts = tf.strings.regex_replace(texts, _CJK_CHAR, r" \1 ")
  if do_lower_case:
    texts = tf.strings.lower(texts, encoding="utf-8")
    texts = tf_text.normalize_utf8(texts, "NFD")
    texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
  # Each punctuation character a word of its own, then one split on spaces (after cleaning the
  # only whitespace left): faster than one `regex_split` on spaces and punctuation keeping the
  # punctuation (docs/benchmarks.md).
  texts = tf.strings.regex_replace(texts, f"({_PUNCTUATION})", r" \1 ")
  return tf.strings.split(texts)


class GraphTokenizer(tf.Module):
  """FullTokenizer as TensorFlow ops: raw UTF-8 strings in, word-piece ids out.

  The methods are `tf.function`s over string vectors of any length, traced once, so calling
  them eagerly batch after batch runs the compiled graph.

  Args:
    vocab_file: path of a `vocab.txt`, validated like `tokenization.load_vocab`.
    do_lower_case: lower-case and strip accents (uncased models).
    repair_utf8: see `basic_tokenize`; False only for texts known to be valid UTF-8.

  Example:
    >>> import tensorflow as tf
    >>> from data import graph_tokenization
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", ",", "world", "!"]
    >>> _ = open("vocab.txt", "w").write("\\n".join(vocab) + "\\n")
    >>> tokenizer = graph_tokenization.GraphTokenizer("vocab.txt", do_lower_case=True)
    >>> tokenizer.tokenize(tf.constant(["Hello, world!"]))
    <tf.RaggedTensor [[5, 6, 7, 8]]>
  """

  def __init__(self, vocab_file, do_lower_case=True, repair_utf8=True, name=None):
    super().__init__(name=name)
    vocab = tokenization.load_vocab(vocab_file)
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    self.repair_utf8 = repair_utf8
    self.vocab_size = len(vocab)
    self.unk_id = vocab["[UNK]"]
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=list(vocab), suffix_indicator="##",
        # A word of up to 200 characters has at most 800 UTF-8 bytes; longer words are replaced
        # by [UNK] before this tokenizer sees them, so its own byte limit never applies.
        max_bytes_per_word=4 * tokenization.MAX_INPUT_CHARS_PER_WORD,
        token_out_type=tf.int64, unknown_token="[UNK]", no_pretokenization=True,
        support_detokenization=False)

  def _basic_words(self, texts):
    """Basic tokens of `texts`: `(words, flat_words, too_long)`, the string RaggedTensor
    `[batch_size, (num_words)]`, its flat values with words over 200 characters replaced by
    "[UNK]" (what the WordPiece step sees), and bool `[num_words]` which were replaced."""
    words = basic_tokenize(texts, self.do_lower_case, self.repair_utf8)
    # The original maps a word of over 200 characters to a single [UNK]. "[UNK]" is itself a
    # vocab entry, so the longest-match search turns the literal string into exactly that id.
    too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > (
        tokenization.MAX_INPUT_CHARS_PER_WORD)
    return words, tf.where(too_long, "[UNK]", words.flat_values), too_long

  def _word_pieces(self, texts):
    """int64 RaggedTensor [batch_size, (num_words), (num_pieces)] of the word-piece ids of
    `texts`, word by word."""
    words, flat_words, _ = self._basic_words(texts)
    return words.with_flat_values(self._wordpiece.tokenize(flat_words))

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def tokenize_words(self, texts):
    """Tokenizes and keeps the word structure.

    Args:
      texts: string Tensor [batch_size].

    Returns:
      int64 RaggedTensor [batch_size, (num_words), (num_pieces)] of word-piece ids.
    """
    return self._word_pieces(texts)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def tokenize(self, texts):
    """Returns int64 RaggedTensor [batch_size, (num_pieces)] of word-piece ids of `texts`."""
    pieces = self._word_pieces(texts)
    # The pieces of text i: those of its words' pieces, `pieces.row_splits[i]` to `[i + 1]`.
    # Joined unvalidated: `merge_dims(1, 2)` checks the splits it is given with asserts in
    # `tf.cond`s, which took most of the time of tracing this function (docs/benchmarks.md).
    return tf.RaggedTensor.from_row_splits(
        pieces.flat_values, tf.gather(pieces.values.row_splits, pieces.row_splits),
        validate=False)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def tokenize_with_offsets(self, texts):
    """Tokenizes and says which characters of the normalised text each piece covers.

    The normalised text is the text's basic tokens (cleaned, and lower-cased and accent-stripped
    with `do_lower_case`) joined without spaces: the string in which
    `tasks.squad.postprocessing.final_text` locates a prediction. When normalising keeps the
    number of characters (`normalized_lengths` equals the number of the text's characters other
    than " ": most text), its characters are those characters, one for one.

    Args:
      texts: string Tensor [batch_size].

    Returns:
      dict `pieces`: int64 RaggedTensor [batch_size, (num_pieces)] of word-piece ids (those of
      `tokenize`); `starts`, `ends`: int64 RaggedTensors of the same shape, the first and
      one-past-the-last character of each piece in the normalised text (an `[UNK]` covers its
      whole basic token); `normalized_lengths`: int64 [batch_size], the normalised text's length.
    """
    words, flat_words, too_long = self._basic_words(texts)
    pieces, start_bytes, end_bytes = self._wordpiece.tokenize_with_offsets(flat_words)
    word_lengths = tf.strings.length(words.flat_values, unit="UTF8_CHAR", name="word_lengths")
    # Character offsets within each basic token, from the byte offsets within what WordPiece saw.
    piece_words = tf.repeat(flat_words, pieces.row_lengths())
    def characters_before(byte_offsets):
      return tf.cast(tf.strings.length(tf.strings.substr(piece_words, tf.zeros_like(byte_offsets),
                                                         byte_offsets),
                                       unit="UTF8_CHAR"), tf.int64)
    too_long = tf.repeat(too_long, pieces.row_lengths())
    piece_word_lengths = tf.cast(tf.repeat(word_lengths, pieces.row_lengths()), tf.int64)
    starts = tf.where(too_long, tf.zeros_like(piece_word_lengths),
                      characters_before(start_bytes.flat_values))
    ends = tf.where(too_long, piece_word_lengths, characters_before(end_bytes.flat_values))
    # Where each basic token starts in the normalised text: the lengths of the tokens before it.
    word_lengths = words.with_flat_values(tf.cast(word_lengths, tf.int64))
    word_starts = tf.RaggedTensor.from_tensor(
        tf.cumsum(word_lengths.to_tensor(), axis=1, exclusive=True),
        lengths=word_lengths.row_lengths()).flat_values
    piece_word_starts = tf.repeat(word_starts, pieces.row_lengths())
    def per_text(values):
      return words.with_flat_values(pieces.with_flat_values(values)).merge_dims(1, 2)
    return {"pieces": per_text(pieces.flat_values),
            "starts": per_text(piece_word_starts + starts),
            "ends": per_text(piece_word_starts + ends),
            "normalized_lengths": tf.reduce_sum(word_lengths, axis=1)}
