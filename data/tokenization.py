"""WordPiece tokenization with exactly the original release's semantics (`tokenization.py`).

`FullTokenizer` = `BasicTokenizer` (clean text, space CJK ideographs, optional lower-case + NFD +
accent strip, split on whitespace and punctuation) followed by `WordpieceTokenizer` (greedy
longest-match-first with `##` continuations, `[UNK]` for unmatched words and words over 200
characters). This pure-Python path is the reference; `data/graph_tokenization.py` gives the same
ids inside TensorFlow graphs and is the fast path.
"""

import codecs
import collections
import re
import unicodedata

import tensorflow as tf

from base import errors

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# The original's eight CJK Unified Ideograph ranges (`_is_chinese_char`). Hangul, Hiragana and
# Katakana are not among them: those scripts are written with spaces.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

MAX_INPUT_CHARS_PER_WORD = 200

# Released checkpoints whose directory name fixes the casing (`validate_case_matches_checkpoint`).
_LOWER_CASED_MODELS = ("uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                       "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12")
_CASED_MODELS = ("cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                 "multi_cased_L-12_H-768_A-12")


class VocabError(errors.UserError, ValueError):
  """A vocabulary file is missing, empty, or lacks what BERT needs, or its casing contradicts the
  checkpoint's."""


def convert_to_unicode(text):
  """Returns `text` as `str`, decoding bytes as UTF-8 with U+FFFD for undecodable bytes.

  The original raised on undecodable bytes; here they become U+FFFD, which text cleaning then
  drops, so one bad byte in a corpus does not stop a run. Callers that read files count the
  replacements (see `data.text_files`).
  """
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    return text.decode("utf-8", "replace")
  raise ValueError(f"unsupported string type: {type(text)}")


def load_vocab(vocab_file, required_tokens=SPECIAL_TOKENS):
  """Loads a vocabulary file: one token per line, id = line index, surrounding whitespace stripped.

  A UTF-8 byte-order mark at the start is dropped (editors on Windows add one). The original,
  HuggingFace's `load_vocab` and its `tokenizers` keep it as part of the first token
  (`"\ufeff[PAD]"`), which no text can produce (tokenization deletes U+FEFF, a format
  character); dropping it changes no id and lets `[PAD]` be found.

  Args:
    vocab_file: path of a `vocab.txt`.
    required_tokens: tokens that must be present.

  Returns:
    OrderedDict of token -> id.

  Raises:
    VocabError: the file is missing, unreadable (a directory) or empty, holds a duplicate token,
      or lacks a required token.
  """
  if not tf.io.gfile.exists(vocab_file):
    raise VocabError(f"{vocab_file}: vocab file does not exist")
  vocab = collections.OrderedDict()
  try:
    with tf.io.gfile.GFile(vocab_file, "rb") as reader:
      # Read whole (a vocab is small): line by line through the file API took twice as long.
      lines = reader.read().removeprefix(codecs.BOM_UTF8).split(b"\n")
  except tf.errors.OpError as error:
    raise VocabError(f"{vocab_file}: cannot read vocab file: {error.message}") from None
  if lines[-1] == b"":
    lines.pop()
  for line_number, line in enumerate(lines, start=1):
    token = convert_to_unicode(line).strip()
    if token in vocab:
      raise VocabError(f"{vocab_file}:{line_number}: duplicate vocab entry {token!r} "
                       f"(first at line {vocab[token] + 1})")
    vocab[token] = len(vocab)
  if not vocab:
    raise VocabError(f"{vocab_file}: vocab file is empty")
  missing = [token for token in required_tokens if token not in vocab]
  if missing:
    raise VocabError(f"{vocab_file}: vocab lacks required token(s) {', '.join(missing)}")
  return vocab


def convert_by_vocab(vocab, items):
  """Maps each item through `vocab` (tokens -> ids or ids -> tokens)."""
  return [vocab[item] for item in items]


def whitespace_tokenize(text):
  """Strips and splits `text` on whitespace (Python's `str.split()`)."""
  return text.split()


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
  """Raises if `do_lower_case` contradicts a released checkpoint recognisable by its path.

  Only the seven released model names are recognised (path `<name>/bert_model.ckpt`), as in the
  original; any other checkpoint passes.
  """
  if not init_checkpoint:
    return
  match = re.match(r"^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
  if match is None:
    return
  model_name = match.group(1)
  if model_name in _LOWER_CASED_MODELS and not do_lower_case:
    actual_flag, case_name, opposite_flag = "False", "lowercased", "True"
  elif model_name in _CASED_MODELS and do_lower_case:
    actual_flag, case_name, opposite_flag = "True", "cased", "False"
  else:
    return
  raise VocabError(
      f"You passed in `--do_lower_case={actual_flag}` with `--init_checkpoint={init_checkpoint}`. "
      f"However, `{model_name}` seems to be a {case_name} model, so you should pass in "
      f"`--do_lower_case={opposite_flag}` so that the fine-tuning matches how the model was "
      "pre-training. If this error is wrong, please just comment out this check.")


class FullTokenizer:
  """End-to-end tokenization: `BasicTokenizer` then `WordpieceTokenizer`.

  Args:
    vocab_file: path of a `vocab.txt` with `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]` and `[MASK]`.
    do_lower_case: lower-case and strip accents (uncased models).

  Example:
    >>> from data import tokenization
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", ",", "world", "!"]
    >>> _ = open("vocab.txt", "w").write("\\n".join(vocab) + "\\n")
    >>> tokenizer = tokenization.FullTokenizer("vocab.txt", do_lower_case=True)
    >>> tokenizer.tokenize("Hello, world!")
    ['hello', ',', 'world', '!']
  """

  def __init__(self, vocab_file, do_lower_case=True):
    self.vocab = load_vocab(vocab_file)
    self.inv_vocab = {token_id: token for token, token_id in self.vocab.items()}
    self.do_lower_case = do_lower_case
    self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

  def tokenize(self, text):
    """Returns the list of word-piece strings of `text`."""
    split_tokens = []
    for token in self.basic_tokenizer.tokenize(text):
      split_tokens.extend(self.wordpiece_tokenizer.tokenize(token))
    return split_tokens

  def convert_tokens_to_ids(self, tokens):
    return convert_by_vocab(self.vocab, tokens)

  def convert_ids_to_tokens(self, ids):
    return convert_by_vocab(self.inv_vocab, ids)


class BasicTokenizer:
  """Cleans text, spaces CJK ideographs, optionally lower-cases and strips accents, splits words.

  Args:
    do_lower_case: `str.lower()` + NFD + drop Mn marks on each whitespace token. Cased
      tokenization leaves accents and case untouched.
  """

  def __init__(self, do_lower_case=True):
    self.do_lower_case = do_lower_case

  def tokenize(self, text):
    """Returns the list of basic tokens (words and single punctuation marks) of `text`."""
    text = convert_to_unicode(text)
    text = self._clean_text(text)
    text = self._tokenize_chinese_chars(text)
    split_tokens = []
    for token in whitespace_tokenize(text):
      if self.do_lower_case:
        token = _strip_accents(token.lower())
      split_tokens.extend(_split_on_punctuation(token))
    return whitespace_tokenize(" ".join(split_tokens))

  @staticmethod
  def _tokenize_chinese_chars(text):
    """Puts a space on each side of every CJK ideograph."""
    output = []
    for char in text:
      if is_chinese_char(ord(char)):
        output.extend((" ", char, " "))
      else:
        output.append(char)
    return "".join(output)

  @staticmethod
  def _clean_text(text):
    """Drops NUL, U+FFFD and control characters; maps every whitespace character to a space."""
    output = []
    for char in text:
      code_point = ord(char)
      if code_point == 0 or code_point == 0xFFFD or is_control(char):
        continue
      output.append(" " if is_whitespace(char) else char)
    return "".join(output)


def _strip_accents(text):
  """NFD-decomposes `text` and drops the non-spacing marks (category Mn)."""
  return "".join(char for char in unicodedata.normalize("NFD", text)
                 if unicodedata.category(char) != "Mn")


def _split_on_punctuation(text):
  """Splits `text` so that every punctuation character is a token of its own."""
  output = []
  start_new_word = True
  for char in text:
    if is_punctuation(char):
      output.append([char])
      start_new_word = True
    else:
      if start_new_word:
        output.append([])
      start_new_word = False
      output[-1].append(char)
  return ["".join(chars) for chars in output]


class WordpieceTokenizer:
  """Greedy longest-match-first WordPiece over one basic token at a time.

  Args:
    vocab: dict of word piece -> id; continuation pieces carry the `##` prefix.
    unk_token: token for a word that cannot be covered by pieces.
    max_input_chars_per_word: longer words become `unk_token`.
  """

  def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word

  def tokenize(self, text):
    """Returns the word pieces of every whitespace-separated word of `text`.

    Example: "unaffable" -> ["un", "##aff", "##able"].
    """
    text = convert_to_unicode(text)
    output_tokens = []
    for token in whitespace_tokenize(text):
      if len(token) > self.max_input_chars_per_word:
        output_tokens.append(self.unk_token)
        continue
      sub_tokens = []
      start = 0
      while start < len(token):
        end = len(token)
        current_piece = None
        while start < end:
          piece = token[start:end]
          if start > 0:
            piece = "##" + piece
          if piece in self.vocab:
            current_piece = piece
            break
          end -= 1
        if current_piece is None:
          sub_tokens = [self.unk_token]
          break
        sub_tokens.append(current_piece)
        start = end
      output_tokens.extend(sub_tokens)
    return output_tokens


def is_whitespace(char):
  """Space, tab, newline, carriage return, or Unicode category Zs."""
  if char in (" ", "\t", "\n", "\r"):
    return True
  return unicodedata.category(char) == "Zs"


def is_control(char):
  """Unicode Cc/Cf, except tab, newline and carriage return (which count as whitespace)."""
  if char in ("\t", "\n", "\r"):
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
  """ASCII non-alphanumeric printable characters, or Unicode category P*."""
  code_point = ord(char)
  if (33 <= code_point <= 47 or 58 <= code_point <= 64 or 91 <= code_point <= 96
      or 123 <= code_point <= 126):
    return True
  return unicodedata.category(char).startswith("P")


def is_chinese_char(code_point):
  """Whether `code_point` is in one of the original's CJK Unified Ideograph ranges."""
  return any(low <= code_point <= high for low, high in CJK_RANGES)
