"""Masked-LM masking of a shard's rows with NumPy, a block at a time: the original's
distribution, fast.

The original (`instances.create_masked_lm_predictions`) shuffles each sequence's
candidate words and walks them in that order, taking a word when it still fits the budget
`min(max_predictions_per_seq, max(1, round(length * masked_lm_prob)))` and skipping it when it
would overflow, then replaces each taken position by `[MASK]` (0.8), itself (0.1) or a random id
(0.1). Here every row gets a uniformly random word order (argsort of uniform keys) and the same
take-or-skip walk runs rank by rank across all rows of a block at once. Same distribution; not
the same instances for a seed, since the draws come from NumPy generators (one per block of
rows), not `random.Random`.
"""

import dataclasses
import itertools

import numpy as np

from tasks.pretraining import batches
from tasks.pretraining import instances

# Rows masked with one generator (`block_generators`): a shard's instances shared between workers
# are cut at multiples of it, so they are masked as the whole shard is.
BLOCK_ROWS = 1024

_MASK, _RANDOM, _KEEP = (batches.ACTIONS.index(action) for action in (
    instances.MASK, instances.RANDOM, instances.KEEP))


def block_generators(random_seed, shard_index, first_block=0):
  """The masking generators of one shard's blocks of `BLOCK_ROWS` rows, from `first_block` on.

  Block `b`'s generator comes from (random_seed, shard_index, b) alone: the output depends
  neither on which worker masks which shard nor on how a shard's rows are shared between them.

  Yields:
    a `np.random.Generator` per block, in order.
  """
  # SeedSequence wants non-negative entropy; `% 2**64` keeps distinct int64 seeds distinct. The
  # spawn key `(0, b)` is not packing's `(1,)` (`packing.seeded_generator`).
  entropy = [random_seed % 2 ** 64, shard_index]
  for block in itertools.count(first_block):
    yield np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy,
                                                                     spawn_key=(0, block))))


def _words(input_ids, lengths, special_ids, do_whole_word_mask):
  """Candidate positions and the word each belongs to.

  Args:
    input_ids: int `[num_rows, seq_length]`, unmasked, 0-padded.
    lengths: int `[num_rows]`.
    special_ids: an `instances.SpecialIds`.
    do_whole_word_mask: a `##` piece joins the previous candidate word (as the original: the
      previous candidate, even across a `[SEP]`).

  Returns:
    `(candidate, word_of_position)`: bool `[num_rows, seq_length]`, and int `[num_rows,
    seq_length]` numbering each row's words 0, 1, ... (meaningful where `candidate`).
  """
  real = np.arange(input_ids.shape[1]) < lengths[:, None]
  candidate = real & (input_ids != special_ids.cls_id) & (input_ids != special_ids.sep_id)
  starts = candidate
  if do_whole_word_mask:
    is_continuation = np.asarray(special_ids.is_continuation, bool)[input_ids]
    has_earlier_candidate = np.cumsum(candidate, axis=1) > candidate
    starts = candidate & ~(is_continuation & has_earlier_candidate)
  return candidate, np.cumsum(starts, axis=1) - 1


def _choose_in_rows(input_ids, lengths, keys, masked_lm_prob, max_predictions_per_seq,
                    special_ids, do_whole_word_mask):
  """Which positions each of some rows predicts, by the original's rule (see the module
  docstring).

  Args:
    input_ids: int `[num_rows, seq_length]`, unmasked, 0-padded.
    lengths: int `[num_rows]`, real tokens per row.
    keys: float `[num_rows, seq_length]`, uniform on [0, 1); overwritten.
    masked_lm_prob, max_predictions_per_seq: the flags.
    special_ids: an `instances.SpecialIds`.
    do_whole_word_mask: mask whole words (see `_words`).

  Returns:
    bool `[num_rows, seq_length]`, True at the predicted positions.
  """
  num_rows, seq_length = input_ids.shape
  candidate, word_of_position = _words(input_ids, lengths, special_ids, do_whole_word_mask)
  num_words = word_of_position[:, -1] + 1
  # Slots past a row's last word sort last, so ranks 0..num_words-1 are a uniform order of them.
  is_word = np.arange(seq_length) < num_words[:, None]
  keys[~is_word] = 2.0
  num_to_predict = np.minimum(max_predictions_per_seq,
                              np.maximum(1, np.round(lengths * masked_lm_prob)).astype(np.int64))
  if do_whole_word_mask:
    order = np.argsort(keys, axis=1)
    rows, columns = np.nonzero(candidate)
    word_lengths = np.bincount(rows * seq_length + word_of_position[rows, columns],
                               minlength=num_rows * seq_length).reshape(num_rows, seq_length)
    ranked_lengths = word_lengths.ravel()[_flat_in_rows(order)]
    taken_ranked = np.zeros((num_rows, seq_length), bool)
    num_taken = np.zeros(num_rows, np.int64)
    for rank in range(int(num_words.max(initial=0))):
      length = ranked_lengths[:, rank]
      # A word that would overflow is skipped, and later (shorter) words may still fit.
      take = (length > 0) & (num_taken + length <= num_to_predict)
      num_taken += np.where(take, length, 0)
      taken_ranked[:, rank] = take
    taken_words = np.zeros((num_rows, seq_length), bool)
    taken_words.ravel()[_flat_in_rows(order)] = taken_ranked
  else:
    # One-piece words: the walk takes the num_to_predict of smallest key, those up to the
    # num_to_predict-th smallest, found by sorting only the max_predictions_per_seq smallest
    # (a full argsort of the keys took a third of the masking).
    depth = min(max_predictions_per_seq, seq_length)
    smallest = np.sort(np.partition(keys, depth - 1, axis=1)[:, :depth], axis=1)
    threshold = smallest[np.arange(num_rows), np.minimum(num_to_predict, depth) - 1]
    taken_words = is_word & (keys <= threshold[:, None])
  return candidate & taken_words.ravel()[_flat_in_rows(np.maximum(word_of_position, 0))]


def _flat_in_rows(columns):
  """Flat indices of `columns` (int `[num_rows, width]`, each row's column indices) into a C-order
  `[num_rows, width]` array: indexing with them does `np.take_along_axis(..., axis=1)` (or its
  `put`) in a third of the instructions (callgrind: 2.3 M against 7.0 M for 1,024 x 128)."""
  return columns + (np.arange(len(columns)) * columns.shape[1])[:, None]


def mask_batch(batch, masked_lm_prob, max_predictions_per_seq, special_ids, do_whole_word_mask,
               generators, in_place=False):
  """Masks an unmasked `batches.InstanceBatch`, `BLOCK_ROWS` rows at a time.

  Args:
    batch: an `InstanceBatch` with `num_predictions` all 0.
    masked_lm_prob, max_predictions_per_seq: the flags.
    special_ids: an `instances.SpecialIds`.
    do_whole_word_mask: mask whole words.
    generators: iterator of `np.random.Generator`, one per block of rows, in order
      (`block_generators`).
    in_place: mask `batch.input_ids` itself instead of a copy (a shard-sized copy, mostly
      faulting in new pages), for a caller that keeps no unmasked batch.

  Returns:
    a new `InstanceBatch` with masked `input_ids` and the `masked_lm_*` fields filled in.
  """
  input_ids = batch.input_ids if in_place else batch.input_ids.copy()
  num_rows, seq_length = input_ids.shape
  width = (num_rows, max_predictions_per_seq)
  positions, ids, codes = (np.zeros(width, np.int64), np.zeros(width, np.int64),
                           np.zeros(width, np.int8))
  num_predictions = np.zeros(num_rows, np.int64)

  def mask_rows(rows, generator):
    # Slices of rows of C-ordered arrays: views that `np.put` writes through, flat indices in
    # row-major order.
    block_ids = input_ids[rows]
    masked = _choose_in_rows(block_ids, batch.lengths[rows], generator.random(block_ids.shape),
                             masked_lm_prob, max_predictions_per_seq, special_ids,
                             do_whole_word_mask)
    # Flat indices, row-major: each row's positions come sorted. (Indexing with them is several
    # times faster than with (row, column) pairs: docs/benchmarks.md.)
    flat = np.flatnonzero(masked)
    block_rows, columns = np.divmod(flat, seq_length)
    row_predictions = masked.sum(axis=1)
    first_of_row = np.cumsum(row_predictions) - row_predictions
    slots = (block_rows * max_predictions_per_seq + np.arange(len(flat))
             - first_of_row[block_rows])
    labels = block_ids.ravel()[flat]
    draws = generator.random(len(flat))
    actions = np.where(draws < 0.8, _MASK, np.where(draws < 0.9, _KEEP, _RANDOM)).astype(np.int8)
    random_ids = generator.integers(0, special_ids.vocab_size, len(flat))
    np.put(block_ids, flat, np.where(actions == _MASK, special_ids.mask_id,
                                     np.where(actions == _RANDOM, random_ids, labels)))
    np.put(positions[rows], slots, columns)
    np.put(ids[rows], slots, labels)
    np.put(codes[rows], slots, actions)
    num_predictions[rows] = row_predictions

  # The blocks may run on several threads (`batches.threads`); each has its own generator.
  batches.map_in_order(mask_rows, zip(
      (slice(start, start + BLOCK_ROWS) for start in range(0, num_rows, BLOCK_ROWS)),
      generators))
  return dataclasses.replace(batch, input_ids=input_ids, masked_lm_positions=positions,
                             masked_lm_ids=ids, masked_lm_actions=codes,
                             num_predictions=num_predictions)
