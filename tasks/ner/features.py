"""CoNLL sentences -> windows of word pieces with first-piece labels, and their TFRecords.

Each word becomes its word pieces; the first piece carries the word's label, the other pieces,
`[CLS]`, `[SEP]`, context and padding carry -1 (ignored by the loss and the metrics). A sentence
longer than `max_seq_length - 2` pieces is split at word boundaries into several windows, so every
word is labelled in exactly one window and gets exactly one prediction; nothing is truncated except
the extra pieces of a single word longer than a whole window (its first piece is kept). With
`doc_context`, a sentence that fits is surrounded by the pieces of its neighbours in the same
document (unlabelled), the setting of the BERT paper's CoNLL-2003 results.
"""

import dataclasses

import tensorflow as tf

from base import atomic_files
from base import progress
from data import file_patterns
from data import schemas

IGNORED_LABEL = -1


@dataclasses.dataclass
class Window:
  """One model input.

  Attributes:
    pieces: word pieces between `[CLS]` and `[SEP]`.
    labelled: list of `(piece_index, sentence_index, word_index)`, one per word labelled here.
  """
  pieces: list
  labelled: list


def word_pieces(sentences, tokenizer):
  """Per sentence, per word: its word pieces (`[UNK]` for a word that tokenizes to nothing)."""
  return [[tokenizer.tokenize(word) or ["[UNK]"] for word in sentence.words]
          for sentence in sentences]


def _context(sentences, pieces, index, budget):
  """(left, right) pieces of the neighbours of sentence `index` in its document, `budget` total,
  split evenly while both sides have pieces."""
  document = sentences[index].document
  left, right = [], []
  before = index - 1
  while before >= 0 and sentences[before].document == document and len(left) < budget:
    left = [p for word in pieces[before] for p in word] + left
    before -= 1
  after = index + 1
  while after < len(sentences) and sentences[after].document == document and len(right) < budget:
    right += [p for word in pieces[after] for p in word]
    after += 1
  num_left = min(len(left), budget // 2)
  num_right = min(len(right), budget - num_left)
  num_left = min(len(left), budget - num_right)
  return left[len(left) - num_left:], right[:num_right]


def make_windows(sentences, tokenizer, max_seq_length, doc_context=False):
  """Splits sentences into model inputs.

  Args:
    sentences: list of `reader.Sentence`.
    tokenizer: a `FullTokenizer`.
    max_seq_length: length of the inputs, `[CLS]` and `[SEP]` included.
    doc_context: fill windows with neighbouring sentences of the same document.

  Returns:
    list of `Window`, in sentence order; every word of every sentence labelled exactly once.
  """
  budget = max_seq_length - 2
  pieces = word_pieces(sentences, tokenizer)
  windows = []
  for sentence_index, sentence_pieces in enumerate(pieces):
    current = Window([], [])
    for word_index, word in enumerate(sentence_pieces):
      word = word[:budget]
      if current.pieces and len(current.pieces) + len(word) > budget:
        windows.append(current)
        current = Window([], [])
      current.labelled.append((len(current.pieces), sentence_index, word_index))
      current.pieces.extend(word)
    if doc_context and not (windows and windows[-1].labelled[0][1] == sentence_index):
      left, right = _context(sentences, pieces, sentence_index, budget - len(current.pieces))
      current = Window(left + current.pieces + right,
                       [(position + len(left), s, w) for position, s, w in current.labelled])
    windows.append(current)
  return windows


def to_tf_example(window, sentences, tokenizer, max_seq_length, label_to_index):
  """One window as a `tf.train.Example`: input_ids, input_mask, segment_ids, label_ids (-1 where
  ignored), all `[max_seq_length]`."""
  tokens = ["[CLS]"] + window.pieces + ["[SEP]"]
  padding = [0] * (max_seq_length - len(tokens))
  label_ids = [IGNORED_LABEL] * max_seq_length
  for piece_index, sentence_index, word_index in window.labelled:
    sentence = sentences[sentence_index]
    if sentence.tags is None:
      label_ids[piece_index + 1] = 0
      continue
    tag = sentence.tags[word_index]
    if tag not in label_to_index:
      raise file_patterns.InputError(
          f"{sentence.source}: word {word_index + 1} ({sentence.words[word_index]!r}) has tag "
          f"{tag!r}, which is not in the label list {list(label_to_index)}")
    label_ids[piece_index + 1] = label_to_index[tag]
  return tf.train.Example(features=tf.train.Features(feature={
      "input_ids": schemas.int64_feature(tokenizer.convert_tokens_to_ids(tokens) + padding),
      "input_mask": schemas.int64_feature([1] * len(tokens) + padding),
      "segment_ids": schemas.int64_feature([0] * max_seq_length),
      "label_ids": schemas.int64_feature(label_ids),
  }))


def write_records(path, windows, sentences, tokenizer, max_seq_length, label_list):
  """Writes the windows to a TFRecord file (temporary name until complete); returns their count.

  Raises:
    file_patterns.InputError: a tag not in `label_list`, naming the file and line.
  """
  label_to_index = {label: index for index, label in enumerate(label_list)}
  bar = progress.Progress(total=len(windows), unit="windows")

  def tf_examples():
    for window in windows:
      yield to_tf_example(window, sentences, tokenizer, max_seq_length, label_to_index)
      bar.update()

  try:
    return atomic_files.write_tf_examples(path, tf_examples())
  finally:
    bar.close()


def predicted_tags(windows, sentences, predicted_ids, label_list):
  """Maps the predictions of the windows back to one tag per word of every sentence.

  Args:
    windows: from `make_windows`.
    sentences: the sentences they were made from.
    predicted_ids: int `[num_windows, max_seq_length]` label ids (position 0 is `[CLS]`).
    label_list: label names.

  Returns:
    list aligned with `sentences` of lists with one tag per word.
  """
  tags = [[None] * len(sentence.words) for sentence in sentences]
  for window, row in zip(windows, predicted_ids, strict=True):
    for piece_index, sentence_index, word_index in window.labelled:
      tags[sentence_index][word_index] = label_list[int(row[piece_index + 1])]
  return tags


def tagging_feature_spec(max_seq_length):
  """Features of `run_ner.py`'s records (not in the original, which had no NER runner):
  `label_ids` `[max_seq_length]`, -1 where no label applies."""
  return {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
          for name in ("input_ids", "input_mask", "segment_ids", "label_ids")}
