"""SQuAD v1.1 / v2.0 files (the official nested JSON) -> `SquadExample`s, as the original's
`read_squad_examples`: contexts split on whitespace (space, tab, CR, LF, U+202F) with a map from
characters to words; a training answer becomes a word span.

Differences from the original (see README): a training question with several answers (the dev
files' annotator answers) trains on the first one instead of stopping the run; an answer whose
`answer_start` does not point at its text in the context is an error naming the question (the
original silently read a wrong span); a file without `version` or `data` is an error.
"""

import dataclasses
import json

from absl import logging
import tensorflow as tf

from base import json_files
from data import file_patterns
from data import text_files
from data import tokenization

_EXTRA_WHITESPACE = "\u202f"


@dataclasses.dataclass
class SquadExample:
  """One question about one context.

  Attributes:
    qas_id: the question's `id`.
    question_text: the question.
    doc_tokens: the context split on whitespace.
    orig_answer_text: the training answer's text ("" for an unanswerable question; None when not
      training).
    start_position: index in `doc_tokens` of the answer's first word (-1 if unanswerable; None
      when not training).
    end_position: index of its last word (inclusive).
    is_impossible: SQuAD v2.0's unanswerable question.
  """
  qas_id: str
  question_text: str
  doc_tokens: list
  orig_answer_text: str = None
  start_position: int = None
  end_position: int = None
  is_impossible: bool = False


def _is_whitespace(char):
  return char in " \t\r\n" or char == _EXTRA_WHITESPACE


def split_context(context):
  """Splits a context on whitespace as the original.

  Args:
    context: the paragraph's text.

  Returns:
    `(doc_tokens, char_to_word_offset)`: the words, and for every character of `context` the index
    of the word it belongs to (whitespace maps to the word before it, -1 before the first word).
  """
  doc_tokens = []
  char_to_word_offset = []
  previous_is_whitespace = True
  for char in context:
    if _is_whitespace(char):
      previous_is_whitespace = True
    else:
      if previous_is_whitespace:
        doc_tokens.append(char)
      else:
        doc_tokens[-1] += char
      previous_is_whitespace = False
    char_to_word_offset.append(len(doc_tokens) - 1)
  return doc_tokens, char_to_word_offset


def load_dataset(path):
  """Reads a SQuAD file and checks its top level.

  Args:
    path: a JSON file with `version` and `data` (the list of articles).

  Returns:
    `(version, articles)`.

  Raises:
    file_patterns.InputError: unreadable or malformed JSON, or a missing `version` / `data`.
  """
  if not text_files.is_file(path):
    raise file_patterns.InputError(f"{path}: no such file")
  try:
    with text_files.open_text(path, encoding="utf-8") as f:
      dataset = json_files.loads(f.read())
  except tf.errors.OpError as e:
    raise file_patterns.InputError(f"{path}: cannot read: {e.message}") from e
  except UnicodeDecodeError:
    raise file_patterns.InputError(
        f"{path}: not valid JSON: {text_files.undecodable_problem(path)}") from None
  except json_files.MalformedJson as e:
    raise file_patterns.InputError(f"{path}: not valid JSON: {e}") from None
  if not isinstance(dataset, dict):
    raise file_patterns.InputError(f"{path}: expected a JSON object with 'version' and 'data'")
  for key in ("version", "data"):
    if key not in dataset:
      raise file_patterns.InputError(f"{path}: no {key!r} key; a SQuAD file is "
                                     "{\"version\": ..., \"data\": [articles]}")
  if not isinstance(dataset["data"], list):
    raise file_patterns.InputError(f"{path}: 'data' must be a list of articles")
  return str(dataset["version"]), dataset["data"]


_KIND_NAMES = {str: "a string", list: "a list", int: "an integer", bool: "true or false"}


def _field(record, key, where, kind, default=None):
  """`record[key]`, checked to be of type `kind` (a JSON object's value), else an InputError
  naming `where`; `default` (when given) stands for a missing key."""
  if not isinstance(record, dict):
    raise file_patterns.InputError(f"{where}: expected a JSON object, got {_shown(record)}")
  if key not in record:
    if default is not None:
      return default
    raise file_patterns.InputError(f"{where}: no {key!r}")
  value = record[key]
  if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
    kinds = kind if isinstance(kind, tuple) else (kind,)
    raise file_patterns.InputError(f"{where}: {key!r} must be "
                                   f"{' or '.join(_KIND_NAMES[k] for k in kinds)}, got "
                                   f"{_shown(value)}")
  return value


def _shown(value):
  text = json.dumps(value, ensure_ascii=False)
  return text if len(text) <= 40 else text[:37] + "..."


def _answer_span(path, qa, answer, context, doc_tokens, char_to_word_offset):
  """The word span of a training answer, or None when its text is not in those words."""
  where = f"{path}: question {qa['id']!r}"
  text = _field(answer, "text", where, str)
  start = _field(answer, "answer_start", where, int)
  if not (0 <= start and start + len(text) <= len(context)
          and text and context[start:start + len(text)] == text):
    raise file_patterns.InputError(
        f"{where}: answer {text!r} is not at answer_start {start} of its context (the context "
        f"there reads {context[start:start + len(text)]!r})")
  start_position = char_to_word_offset[start]
  end_position = char_to_word_offset[start + len(text) - 1]
  actual_text = " ".join(doc_tokens[start_position:end_position + 1])
  cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(text))
  # An answer of whitespace alone is in no word: the original "found" its empty text and trained
  # on the word before the whitespace (on word -1 before the first word).
  if not cleaned_answer_text or actual_text.find(cleaned_answer_text) == -1:
    return None
  return text, start_position, end_position


def read_examples(path, is_training, version_2_with_negative):
  """Reads the questions of a SQuAD file.

  Args:
    path: the JSON file.
    is_training: read answer spans (and skip questions whose answer cannot be recovered from the
      whitespace-split words, logging how many, as the original).
    version_2_with_negative: honour `is_impossible` (SQuAD v2.0).

  Returns:
    `(examples, articles)`: the list of `SquadExample` in file order, and the file's `data` (for
    the evaluation).

  Raises:
    file_patterns.InputError: malformed file; a training question without an answer when it is
      not marked impossible (or impossible without --version_2_with_negative); an answer whose
      offset does not match its context; a question id seen twice.
  """
  _, articles = load_dataset(path)
  examples = []
  seen_ids = set()
  num_skipped = 0
  for article_index, article in enumerate(articles):
    where = f"{path}: article {article_index}"
    for paragraph_index, paragraph in enumerate(_field(article, "paragraphs", where, list)):
      where = f"{path}: article {article_index} paragraph {paragraph_index}"
      context = _field(paragraph, "context", where, str)
      doc_tokens, char_to_word_offset = split_context(context)
      for qa in _field(paragraph, "qas", where, list):
        qas_id = _field(qa, "id", f"{where}: a question", (str, int))
        qas_id = str(qas_id)
        if qas_id in seen_ids:
          raise file_patterns.InputError(f"{path}: question id {qas_id!r} appears twice")
        seen_ids.add(qas_id)
        question_where = f"{path}: question {qas_id!r}"
        question = _field(qa, "question", question_where, str)
        example = SquadExample(qas_id, question, doc_tokens)
        if is_training:
          example.is_impossible = _field(qa, "is_impossible", question_where, bool, False)
          if example.is_impossible and not version_2_with_negative:
            raise file_patterns.InputError(
                f"{path}: question {qas_id!r} is unanswerable (is_impossible); train on it with "
                "--version_2_with_negative")
          if example.is_impossible:
            example.orig_answer_text, example.start_position, example.end_position = "", -1, -1
          else:
            answers = _field(qa, "answers", question_where, list, [])
            if not answers:
              raise file_patterns.InputError(
                  f"{path}: question {qas_id!r} has no answer and is not marked is_impossible")
            span = _answer_span(path, qa, answers[0], context, doc_tokens, char_to_word_offset)
            if span is None:
              num_skipped += 1
              continue
            example.orig_answer_text, example.start_position, example.end_position = span
        examples.append(example)
  if num_skipped:
    logging.warning("%s: skipped %d training question(s) whose answer text is not found in the "
                    "whitespace-split words around its offset", path, num_skipped)
  return examples, articles
