"""A shard's pretraining instances as padded NumPy arrays, and their statistics.

Both masking paths meet here: the original's (`instances`, masked one instance at a
time) is packed after masking, the vectorised one (`masking`) masks the packed arrays.
Examples are then built and counted from the arrays alone.
"""

import collections
import concurrent.futures
import contextlib
import dataclasses
import itertools

import numpy as np

from tasks.pretraining import instances as instances_lib

# `masked_lm_actions` holds indices into this tuple.
ACTIONS = (instances_lib.MASK, instances_lib.RANDOM, instances_lib.KEEP)
_ACTION_CODES = {action: code for code, action in enumerate(ACTIONS)}


_POOL = None  # The `threads` pool, or None: one thread.


@contextlib.contextmanager
def threads(count):
  """Within it, `map_in_order` runs on `count` threads (1: in the calling thread).

  A worker making the run's only shard has the cores of the idle workers too: the row blocks of
  layout, masking and serialization are independent, and NumPy releases the GIL over their
  arrays. Output does not depend on `count`.
  """
  global _POOL
  previous = _POOL
  pool = concurrent.futures.ThreadPoolExecutor(count) if count > 1 else None
  _POOL = pool
  try:
    yield
  finally:
    _POOL = previous
    if pool is not None:
      pool.shutdown()


def map_in_order(function, arguments):
  """`[function(*item) for item in arguments]`, on the threads of `threads` when set.

  `arguments` is consumed in order in the calling thread (it may draw from a random generator),
  at most two items per thread ahead of the results, which bounds the memory of items in flight.
  """
  if _POOL is None:
    return [function(*item) for item in arguments]
  results, in_flight = [], collections.deque()
  window = 2 * _POOL._max_workers  # pylint: disable=protected-access
  for item in arguments:
    in_flight.append(_POOL.submit(function, *item))
    if len(in_flight) >= window:
      results.append(in_flight.popleft().result())
  results.extend(future.result() for future in in_flight)
  return results


@dataclasses.dataclass
class InstanceBatch:
  """Instances padded with 0 to fixed lengths (the records' layout).

  Attributes:
    input_ids: int64 `[num_instances, max_seq_length]`, `[CLS] A [SEP] B [SEP]` after masking.
    segment_ids: int64 `[num_instances, max_seq_length]`.
    lengths: int64 `[num_instances]`, real tokens per instance.
    is_random_next: bool `[num_instances]`.
    is_single_segment: bool `[num_instances]`, the chunk held one segment.
    masked_lm_positions: int64 `[num_instances, max_predictions_per_seq]`, sorted.
    masked_lm_ids: int64 `[num_instances, max_predictions_per_seq]`, the ids before masking.
    masked_lm_actions: int8 `[num_instances, max_predictions_per_seq]`, index into `ACTIONS`.
    num_predictions: int64 `[num_instances]`, real entries of the `masked_lm_*` rows.
  """
  input_ids: np.ndarray
  segment_ids: np.ndarray
  lengths: np.ndarray
  is_random_next: np.ndarray
  is_single_segment: np.ndarray
  masked_lm_positions: np.ndarray
  masked_lm_ids: np.ndarray
  masked_lm_actions: np.ndarray
  num_predictions: np.ndarray


def _pad(rows, lengths, width, dtype):
  """Packs `rows` (lists, `lengths[i]` long) into a 0-padded `[len(rows), width]` array."""
  padded = np.zeros((len(rows), width), dtype)
  # A boolean mask assigns in row-major order: row by row, left to right.
  padded[np.arange(width) < lengths[:, None]] = np.fromiter(
      itertools.chain.from_iterable(rows), dtype, count=int(lengths.sum()))
  return padded


def from_instances(instances, max_seq_length, max_predictions_per_seq):
  """Packs `TrainingInstance`s (masked or not) into an `InstanceBatch`.

  Args:
    instances: list of `instances_lib.TrainingInstance`.
    max_seq_length, max_predictions_per_seq: the padded widths.

  Returns:
    an `InstanceBatch` in the instances' order.
  """
  count = len(instances)
  lengths = np.fromiter((len(i.input_ids) for i in instances), np.int64, count=count)
  num_predictions = np.fromiter((len(i.masked_lm_positions) for i in instances), np.int64,
                                count=count)
  return InstanceBatch(
      input_ids=_pad([i.input_ids for i in instances], lengths, max_seq_length, np.int64),
      segment_ids=_pad([i.segment_ids for i in instances], lengths, max_seq_length, np.int64),
      lengths=lengths,
      is_random_next=np.fromiter((i.is_random_next for i in instances), bool, count=count),
      is_single_segment=np.fromiter((i.is_single_segment for i in instances), bool, count=count),
      masked_lm_positions=_pad([i.masked_lm_positions for i in instances], num_predictions,
                               max_predictions_per_seq, np.int64),
      masked_lm_ids=_pad([i.masked_lm_ids for i in instances], num_predictions,
                         max_predictions_per_seq, np.int64),
      masked_lm_actions=_pad([[_ACTION_CODES[a] for a in i.masking_actions] for i in instances],
                             num_predictions, max_predictions_per_seq, np.int8),
      num_predictions=num_predictions)


def count_statistics(batch, masked_lm_prob, counts):
  """Adds the batch's statistics to `counts` (a `collections.Counter`).

  Keys: `tokens`, `target_predictions` (`max(1, round(length * masked_lm_prob))` summed, before
  the per-sequence cap), `masked_positions`, `random_next`, `single_segment`, and one per action
  of `ACTIONS`.
  """
  counts["tokens"] += int(batch.lengths.sum())
  # np.round rounds half to even, as the original's Python `round`.
  counts["target_predictions"] += int(
      np.maximum(1, np.round(batch.lengths * masked_lm_prob)).sum())
  counts["masked_positions"] += int(batch.num_predictions.sum())
  counts["random_next"] += int(batch.is_random_next.sum())
  counts["single_segment"] += int(batch.is_single_segment.sum())
  real = np.arange(batch.masked_lm_actions.shape[1]) < batch.num_predictions[:, None]
  per_action = np.bincount(batch.masked_lm_actions[real], minlength=len(ACTIONS))
  for action, number in zip(ACTIONS, per_action):
    counts[action] += int(number)
