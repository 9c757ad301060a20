"""The original's instance layout on token ranges, packed into arrays with NumPy (the fast path).

`instances.create_instances` (the original, transcribed) builds every instance as
Python lists: A and B by extending lists segment by segment, truncation by deleting one token at
a time. Here the same algorithm, drawing the same words of the same `random.Random` in the same
order (a truncation's in one call, see `_truncate`), works on offsets: a shard's segments are
ranges of one id array (`Documents`), A and B are each a range of it (consecutive segments are
contiguous, and truncation only moves a range's ends), and `[CLS] A [SEP] B [SEP]` is gathered
with NumPy, 1,024 instances at a time. Same instances as the transcription without masking
(tested); faster than lists, and than a truncation loop drawing token by token
(docs/benchmarks.md, "Measurements behind the code").
"""

import bisect
import dataclasses

import numpy as np

from tasks.pretraining import batches
from tasks.pretraining import instances


@dataclasses.dataclass
class Documents:
  """A shard's tokenized documents, every segment (line) a range of one id array.

  Attributes:
    ids: int `[num_tokens]`, the segments' ids back to back.
    boundaries: one list per document of `num_segments + 1` increasing offsets into `ids`:
      segment `j` is `ids[b[j]:b[j + 1]]`. No segment or document is empty.
  """
  ids: np.ndarray
  boundaries: list

  @classmethod
  def from_lines(cls, ids, line_splits, lines_per_document):
    """Groups tokenized lines into documents, dropping lines without ids and documents left empty.

    Args:
      ids: int `[num_tokens]`, every line's ids back to back.
      line_splits: int `[num_lines + 1]`, line `i` is `ids[line_splits[i]:line_splits[i + 1]]`.
      lines_per_document: list of each document's number of lines, in order.

    Returns:
      a `Documents`.
    """
    document_splits = np.concatenate([[0], np.cumsum(lines_per_document)]).astype(np.int64)
    boundaries = []
    for first, end in zip(document_splits[:-1].tolist(), document_splits[1:].tolist()):
      # An empty line repeats its offset; dropping repeats drops it.
      offsets = np.unique(line_splits[first:end + 1]).tolist()
      if len(offsets) > 1:
        boundaries.append(offsets)
    return cls(ids=np.asarray(ids), boundaries=boundaries)

  def as_lists(self):
    """The documents as lists of segments, each a list of ids (the transcription's input)."""
    ids = self.ids.tolist()
    return [[ids[start:end] for start, end in zip(offsets[:-1], offsets[1:])]
            for offsets in self.boundaries]


@dataclasses.dataclass
class _Spans:
  """Instances as ranges of `Documents.ids`, in the order they were laid out: lists while
  `lay_out` appends to them, then (but `truncation_bits`) arrays, converted once for the many
  calls of `pack` that each take some of the rows."""
  a_start: list = dataclasses.field(default_factory=list)
  a_end: list = dataclasses.field(default_factory=list)
  b_start: list = dataclasses.field(default_factory=list)
  b_end: list = dataclasses.field(default_factory=list)
  is_random_next: list = dataclasses.field(default_factory=list)
  is_single_segment: list = dataclasses.field(default_factory=list)
  # Before truncation; the draws it takes, `_truncate` says how (0 when the pair fits).
  truncation_bits: list = dataclasses.field(default_factory=list)


def _randbelow(getrandbits, n):
  """A uniform int in `[0, n)`, n > 0, drawn as CPython's `random.Random` draws it for
  `randint(a, b)`, which is `a + _randbelow(b - a + 1)`: `n.bit_length()`-bit words until one is
  below `n`. Called directly it skips `randint`'s and `randrange`'s checks, which took a third
  of the layout's time; the layout's tests against the transcription (which calls `randint`)
  hold it to the same draws."""
  num_bits = n.bit_length()
  value = getrandbits(num_bits)
  while value >= n:
    value = getrandbits(num_bits)
  return value


def _lay_out_document(all_documents, document_index, max_num_tokens, short_seq_prob, rng, spans):
  """`create_instances_from_document` of the original, on ranges: appends to `spans`.

  Args:
    all_documents: list of `Documents.boundaries` entries, in the shuffled order.
    document_index: the document to cut.
    max_num_tokens: `max_seq_length - 3`.
    short_seq_prob: the flag.
    rng: `random.Random`, drawn from exactly as the transcription does.
    spans: a `_Spans`.

  Returns:
    whether the document's target length was drawn short.
  """
  bounds = all_documents[document_index]
  num_segments = len(bounds) - 1
  num_documents = len(all_documents)
  target_seq_length, is_short_target = instances.draw_target_length(
      max_num_tokens, short_seq_prob, rng)
  getrandbits, random = rng.getrandbits, rng.random
  chunk_first = 0
  i = 0
  while i < num_segments:
    if i == num_segments - 1 or bounds[i + 1] - bounds[chunk_first] >= target_seq_length:
      chunk_size = i + 1 - chunk_first
      a_segments = 1
      if chunk_size >= 2:
        a_segments = 1 + _randbelow(getrandbits, chunk_size - 1)
      a_start, a_end = bounds[chunk_first], bounds[chunk_first + a_segments]
      if chunk_size == 1 or random() < 0.5:
        is_random_next = True
        target_b_length = target_seq_length - (a_end - a_start)
        # `instances.draw_random_document`: up to 10 draws for another document.
        for _ in range(10):
          random_document_index = _randbelow(getrandbits, num_documents)
          if random_document_index != document_index:
            break
        random_bounds = all_documents[random_document_index]
        random_start = _randbelow(getrandbits, len(random_bounds) - 1)
        b_start = random_bounds[random_start]
        # The original extends B segment by segment until it reaches the target (or the
        # document's end): the first segment end at least that far.
        b_end = random_bounds[min(bisect.bisect_left(random_bounds, b_start + target_b_length,
                                                     random_start + 1),
                                  len(random_bounds) - 1)]
        # The segments not used for A go back, so they are not wasted.
        i -= chunk_size - a_segments
      else:
        is_random_next = False
        b_start, b_end = a_end, bounds[i + 1]
      # The original's truncate_seq_pair, one draw per token removed: its words, taken at once.
      excess = (a_end - a_start) + (b_end - b_start) - max_num_tokens
      spans.truncation_bits.append(getrandbits(64 * excess) if excess > 0 else 0)
      spans.a_start.append(a_start)
      spans.a_end.append(a_end)
      spans.b_start.append(b_start)
      spans.b_end.append(b_end)
      spans.is_random_next.append(is_random_next)
      spans.is_single_segment.append(chunk_size == 1)
      chunk_first = i + 1
    i += 1
  return is_short_target


def _truncate(spans, selected, max_num_tokens):
  """Some spans' A and B ranges after the original's `truncate_seq_pair`.

  The original removes one token at a time from the longer side (B on a tie) until the pair
  fits, from the side's front when `rng.random() < 0.5`, else from its back. Which side loses each
  token depends only on the two lengths: the longer side down to the other's length, then B, A,
  B, ... in turn; the draws only choose front or back. `random()` takes two 32-bit words and is
  below 0.5 exactly when the first is below 2**31. So the layout takes a pair's `2 * excess`
  words in one `getrandbits(64 * excess)` (the same words `excess` calls of `random()` take, the
  first in the lowest bits), and the removals of every instance are counted here at once. (A
  Python loop drew 206,000 times per WikiText-2 shard.)

  Args:
    spans: `_Spans` of the instances, before truncation.
    selected: int64 `[N]`, the indices of the instances to truncate.
    max_num_tokens: `max_seq_length - 3`.

  Returns:
    int64 `a_start, a_end, b_start, b_end`, each `[N]`.
  """
  a_start, a_end, b_start, b_end = (values[selected] for values in (
      spans.a_start, spans.a_end, spans.b_start, spans.b_end))
  a_length, b_length = a_end - a_start, b_end - b_start
  excess = np.maximum(a_length + b_length - max_num_tokens, 0)
  truncation_bits = spans.truncation_bits
  words = np.frombuffer(b"".join(
      truncation_bits[index].to_bytes(8 * count, "little")
      for index, count in zip(selected.tolist(), excess.tolist()) if count), "<u4")
  from_front = words[0::2] < (1 << 31)  # One per removal, in order.
  instance = np.repeat(np.arange(len(excess)), excess)
  step = np.arange(len(instance)) - np.repeat(np.cumsum(excess) - excess, excess)
  difference = np.abs(a_length - b_length)[instance]
  from_a = np.where(step < difference, (a_length > b_length)[instance],
                    (step - difference) % 2 == 1)
  # Per instance, the removals from B's back, B's front, A's back, A's front.
  removals = np.bincount(instance * 4 + from_a * 2 + from_front,
                         minlength=4 * len(excess)).reshape(-1, 4)
  return (a_start + removals[:, 3], a_end - removals[:, 2], b_start + removals[:, 1],
          b_end - removals[:, 0])


# Rows packed at once: bounds the temporaries (a few [rows, max_seq_length] int64 arrays) that
# would otherwise add tens of MB to a worker's peak.
_BLOCK_ROWS = 1024


@dataclasses.dataclass
class InstanceLayout:
  """A shard's instances as ranges of its `Documents.ids` (`lay_out`), before truncation.

  Attributes:
    spans: `_Spans` of the instances in the order they were laid out.
    order: int64 `[num_instances]`, the instances' indices in the order they are written (the
      original's final shuffle).
  """
  spans: _Spans
  order: np.ndarray


def lay_out(documents, dupe_factor, max_seq_length, short_seq_prob, rng, counts=None):
  """`instances.create_instances` without masking or packing: where each instance's A and B lie.

  Args:
    documents: a `Documents`.
    dupe_factor, max_seq_length, short_seq_prob: the flags.
    rng: `random.Random`; the same draws as the transcription's.
    counts: optional `collections.Counter`; gets `document_passes` and `short_target_passes`.

  Returns:
    an `InstanceLayout`, its `order` the original's final shuffle.
  """
  all_documents = list(documents.boundaries)
  rng.shuffle(all_documents)
  spans = _Spans()
  for _ in range(dupe_factor):
    for document_index in range(len(all_documents)):
      is_short_target = _lay_out_document(all_documents, document_index, max_seq_length - 3,
                                          short_seq_prob, rng, spans)
      if counts is not None:
        counts["document_passes"] += 1
        counts["short_target_passes"] += is_short_target
  # Shuffling the instances' indices draws exactly what shuffling the instances does.
  order = list(range(len(spans.a_start)))
  rng.shuffle(order)
  for name in ("a_start", "a_end", "b_start", "b_end"):
    setattr(spans, name, np.array(getattr(spans, name), np.int64))
  for name in ("is_random_next", "is_single_segment"):
    setattr(spans, name, np.array(getattr(spans, name), bool))
  return InstanceLayout(spans=spans, order=np.array(order, np.int64))


def ids_with_specials(ids, special_ids):
  """The ids `pack` gathers from: `ids` followed by [CLS], [SEP] and padding.

  Every position of a packed row gathers from them: one gather, not masked copies (callgrind:
  633 M -> 592 M instructions to lay out and pack a shard). Made once for every `pack` of a
  shard: a copy of its ids per call, hundreds of MB, would be faulted in anew each time.

  Args:
    ids: int `[num_tokens]`, the `Documents.ids` the layout was made on.
    special_ids: an `instances.SpecialIds`.

  Returns:
    int64 `[num_tokens + 3]`.
  """
  # int64 whatever the ids' int type: the specials are int64.
  return np.concatenate([ids, np.array([special_ids.cls_id, special_ids.sep_id, 0], np.int64)])


def pack(extended_ids, instance_layout, rows, max_seq_length, max_predictions_per_seq):
  """`[CLS] A [SEP] B [SEP]` of some of the laid-out instances, as an unmasked batch.

  Args:
    extended_ids: `ids_with_specials` of the `Documents.ids` the layout was made on.
    instance_layout: an `InstanceLayout`.
    rows: a slice of `instance_layout.order`: the instances to pack, in that order.
    max_seq_length, max_predictions_per_seq: the flags.

  Returns:
    a `batches.InstanceBatch` with empty `masked_lm_*` rows (for `masking.mask_batch`).
  """
  order = instance_layout.order[rows]
  spans = instance_layout.spans
  count = len(order)
  a_start, a_end, b_start, b_end = (values[:, None]
                                    for values in _truncate(spans, order, max_seq_length - 3))
  a_length, b_length = a_end - a_start, b_end - b_start
  lengths = a_length + b_length + 3
  # Every row is written below.
  input_ids = np.empty((count, max_seq_length), np.int64)
  segment_ids = np.empty((count, max_seq_length), np.int64)
  position = np.arange(max_seq_length)[None, :]
  cls_index, sep_index, pad_index = (len(extended_ids) - 3, len(extended_ids) - 2,
                                     len(extended_ids) - 1)

  def pack_rows(rows):
    row_a_length, row_length = a_length[rows], lengths[rows]
    source = np.where(position <= row_a_length, a_start[rows] - 1,
                      b_start[rows] - row_a_length - 2) + position
    source[:, 0] = cls_index
    source[(position == row_a_length + 1) | (position == row_length - 1)] = sep_index
    source[position >= row_length] = pad_index
    input_ids[rows] = extended_ids[source]
    segment_ids[rows] = (position >= row_a_length + 2) & (position < row_length)

  # Blocks write disjoint rows: on several threads with `batches.threads`.
  batches.map_in_order(pack_rows, ((slice(start, start + _BLOCK_ROWS),)
                                   for start in range(0, count, _BLOCK_ROWS)))
  return batches.InstanceBatch(
      input_ids=input_ids,
      segment_ids=segment_ids,
      lengths=lengths[:, 0],
      is_random_next=spans.is_random_next[order],
      is_single_segment=spans.is_single_segment[order],
      masked_lm_positions=np.zeros((count, max_predictions_per_seq), np.int64),
      masked_lm_ids=np.zeros((count, max_predictions_per_seq), np.int64),
      masked_lm_actions=np.zeros((count, max_predictions_per_seq), np.int8),
      num_predictions=np.zeros(count, np.int64))
