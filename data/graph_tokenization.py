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
# After cleaning only the space and the two characters that `str.split()` also splits on but that
# are neither Zs (mapped to a space) nor control characters (dropped) remain: U+2028, U+2029.
_WHITESPACE = r"[ \x{2028}\x{2029}]"
_CJK_CHAR = "([" + "".join(f"\\x{{{low:X}}}-\\x{{{high:X}}}"
                            for low, high in tokenization.CJK_RANGES) + "])"


def basic_tokenize(texts, do_lower_case):
  """Splits UTF-8 strings into basic tokens as `BasicTokenizer.tokenize` does.

  Args:
    texts: string Tensor of shape [batch_size]; invalid UTF-8 bytes are dropped like U+FFFD.
    do_lower_case: Python bool.

  Returns:
    string RaggedTensor [batch_size, (num_words)].
  """
  texts = tf.strings.unicode_transcode(
      texts, input_encoding="UTF-8", output_encoding="UTF-8", errors="replace",
      replacement_char=0xFFFD)
  texts = tf.strings.regex_replace(texts, r"[\t\n\r\p{Zs}]", " ")
  texts = tf.strings.regex_replace(texts, r"[\x00\x{FFFD}\p{Cc}\p{Cf}]", "")
  texts = tf.strings.regex_replace(texts, _CJK_CHAR, r" \1 ")
  if do_lower_case:
    texts = tf.strings.lower(texts, encoding="utf-8")
    texts = tf_text.normalize_utf8(texts, "NFD")
    texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
  return tf_text.regex_split(
      texts, delim_regex_pattern=f"{_WHITESPACE}|{_PUNCTUATION}",
      keep_delim_regex_pattern=_PUNCTUATION)


class GraphTokenizer(tf.Module):
  """FullTokenizer as TensorFlow ops: raw UTF-8 strings in, word-piece ids out.

  The methods are `tf.function`s over string vectors of any length, traced once, so calling
  them eagerly batch after batch runs the compiled graph.

  Args:
    vocab_file: path of a `vocab.txt`, validated like `tokenization.load_vocab`.
    do_lower_case: lower-case and strip accents (uncased models).

  Example:
    >>> tokenizer = GraphTokenizer("vocab.txt", do_lower_case=True)
    >>> tokenizer.tokenize(tf.constant(["Hello, world!"]))
    <tf.RaggedTensor [[7592, 1010, 2088, 999]]>
  """

  def __init__(self, vocab_file, do_lower_case=True, name=None):
    super().__init__(name=name)
    vocab = tokenization.load_vocab(vocab_file)
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    self.vocab_size = len(vocab)
    self.unk_id = vocab["[UNK]"]
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=list(vocab), suffix_indicator="##",
        # A word of up to 200 characters has at most 800 UTF-8 bytes; longer words are replaced
        # by [UNK] before this tokenizer sees them, so its own byte limit never applies.
        max_bytes_per_word=4 * tokenization.MAX_INPUT_CHARS_PER_WORD,
        token_out_type=tf.int64, unknown_token="[UNK]", no_pretokenization=True,
        support_detokenization=False)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def tokenize_words(self, texts):
    """Tokenizes and keeps the word structure.

    Args:
      texts: string Tensor [batch_size].

    Returns:
      int64 RaggedTensor [batch_size, (num_words), (num_pieces)] of word-piece ids.
    """
    words = basic_tokenize(texts, self.do_lower_case)
    # The original maps a word of over 200 characters to a single [UNK]. "[UNK]" is itself a
    # vocab entry, so the longest-match search turns the literal string into exactly that id.
    too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > (
        tokenization.MAX_INPUT_CHARS_PER_WORD)
    flat_words = tf.where(too_long, "[UNK]", words.flat_values)
    pieces = self._wordpiece.tokenize(flat_words)
    return words.with_flat_values(pieces)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def tokenize(self, texts):
    """Returns int64 RaggedTensor [batch_size, (num_pieces)] of word-piece ids of `texts`."""
    return self.tokenize_words(texts).merge_dims(1, 2)
