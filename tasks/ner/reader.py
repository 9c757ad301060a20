"""CoNLL column files: reading sentences and documents, writing predictions beside the input.

A line holds a token first and its tag last, separated by spaces or tabs (other columns, such as
CoNLL-2003's part-of-speech and chunk tags, are kept but unused); a blank line ends a sentence; a
`-DOCSTART-` line starts a document and is not a sentence. Tags may be IOB1, IOB2 or IOBES.
"""

import dataclasses
import re

from absl import logging

from base import atomic_files
from data import file_patterns
from data import text_files

DOCSTART = "-DOCSTART-"
_TAG_PATTERN = re.compile(r"^(O|[BIES]-\S+)$")


@dataclasses.dataclass
class Sentence:
  """One sentence of a CoNLL file.

  Attributes:
    words: the tokens.
    tags: their tags, or None when the file has only the token column.
    lines: the input line (without its newline) of each word, rewritten by `write_predictions`.
    document: index of the `-DOCSTART-` document it belongs to (0 when the file has none).
    source: `path:line` of its first word, named in errors.
  """
  words: list
  tags: list
  lines: list
  document: int
  source: str


def read_sentences(path, require_tags=True):
  """Reads a CoNLL file.

  Args:
    path: the file.
    require_tags: every line must have a tag column (training and evaluation files); otherwise a
      file with the token column only is accepted and its sentences have `tags` None.

  Returns:
    `(sentences, layout)`: list of `Sentence`; `layout` the list of entries of the file, each a
    sentence index or the text of a `-DOCSTART-` line, for `write_predictions`.

  Raises:
    file_patterns.InputError: missing or empty file, a line whose number of columns differs from
      the file's first line, a tag that is not O / B- / I- / E- / S-.
  """
  if not text_files.is_file(path):
    raise file_patterns.InputError(f"{path}: no such file")
  sentences, layout = [], []
  num_columns, document = None, 0
  words, tags, lines, start = [], [], [], None

  def end_sentence():
    nonlocal words, tags, lines
    if words:
      layout.append(len(sentences))
      sentences.append(Sentence(words, tags if num_columns > 1 else None, lines, document,
                                f"{path}:{start}"))
    words, tags, lines = [], [], []

  decode_stats = text_files.DecodeStats()
  for line_number, line in enumerate(text_files.read_lines(path, decode_stats), 1):
    if line_number == 1:
      line = line.removeprefix("\ufeff")
    columns = line.split()
    if not columns:
      end_sentence()
      continue
    if columns[0] == DOCSTART:
      end_sentence()
      if sentences or layout:
        document += 1
      layout.append(line)
      continue
    if num_columns is None:
      num_columns = len(columns)
      if num_columns < 2 and require_tags:
        raise file_patterns.InputError(
            f"{path}:{line_number}: expected a token and a tag, found 1 column")
    elif len(columns) != num_columns:
      raise file_patterns.InputError(
          f"{path}:{line_number}: expected {num_columns} columns (as line 1 of the data), "
          f"found {len(columns)}: {line!r}")
    if num_columns > 1 and not _TAG_PATTERN.match(columns[-1]):
      raise file_patterns.InputError(
          f"{path}:{line_number}: tag {columns[-1]!r} is not O, B-<type>, I-<type>, "
          "E-<type> or S-<type>")
    if not words:
      start = line_number
    words.append(columns[0])
    tags.append(columns[-1])
    lines.append(line)
  end_sentence()
  if not sentences:
    raise file_patterns.InputError(f"{path}: holds no sentence")
  if decode_stats.undecodable_lines:
    logging.warning("%s: %d of %d lines are not valid UTF-8; their bad bytes were replaced by "
                    "U+FFFD, which tokenization drops", path, decode_stats.undecodable_lines,
                    decode_stats.lines)
  return sentences, layout


def write_predictions(path, sentences, layout, predicted_tags):
  """Writes the input lines with the predicted tag appended (what conlleval scores), atomically.

  Args:
    path: the output file.
    sentences, layout: from `read_sentences`.
    predicted_tags: list aligned with `sentences` of lists with one tag per word.
  """
  with atomic_files.open_for_writing(path) as f:
    for entry in layout:
      if isinstance(entry, str):
        f.write(f"{entry} O\n\n")
        continue
      sentence = sentences[entry]
      for line, tag in zip(sentence.lines, predicted_tags[entry], strict=True):
        f.write(f"{line} {tag}\n")
      f.write("\n")
