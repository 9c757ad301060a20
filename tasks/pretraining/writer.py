"""Writing pretraining TFRecords from text: streamed in shards, in parallel, deterministically.

The input (the original's format: one sentence per line, blank lines between documents) is read
as a stream and cut into shards of at most `shard_documents` whole documents, each file starting
a new document. Each shard is tokenized and turned into instances by one worker process with its
own rng (`random_seed + shard index`; shard 0 uses the seed itself, like the original's single
rng), and the random "next sentence" documents are drawn from the same shard; a run's only
shard, when large, is made by all workers, each its share of the instances (`_job`). By default
a shard's instances are masked by `masking`, each block of rows with a NumPy generator seeded
from (`random_seed`, shard index, block); `original_random_stream` masks them one by one with
the shard's `random.Random`, as the original. With `pack_sequences` the masked instances are then
packed, several to a record (`packing`), the records in an order drawn from another
generator of (`random_seed`, shard index). Results come back in shard order and are written
round-robin to the output files, so the same inputs, seed and shard size give byte-identical
output whatever the number of workers. With several workers the main process only reads,
hands out shards and appends the TFRecord files a worker writes for each shard and output. At
most `2 * num_workers` shards are in flight, so memory is bounded by a few shards, not by the
corpus.
"""

import collections
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import errno
import gc
import io
import json
import multiprocessing
import os
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf

from base import atomic_files
from base import errors
from base import progress
from data import graph_tokenization
from data import text_files
from data import tokenization
from tasks.pretraining import batches
from tasks.pretraining import examples
from tasks.pretraining import instances as instances_lib
from tasks.pretraining import layout
from tasks.pretraining import masking
from tasks.pretraining import packing
from tasks.pretraining import processes

# Lines per call of the in-graph tokenizer.
_TOKENIZE_BATCH_LINES = 2048
# A run's only shard is tokenized by all workers at once from this size of input up: below it,
# starting a tokenizer in each other worker costs more than it saves (docs/benchmarks.md).
_SHARED_TOKENIZATION_BYTES = 8 * 2 ** 20


@dataclasses.dataclass(frozen=True)
class Settings:
  """What every worker needs; the original's flags plus the masking choice and packing.

  `original_random_stream` True masks with the original's `random.Random` calls (the original's
  instances for a seed; several times slower); False masks a shard at once with NumPy (the same
  distribution). `pack_sequences` writes packed rows of up to `max_sequences_per_pack` instances
  each (`packing`) instead of one instance per record.
  """
  vocab_file: str
  do_lower_case: bool
  max_seq_length: int
  max_predictions_per_seq: int
  random_seed: int
  dupe_factor: int
  masked_lm_prob: float
  short_seq_prob: float
  do_whole_word_mask: bool
  original_random_stream: bool = False
  pack_sequences: bool = False
  max_sequences_per_pack: int = 3


def read_documents(path, stats=None):
  """Yields the documents of one input file: runs of non-blank lines, stripped; the end of the
  file ends a document.

  Args:
    path: a text file in the original format (any `tf.io.gfile` file system).
    stats: optional `text_files.DecodeStats` updated as lines are read.

  Yields:
    lists of str, each a document's non-empty lines.
  """
  document = []
  for line in text_files.read_lines(path, stats):
    line = line.strip()
    if line:
      document.append(line)
    elif document:
      yield document
      document = []
  if document:
    yield document


def read_document_shards(paths, shard_documents, stats):
  """Streams the input as shards of whole documents: shard `k` holds the documents
  `k * shard_documents` to `(k + 1) * shard_documents - 1`, counted over the files in order (a
  shard may span files).

  Args:
    paths: input files, read in order.
    shard_documents: documents per shard (the last shard may hold fewer).
    stats: a `text_files.DecodeStats` updated as lines are read.

  Yields:
    `(documents, num_bytes)`: a list of documents, each a list of stripped non-empty lines, and
    the input bytes the shard covers.
  """
  shard = []
  shard_start = stats.bytes
  for path in paths:
    for document in read_documents(path, stats):
      shard.append(document)
      if len(shard) == shard_documents:
        yield shard, stats.bytes - shard_start
        shard, shard_start = [], stats.bytes
  if shard:
    yield shard, stats.bytes - shard_start


_TOKENIZERS = {}


def _tokenize_lines(lines, settings):
  """Tokenizes `lines` with the in-graph tokenizer, `_TOKENIZE_BATCH_LINES` at a time.

  Returns:
    `(ids, line_splits)`: int64 `[num_tokens]`, every line's ids back to back; int64
    `[len(lines) + 1]`, line `i` is `ids[line_splits[i]:line_splits[i + 1]]`.
  """
  key = (settings.vocab_file, settings.do_lower_case)
  if key not in _TOKENIZERS:
    # The lines are Python strings (read with undecodable bytes replaced): valid UTF-8.
    _TOKENIZERS[key] = graph_tokenization.GraphTokenizer(*key, repair_utf8=False)
  def tokenize(batch):
    ragged = _TOKENIZERS[key].tokenize(tf.constant(batch))
    return ragged.flat_values.numpy().astype(np.int64), ragged.row_splits.numpy()

  # The batches may run on several threads (`batches.threads`); TensorFlow releases the GIL.
  ids, line_splits = [], [np.zeros(1, np.int64)]
  for batch_ids, row_splits in batches.map_in_order(tokenize, (
      (lines[start:start + _TOKENIZE_BATCH_LINES],)
      for start in range(0, len(lines), _TOKENIZE_BATCH_LINES))):
    ids.append(batch_ids)
    line_splits.append(row_splits[1:] + line_splits[-1][-1])
  return np.concatenate(ids), np.concatenate(line_splits)


def tokenize_lines(lines, settings):
  """`_tokenize_lines` as a worker's job: the ids as int32 (vocab ids), half the bytes to send."""
  ids, line_splits = _tokenize_lines(lines, settings)
  return ids.astype(np.int32), line_splits


def _tokenized_by_workers(executor, num_workers, documents, settings):
  """The documents tokenized by `num_workers` workers at once, each a part of their lines.

  Returns:
    a `layout.Documents`, as `_process_shard` makes it from `_tokenize_lines` of all the lines
    (tokenization is line by line); the ids int32, half the bytes to send on.
  """
  lines = [line for document in documents for line in document]
  part = -(-len(lines) // num_workers)
  futures = [executor.submit(tokenize_lines, lines[start:start + part], settings)
             for start in range(0, len(lines), part)]
  ids, line_splits = [], [np.zeros(1, np.int64)]
  for future in futures:
    part_ids, part_splits = _result(future)
    ids.append(part_ids)
    line_splits.append(part_splits[1:] + line_splits[-1][-1])
  return layout.Documents.from_lines(np.concatenate(ids), np.concatenate(line_splits),
                                     [len(document) for document in documents])


_SPECIAL_IDS = {}


@contextlib.contextmanager
def _cycle_collector_paused():
  """Pauses the cyclic garbage collector, restoring its state after.

  A shard makes hundreds of thousands of lists, each batch of them triggering a collector pass
  that also walks TensorFlow's ~300,000 long-lived objects: that doubled the time to lay out the
  instances. Their lists hold no cycles, so reference counting alone frees them.
  """
  was_enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    if was_enabled:
      gc.enable()


@contextlib.contextmanager
def _small_pages():
  """Stops NumPy from asking for transparent huge pages for its large arrays, restoring it after.

  NumPy `madvise`s every array of 4 MB or more for huge pages. Where the kernel defragments on
  such a request (`/sys/kernel/mm/transparent_hugepage/defrag` "madvise", the default), a page
  fault of a shard's fresh arrays of hundreds of MB waits for memory to be compacted, most of
  the time of laying out and masking a large shard (docs/benchmarks.md).
  """
  core = np._core if hasattr(np, "_core") else np.core  # pylint: disable=protected-access
  set_madvise = getattr(core.multiarray, "_set_madvise_hugepage", None)
  if set_madvise is None:
    yield
    return
  was_enabled = set_madvise(False)
  try:
    yield
  finally:
    set_madvise(was_enabled)


def process_shard(shard_index, documents, settings, num_parts, compression_type, directory,
                  threads=1, tokenized=None, share=(0, 1)):
  """Tokenizes one shard, creates its instances and writes them as TFRecord files in `directory`.

  Args:
    shard_index, documents, settings, share: see `_process_shard`.
    num_parts, compression_type, directory: see `_write_parts`.
    threads: threads for the shard's tokenization and row blocks (`batches.threads`): the
      number of workers for a run's only shard, whose other workers have nothing to do. The
      output does not depend on it.
    tokenized: optional `layout.Documents` of the shard, already tokenized by the workers
      (`_tokenized_by_workers`); `documents` may then be None.

  Returns:
    `(part_paths, counts)`: `_write_parts` of the share's examples, and its statistics.
  """
  with _cycle_collector_paused(), _small_pages(), batches.threads(threads):
    serialized, counts = _process_shard(shard_index, documents, settings, tokenized, share)
  return _write_parts(serialized, num_parts, compression_type,
                      os.path.join(directory, f"shard-{shard_index}-{share[0]}")), counts


def _write_parts(serialized, num_parts, compression_type, path_prefix):
  """Writes `serialized` as `num_parts` TFRecord files with TensorFlow's own writer.

  Part `k` holds records `k, k + num_parts, ...`, so the main process, which only appends each
  part to an output file, keeps the records' round-robin over the files. Appending a part is one
  file copy, where writing each record in the main process would cost microseconds per record
  (with unpickling them) on cores it shares with the workers. Nor do the records travel back as a
  worker's result: pickled through a pipe 64 KB at a time, a shard's megabytes keep the worker
  idle for tens of milliseconds, where a file in the page cache takes a few.
  Compressed parts are GZIP members, which concatenated are one GZIP stream (`TFRecordDataset`
  reads it).

  Args:
    serialized: list of bytes, the shard's examples in order.
    num_parts: the number of output files.
    compression_type: None or "GZIP".
    path_prefix: part `k` is written to `<path_prefix>-<k>`.

  Returns:
    list of `num_parts` paths, None for a part without records (no file).
  """
  options = tf.io.TFRecordOptions(compression_type=compression_type)
  paths = []
  for part in range(num_parts):
    records = serialized[part::num_parts]
    paths.append(f"{path_prefix}-{part}" if records else None)
    if records:
      with tf.io.TFRecordWriter(paths[-1], options) as writer:
        for record in records:
          writer.write(record)
  return paths


def _process_shard(shard_index, documents, settings, tokenized=None, share=(0, 1)):
  """Tokenizes one shard, creates its instances and serializes them.

  Args:
    shard_index: position of the shard in the input (seeds its rng).
    documents: list of documents, each a list of text lines (None with `tokenized`).
    settings: `Settings`.
    tokenized: optional `layout.Documents` of the documents (`_tokenized_by_workers`).
    share: `(index, count)`: the shard's instances, in their final order, are cut into `count`
      runs of whole masking blocks (`_shared_rows`) and this call makes run `index`, each call
      laying out the whole shard again (the same draws); run 0 also counts the documents. Only
      `(0, 1)` with `pack_sequences` or `original_random_stream`, which draw over all of them.

  Returns:
    `(serialized_examples, counts)`: list of bytes, the share's instances in order (or the
    shard's packs, shuffled); a Counter of the statistics `write_pretraining_data` reports, and
    of the examples (`records`).
  """
  if settings.vocab_file not in _SPECIAL_IDS:
    _SPECIAL_IDS[settings.vocab_file] = instances_lib.SpecialIds.from_vocab(
        tokenization.load_vocab(settings.vocab_file))
  special_ids = _SPECIAL_IDS[settings.vocab_file]
  if tokenized is None:
    # Lines that tokenize to nothing are dropped, and documents left empty with them.
    tokenized = layout.Documents.from_lines(
        *_tokenize_lines([line for document in documents for line in document], settings),
        [len(document) for document in documents])
  share_index, share_count = share
  counts = collections.Counter(documents=len(tokenized.boundaries) if share_index == 0 else 0)
  rng = instances_lib.seeded_rng(settings.random_seed, shard_index)
  if settings.original_random_stream:
    instances = instances_lib.create_instances(
        tokenized.as_lists(), settings.dupe_factor, settings.max_seq_length,
        settings.short_seq_prob, settings.masked_lm_prob, settings.max_predictions_per_seq,
        special_ids, settings.do_whole_word_mask, rng, counts)
    masked_batches = [batches.from_instances(instances, settings.max_seq_length,
                                             settings.max_predictions_per_seq)]
  else:
    instance_layout = layout.lay_out(
        tokenized, settings.dupe_factor, settings.max_seq_length, settings.short_seq_prob, rng,
        counts if share_index == 0 else None)
    rows = _shared_rows(len(instance_layout.order), share_index, share_count)
    # Packing draws over all of the share's rows at once.
    chunks = [rows] if settings.pack_sequences else _chunks(rows, settings.max_seq_length)
    masked_batches = _masked_batches(layout.ids_with_specials(tokenized.ids, special_ids),
                                     instance_layout, chunks, settings, special_ids, shard_index)
    del instance_layout
  serialized = []
  for batch in masked_batches:
    counts.update(instances=len(batch.lengths))
    batches.count_statistics(batch, settings.masked_lm_prob, counts)
    if settings.pack_sequences:
      records = examples.serialize_packed(packing.pack(
          batch, settings.max_sequences_per_pack,
          packing.seeded_generator(settings.random_seed, shard_index)))
      counts.update(packs=len(records))
    else:
      records = examples.serialize(batch)
    serialized.extend(records)
  counts.update(records=len(serialized))
  return serialized, counts


def _masked_batches(extended_ids, instance_layout, chunks, settings, special_ids, shard_index):
  """Yields the masked `batches.InstanceBatch` of each slice of `chunks` (rows of the layout's
  order, each starting at a block): `layout.pack`, then `masking.mask_batch` with the generators
  of its blocks. Holds the only reference to `instance_layout`, dropped before the last chunk is
  masked (masking needs as much memory again as its batch)."""
  for index, rows in enumerate(chunks):
    batch = layout.pack(extended_ids, instance_layout, rows, settings.max_seq_length,
                        settings.max_predictions_per_seq)
    if index == len(chunks) - 1:
      del instance_layout
    yield masking.mask_batch(
        batch, settings.masked_lm_prob, settings.max_predictions_per_seq, special_ids,
        settings.do_whole_word_mask,
        masking.block_generators(settings.random_seed, shard_index,
                                 rows.start // masking.BLOCK_ROWS), in_place=True)


def _chunks(rows, max_seq_length):
  """`rows` (a slice starting at a block) cut into slices of whole blocks, packed, masked and
  serialized one at a time: each array of a chunk (a quarter of `_MMAP_THRESHOLD_BYTES` for the
  int64 ids) is then below malloc's mmap threshold, so the next chunk reuses its freed memory
  instead of faulting in fresh pages, which cost more than filling them (docs/benchmarks.md)."""
  blocks = max(1, _MMAP_THRESHOLD_BYTES // 4 // (max_seq_length * 8 * masking.BLOCK_ROWS))
  size = blocks * masking.BLOCK_ROWS
  return [slice(start, min(start + size, rows.stop))
          for start in range(rows.start, rows.stop, size)] or [rows]


def _shared_rows(num_rows, index, count):
  """The rows of share `index` of `count`: consecutive, cut between blocks of
  `masking.BLOCK_ROWS` rows, the blocks as evenly spread as they go.

  Returns:
    a `slice` of `range(num_rows)`.
  """
  num_blocks = -(-num_rows // masking.BLOCK_ROWS)
  first, end = (num_blocks * share // count * masking.BLOCK_ROWS for share in (index, index + 1))
  return slice(first, min(end, num_rows))


@dataclasses.dataclass(frozen=True)
class _Job:
  """One shard to make: `process_shard`'s arguments but `tokenized` and `share`, and what the
  main process needs besides.

  Attributes:
    shard_index, documents, settings, num_parts, compression_type, directory, threads: see
      `process_shard`.
    num_bytes: the input bytes the shard covers.
    tokenize_together: all workers tokenize the shard together before it is made (a run's only
      shard, large enough to pay for their tokenizers).
    shares: the number of workers that make a share of its instances each (see
      `_process_shard`).
  """
  shard_index: int
  documents: list
  settings: Settings
  num_parts: int
  compression_type: str | None
  directory: str
  threads: int
  num_bytes: int
  tokenize_together: bool
  shares: int

  def process_shard_arguments(self):
    """`process_shard`'s positional arguments, up to `threads`: without the documents' text
    when the workers get them tokenized."""
    return (self.shard_index, None if self.tokenize_together else self.documents, self.settings,
            self.num_parts, self.compression_type, self.directory, self.threads)


def _shard_results(executor, num_workers, jobs):
  """Runs `process_shard` on `executor` for each share of each job, yielding the results in
  shard order.

  Every worker keeps one shard queued behind the one it makes, so none waits for this process
  (which only reads the input and writes the output) between shards.

  Args:
    executor: a `concurrent.futures.ProcessPoolExecutor` of `num_workers` workers.
    num_workers: its number of workers.
    jobs: iterable of `_Job`.

  Yields:
    `(process_shard result, num_bytes)` in shard order, a shard's shares in order (the first
    with the shard's bytes, the others with 0); at most `2 * num_workers` calls are in flight
    at once.

  Raises:
    WorkerDiedError: a worker process ended without finishing its shard.
  """
  in_flight = collections.deque()  # (Future, num_bytes)
  for job in jobs:
    tokenized = None
    if job.tokenize_together:
      tokenized = _tokenized_by_workers(executor, num_workers, job.documents, job.settings)
    for share in range(job.shares):
      in_flight.append((executor.submit(process_shard, *job.process_shard_arguments(),
                                        tokenized, (share, job.shares)),
                        job.num_bytes if share == 0 else 0))
    while in_flight and (len(in_flight) >= 2 * num_workers or in_flight[0][0].done()):
      pending, num_bytes = in_flight.popleft()
      yield _result(pending), num_bytes
  for pending, num_bytes in in_flight:
    yield _result(pending), num_bytes


def _job(shard_index, documents, num_bytes, only_shard, settings, num_parts, compression_type,
         directory, num_workers):
  """The `_Job` of a shard. A run's only shard gets all the workers: from
  `_SHARED_TOKENIZATION_BYTES` up they tokenize it together and each makes a share of its
  instances (unless those are drawn all at once: packed, or masked with the original's random
  stream); below, or for such instances, one worker makes it on their threads."""
  tokenize_together = (only_shard and num_workers > 1
                       and num_bytes >= _SHARED_TOKENIZATION_BYTES)
  shared = tokenize_together and not (settings.pack_sequences
                                      or settings.original_random_stream)
  return _Job(shard_index, documents, settings, num_parts, compression_type, directory,
              threads=num_workers if only_shard and not shared else 1, num_bytes=num_bytes,
              tokenize_together=tokenize_together, shares=num_workers if shared else 1)


def _result(future):
  """The result of a worker's `future`; WorkerDiedError if its process died."""
  try:
    return future.result()
  except concurrent.futures.process.BrokenProcessPool:
    raise WorkerDiedError(
        "a worker process died before finishing its shard (killed by a signal, or by the "
        "system for lack of memory: try fewer --num_workers or a smaller --shard_documents); "
        "nothing was written") from None


def _with_only_shard(shards):
  """`(documents, num_bytes, only_shard)` for each of `shards`: `only_shard` is True when the
  input ended with the first shard (read one shard ahead to know)."""
  shards = iter(shards)
  first = next(shards, None)
  if first is None:
    return
  second = next(shards, None)
  yield (*first, second is None)
  if second is not None:
    yield (*second, False)
    for shard in shards:
      yield (*shard, False)


def _start_worker(num_workers, parent_pid):
  """Sets up a worker process: its end with the main process `parent_pid`, its share of the
  cores, and memory kept for reuse."""
  processes.die_with_parent(parent_pid)
  _share_the_cores(num_workers)
  _keep_freed_memory()


def _keep_freed_memory():
  """Makes glibc's malloc keep freed memory for reuse instead of returning it to the system.

  A shard allocates and frees arrays of megabytes again and again (ids, masks, serialized bytes);
  above malloc's mmap threshold each is mapped anew and every page faulted in again (the
  system time it saves: docs/benchmarks.md). Nothing to do without glibc.
  """
  try:
    libc = ctypes.CDLL("libc.so.6")
  except OSError:
    return
  m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
  libc.mallopt(m_mmap_threshold, _MMAP_THRESHOLD_BYTES)
  libc.mallopt(m_trim_threshold, 4 * _MMAP_THRESHOLD_BYTES)


# Above a whole shard's largest array (BERT's 14,000 x 128 int64 ids: 15 MB).
_MMAP_THRESHOLD_BYTES = 64 << 20


def _share_the_cores(num_workers):
  """Gives this worker's TensorFlow ops its share of the cores (one each by default).

  TensorFlow sizes its thread pools to the machine, and its idle threads spin before they sleep:
  with one worker per core, a worker's tokenization took CPU from the others
  (docs/benchmarks.md).
  """
  threads = max(1, (os.cpu_count() or 1) // num_workers)
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.threading.set_inter_op_parallelism_threads(threads)


def part_outputs(records_before, part_paths, num_outputs):
  """Where a shard's parts go: the outputs take the records in turn, over all shards in order.

  Args:
    records_before: the records of all earlier shards.
    part_paths: the shard's `_write_parts` result.
    num_outputs: the number of output files.

  Returns:
    list of `(output index, part path)` for the parts that hold records.
  """
  return [((records_before + part) % num_outputs, path)
          for part, path in enumerate(part_paths) if path is not None]


def open_output(path):
  """Opens the output file `path` for writing (binary), for `append_file` to append to: with
  Python's own `open` when it is local, so the parts can be copied into it in the kernel."""
  return open(path, "wb") if _is_local(path) else tf.io.gfile.GFile(path, "wb")


def _is_local(path):
  """True for a path on the local file system (no `scheme://` of another `tf.io.gfile` one)."""
  return "://" not in path


def append_file(path, output):
  """Appends the bytes of the file `path` (any `tf.io.gfile` file system) to the open `output`
  (`open_output`'s): in the kernel when both are local files, else through this process."""
  if _is_local(path) and isinstance(output, io.BufferedWriter):
    output.flush()  # The kernel copy writes at the file's offset, behind Python's buffer.
    with open(path, "rb") as records:
      if _send_file(records.fileno(), output.fileno()):
        return
  with tf.io.gfile.GFile(path, "rb") as records:
    shutil.copyfileobj(records, output, _COPY_BYTES)


def _send_file(source, target):
  """Copies the whole file of descriptor `source` to `target` at its offset with `os.sendfile`:
  in the kernel, not through this process's memory.

  Returns:
    False, having written nothing, where the system or file system does not support it.
  """
  if not hasattr(os, "sendfile"):
    return False
  offset = 0
  while True:
    try:
      sent = os.sendfile(target, source, offset, _SEND_BYTES)
    except OSError as error:
      if offset == 0 and error.errno in _SEND_FILE_UNSUPPORTED:
        return False
      raise
    if not sent:
      return True
    offset += sent


def stats_path(output_file):
  """Where the statistics of a run whose first output is `output_file` go: `_<name>.stats.json`
  beside it, a name that a glob over the outputs (`<output_file>*`, the original's usage for
  sharded outputs) does not match."""
  directory, name = os.path.split(output_file)
  return os.path.join(directory, f"_{name}.stats.json")


def summarize(counts, decode_stats, elapsed_seconds, settings):
  """The statistics written to `stats_path(first output)`."""
  masked = max(counts["masked_positions"], 1)
  instances = max(counts["instances"], 1)
  stats = {
      "lines": decode_stats.lines,
      "undecodable_lines": decode_stats.undecodable_lines,
      "documents": counts["documents"],
      "instances": counts["instances"],
      "tokens": counts["tokens"],
      "masked_positions": counts["masked_positions"],
      "masked_fraction_of_tokens": counts["masked_positions"] / max(counts["tokens"], 1),
      "target_masked_fraction_of_tokens": counts["target_predictions"] / max(counts["tokens"], 1),
      "random_next_fraction": counts["random_next"] / instances,
      # Single-segment chunks always take a random B (as the original); the others do half the
      # time, so random_next_fraction = 0.5 + 0.5 * single_segment_fraction in expectation.
      "single_segment_fraction": counts["single_segment"] / instances,
      "random_next_fraction_of_multi_segment": (
          (counts["random_next"] - counts["single_segment"])
          / max(counts["instances"] - counts["single_segment"], 1)),
      "short_target_fraction": counts["short_target_passes"] / max(counts["document_passes"], 1),
      "masking_action_fractions": {
          action: counts[action] / masked
          for action in batches.ACTIONS},
      "padding_fraction": 1 - counts["tokens"] / (instances * settings.max_seq_length),
      "seconds": round(elapsed_seconds, 3),
  }
  if settings.pack_sequences:
    packs = max(counts["packs"], 1)
    stats.update(packs=counts["packs"], instances_per_pack=counts["instances"] / packs,
                 packed_padding_fraction=1 - counts["tokens"] / (packs * settings.max_seq_length))
  return stats


def write_stats(output_file, stats):
  """Writes `stats` (`summarize`) to `stats_path(output_file)`, whole or not at all."""
  with atomic_files.open_for_writing(stats_path(output_file)) as writer:
    writer.write(json.dumps(stats, indent=2, sort_keys=True) + "\n")


def read_stats(output_file):
  """The statistics `write_stats` wrote for `output_file`."""
  with tf.io.gfile.GFile(stats_path(output_file)) as reader:
    return json.load(reader)


# Bytes of a part file read at once when it is appended to an output.
_COPY_BYTES = 16 << 20
# Bytes asked of one `os.sendfile` call (Linux sends at most 2 GiB at once).
_SEND_BYTES = 1 << 30
# Where `os.sendfile` refuses the pair of files (by platform and file system).
_SEND_FILE_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.ENOTSOCK, errno.EOPNOTSUPP,
                          errno.EXDEV, errno.ENODATA)
# Name start of the workers' part directories in the local temporary directory.
_PARTS_PREFIX = "create_pretraining_data-parts-"


class WorkerDiedError(errors.UserError, RuntimeError):
  """A worker process ended (a signal, the out-of-memory killer) without finishing its shard."""


class NoDocumentsError(errors.UserError, ValueError):
  """The input held no document with any word piece."""

  def __init__(self, num_files, num_lines):
    super().__init__(f"no document with any word piece in {num_files} input file(s) "
                     f"({num_lines} line(s) read)")


def write_pretraining_data(input_files, output_files, settings, num_workers=1,
                           shard_documents=10000, compression_type=None, start_method="spawn"):
  """Creates instances from `input_files` and writes them to `output_files`.

  Outputs are written under temporary names and renamed only when every shard succeeded, so an
  interrupted run leaves nothing that looks complete. `stats_path(output_files[0])` gets the
  statistics. The workers end with this process, however it ends; called in the main thread, a
  SIGTERM, SIGINT or SIGHUP before the outputs are renamed ends the workers, removes the
  temporaries and raises `processes.TerminatedError` (after, it is held until the statistics are
  written, then sent again).

  Args:
    input_files: text files in the original format.
    output_files: TFRecord paths; instances go round-robin to them.
    settings: `Settings`.
    num_workers: processes making shards: 1, this one; more, that many others, while this one
      reads the input and writes the output. A shard's TFRecords wait in a temporary directory
      (`tempfile`'s, as `TMPDIR` says) until they are appended to the outputs: the records of up
      to `2 * num_workers` shards with several workers.
    shard_documents: documents per shard (also the pool of random next-sentence documents).
    compression_type: None or "GZIP".
    start_method: how the `num_workers` other processes start (`multiprocessing`):
      "spawn", fresh interpreters that import TensorFlow again (several seconds each), is safe in
      any process; "fork" starts them at once from this process's memory, but is only safe while
      this process has not run a TensorFlow op (a forked child lacks the runtime's threads), as in
      `create_pretraining_data.py`. The workers start before any TensorFlow op here.

  Returns:
    the statistics dict.

  Raises:
    NoDocumentsError: nothing to create instances from.
    processes.TerminatedError: a termination signal ended the run.
  """
  with processes.TerminationSignals() as signals:
    return _write_pretraining_data(input_files, output_files, settings, num_workers,
                                   shard_documents, compression_type, start_method, signals)


def _write_pretraining_data(input_files, output_files, settings, num_workers, shard_documents,
                            compression_type, start_method, signals):
  """`write_pretraining_data`, with its `processes.TerminationSignals`."""
  start = time.monotonic()
  decode_stats = text_files.DecodeStats()
  total_bytes = sum(tf.io.gfile.stat(path).length for path in input_files)
  bar = progress.Progress(total=total_bytes / 1e6, unit="MB", count_format=",.2f")
  # What killed runs left: their outputs' temporaries (which `OUTPUT*` would match) and parts.
  for path in output_files:
    atomic_files.remove_stale_temporaries(os.path.dirname(path) or ".", os.path.basename(path))
  atomic_files.remove_stale_temporaries(tempfile.gettempdir(), _PARTS_PREFIX)
  temp_paths = [atomic_files.temporary_name(path) for path in output_files]
  outputs = []
  counts = collections.Counter()
  executor = parts_directory = None
  other_children = set(multiprocessing.active_children())
  try:
    parts_directory = tempfile.mkdtemp(prefix=_PARTS_PREFIX, suffix=f".tmp-{os.getpid()}")
    if num_workers > 1:
      executor = concurrent.futures.ProcessPoolExecutor(
          num_workers, mp_context=multiprocessing.get_context(start_method),
          initializer=_start_worker, initargs=(num_workers, os.getpid()))
    outputs = [open_output(path) for path in temp_paths]
    jobs = (_job(index, documents, num_bytes, only_shard, settings, len(outputs),
                 compression_type, parts_directory, num_workers)
            for index, (documents, num_bytes, only_shard)
            in enumerate(_with_only_shard(read_document_shards(input_files, shard_documents,
                                                               decode_stats))))

    def write(part_paths, shard_counts, num_bytes):
      for output_index, part_path in part_outputs(counts["records"], part_paths, len(outputs)):
        # Named here: the error of a full disk in a kernel copy names no file.
        with atomic_files.no_space_is_one_line(output_files[output_index]):
          append_file(part_path, outputs[output_index])
        os.remove(part_path)
      counts.update(shard_counts)
      elapsed = max(time.monotonic() - start, 1e-9)
      bar.update(num_bytes / 1e6, detail=(
          f"; {counts['documents']:,} documents ({counts['documents'] / elapsed:,.0f}/s), "
          f"{counts['instances']:,} instances ({counts['instances'] / elapsed:,.0f}/s)"))

    if executor is None:
      for job in jobs:
        write(*process_shard(*job.process_shard_arguments()), job.num_bytes)
    else:
      for result, num_bytes in _shard_results(executor, num_workers, jobs):
        write(*result, num_bytes)
      executor.shutdown()
      executor = None
    for output, path in zip(outputs, output_files):
      with atomic_files.no_space_is_one_line(path):
        output.close()
    if not counts["instances"]:
      raise NoDocumentsError(len(input_files), decode_stats.lines)
    # The outputs are complete: a signal from now on ends the process once they are renamed and
    # their statistics written.
    signals.hold()
    for temp_path, path in zip(temp_paths, output_files):
      tf.io.gfile.rename(temp_path, path, overwrite=True)
  finally:
    signals.hold()  # the cleanup must complete
    if executor is not None:
      # A failed run ends its workers at once instead of waiting for their shards.
      executor.shutdown(wait=False, cancel_futures=True)
      for worker in set(multiprocessing.active_children()) - other_children:
        worker.terminate()
    if parts_directory is not None:
      shutil.rmtree(parts_directory, ignore_errors=True)
    for output in outputs:
      output.close()
    for temp_path in temp_paths:
      if tf.io.gfile.exists(temp_path):
        tf.io.gfile.remove(temp_path)
  bar.close()
  stats = summarize(counts, decode_stats, time.monotonic() - start, settings)
  write_stats(output_files[0], stats)
  return stats

