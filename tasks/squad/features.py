"""`SquadExample`s -> windows of word pieces (`SquadFeature`s) and their TFRecords, as the
original's `convert_examples_to_features`.

Each window is `[CLS] query [SEP] doc window [SEP]` (segments 0 then 1): the question truncated to
`max_query_length` pieces, the context's pieces in windows of `max_seq_length - len(query) - 3`
advancing by `doc_stride`. A training answer is re-aligned to the word pieces of its text; a
window that does not hold all of it, and an unanswerable question, point at `[CLS]` (position 0).
A piece in several windows is scored in the one where it has the most context on both sides.
"""

import dataclasses

import tensorflow as tf

from base import atomic_files
from base import progress
from data import schemas

FIRST_UNIQUE_ID = 1000000000


@dataclasses.dataclass
class SquadFeature:
  """One model input: a window of one example.

  Attributes:
    unique_id: the record's `unique_ids` (from 1000000000, as the original).
    example_index: index of its `SquadExample`.
    doc_span_index: index of the window among the example's windows.
    tokens: the word pieces, `[CLS]` to the last `[SEP]` (unpadded).
    token_to_orig_map: {position of a context piece: index of its whitespace word}.
    token_is_max_context: {position of a context piece: whether this window scores it}.
    input_ids, input_mask, segment_ids: `[max_seq_length]` ints.
    start_position, end_position: the answer's positions when training (0 for none), else None.
    is_impossible: the example is unanswerable.
  """
  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: list
  token_to_orig_map: dict
  token_is_max_context: dict
  input_ids: list
  input_mask: list
  segment_ids: list
  start_position: int = None
  end_position: int = None
  is_impossible: bool = False


@dataclasses.dataclass(frozen=True)
class DocSpan:
  """A window of the context's word pieces: `length` pieces from `start`."""
  start: int
  length: int


def doc_spans(num_pieces, max_tokens_for_doc, doc_stride):
  """The windows over `num_pieces` context pieces: each at most `max_tokens_for_doc` long, the
  next starting `min(length, doc_stride)` later, the last one ending at the last piece."""
  spans = []
  start = 0
  while start < num_pieces:
    length = min(num_pieces - start, max_tokens_for_doc)
    spans.append(DocSpan(start, length))
    if start + length == num_pieces:
      break
    start += min(length, doc_stride)
  return spans


def is_max_context(spans, span_index, position):
  """Whether window `span_index` is where piece `position` has the most context: the score
  `min(left, right) + 0.01 * window length`, the first window winning ties."""
  best_score, best_span_index = None, None
  for index, span in enumerate(spans):
    end = span.start + span.length - 1
    if not span.start <= position <= end:
      continue
    score = min(position - span.start, end - position) + 0.01 * span.length
    if best_score is None or score > best_score:
      best_score, best_span_index = score, index
  return span_index == best_span_index


def improve_answer_span(doc_pieces, start, end, tokenizer, answer_text):
  """The sub-span of pieces `[start, end]` that is exactly the answer's word pieces, if any.

  Whitespace words can hold more than the answer ("1895-1943" for "1895"); the answer's own
  tokenization finds the tighter span.

  Returns:
    `(start, end)` inclusive piece indices.
  """
  answer_pieces = " ".join(tokenizer.tokenize(answer_text))
  for new_start in range(start, end + 1):
    for new_end in range(end, new_start - 1, -1):
      if " ".join(doc_pieces[new_start:new_end + 1]) == answer_pieces:
        return new_start, new_end
  return start, end


def example_features(example, example_index, tokenizer, max_seq_length, doc_stride,
                     max_query_length, is_training, first_unique_id):
  """The windows of one example.

  Args:
    example: a `SquadExample`.
    example_index: its index (kept in each feature).
    tokenizer: a `FullTokenizer`.
    max_seq_length: model input length.
    doc_stride: how far a window starts after the previous one.
    max_query_length: question pieces kept.
    is_training: compute the answer positions.
    first_unique_id: unique id of the first window.

  Returns:
    list of `SquadFeature`.
  """
  query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
  piece_to_word = []
  word_to_first_piece = []
  doc_pieces = []
  for word_index, word in enumerate(example.doc_tokens):
    word_to_first_piece.append(len(doc_pieces))
    for piece in tokenizer.tokenize(word):
      piece_to_word.append(word_index)
      doc_pieces.append(piece)

  answer_start = answer_end = None
  if is_training and not example.is_impossible:
    answer_start = word_to_first_piece[example.start_position]
    if example.end_position < len(example.doc_tokens) - 1:
      answer_end = word_to_first_piece[example.end_position + 1] - 1
    else:
      answer_end = len(doc_pieces) - 1
    answer_start, answer_end = improve_answer_span(doc_pieces, answer_start, answer_end,
                                                   tokenizer, example.orig_answer_text)

  spans = doc_spans(len(doc_pieces), max_seq_length - len(query_tokens) - 3, doc_stride)
  doc_offset = len(query_tokens) + 2
  features = []
  for span_index, span in enumerate(spans):
    tokens = ["[CLS]"] + query_tokens + ["[SEP]"]
    token_to_orig_map = {}
    token_is_max_context = {}
    for piece_index in range(span.start, span.start + span.length):
      token_to_orig_map[len(tokens)] = piece_to_word[piece_index]
      token_is_max_context[len(tokens)] = is_max_context(spans, span_index, piece_index)
      tokens.append(doc_pieces[piece_index])
    tokens.append("[SEP]")
    segment_ids = [0] * doc_offset + [1] * (span.length + 1)
    padding = [0] * (max_seq_length - len(tokens))

    start_position = end_position = None
    if is_training:
      start_position = end_position = 0
      if (not example.is_impossible and answer_start >= span.start
          and answer_end <= span.start + span.length - 1):
        start_position = answer_start - span.start + doc_offset
        end_position = answer_end - span.start + doc_offset
    features.append(SquadFeature(
        unique_id=first_unique_id + span_index, example_index=example_index,
        doc_span_index=span_index, tokens=tokens, token_to_orig_map=token_to_orig_map,
        token_is_max_context=token_is_max_context,
        input_ids=tokenizer.convert_tokens_to_ids(tokens) + padding,
        input_mask=[1] * len(tokens) + padding, segment_ids=segment_ids + padding,
        start_position=start_position, end_position=end_position,
        is_impossible=example.is_impossible))
  return features


def convert_examples(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                     is_training):
  """Yields the windows of all examples, unique ids counting up from 1000000000, showing
  progress (a generator, so that a large training set is written without being held in memory).

  Yields:
    `SquadFeature`s in example order.
  """
  unique_id = FIRST_UNIQUE_ID
  bar = progress.Progress(total=len(examples), unit="questions")
  try:
    for example_index, example in enumerate(examples):
      features = example_features(example, example_index, tokenizer, max_seq_length, doc_stride,
                                  max_query_length, is_training, unique_id)
      unique_id += len(features)
      bar.update()
      yield from features
  finally:
    bar.close()


def to_tf_example(feature, is_training):
  """One window as the original's record: unique_ids, input_ids, input_mask, segment_ids, and
  when training start_positions, end_positions, is_impossible."""
  values = {
      "unique_ids": schemas.int64_feature([feature.unique_id]),
      "input_ids": schemas.int64_feature(feature.input_ids),
      "input_mask": schemas.int64_feature(feature.input_mask),
      "segment_ids": schemas.int64_feature(feature.segment_ids),
  }
  if is_training:
    values["start_positions"] = schemas.int64_feature([feature.start_position])
    values["end_positions"] = schemas.int64_feature([feature.end_position])
    values["is_impossible"] = schemas.int64_feature([int(feature.is_impossible)])
  return tf.train.Example(features=tf.train.Features(feature=values))


def write_records(path, features, is_training):
  """Writes windows to a TFRecord file (temporary name until complete).

  Args:
    path: the output file.
    features: iterable of `SquadFeature`.
    is_training: write the answer positions.

  Returns:
    the number of records written.
  """
  return atomic_files.write_tf_examples(
      path, (to_tf_example(feature, is_training) for feature in features))


def squad_feature_spec(max_seq_length, is_training):
  """Features of `run_squad.py`'s records; `is_impossible` is written but, as the original, not read."""
  spec = {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
  }
  if is_training:
    spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
    spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
  return spec
