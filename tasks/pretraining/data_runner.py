"""Making pretraining data: `run(config)` turns text into the masked-LM / next-sentence records
that `run_pretraining.py` reads, in local processes or on Apache Beam.

Usage, from Python (create_pretraining_data.py does the same with the config of its flags):
  from tasks.pretraining import data_runner
  from tasks.pretraining.config import PretrainingDataConfig
  result = data_runner.run(PretrainingDataConfig(input_file="corpus/*.txt",
                                                 output_file="data/part.tfrecord",
                                                 vocab_file="vocab.txt", num_output_shards=8))
"""

import dataclasses
import sys

from absl import logging

from base import errors
from tasks.pretraining import writer


@dataclasses.dataclass(frozen=True)
class DataResult:
  """What a run of `create_pretraining_data` wrote.

  Attributes:
    output_files: the record files, in order.
    stats_file: the statistics, `_<first output's name>.stats.json` beside it.
    documents: documents read.
    instances: instances written.
    packs: records of packed instances (--pack_sequences), else None.
  """
  output_files: tuple
  stats_file: str
  documents: int
  instances: int
  packs: int | None


def worker_start_method(fork_workers):
  """"fork" with `fork_workers` on Linux: the workers start at once instead of importing
  TensorFlow again (see docs/benchmarks.md), which is safe only while this process has run no
  TensorFlow op, as in `create_pretraining_data.py`. Otherwise "spawn", safe in any process (a
  notebook's that has trained a model, a test's); fork is unsafe with macOS's frameworks and
  absent on Windows."""
  return "fork" if fork_workers and sys.platform.startswith("linux") else "spawn"


def settings(config):
  """The `writer.Settings` of a `PretrainingDataConfig`."""
  return writer.Settings(
      vocab_file=config.vocab_file, do_lower_case=config.do_lower_case,
      max_seq_length=config.max_seq_length,
      max_predictions_per_seq=config.max_predictions_per_seq,
      random_seed=config.random_seed, dupe_factor=config.dupe_factor,
      masked_lm_prob=config.masked_lm_prob, short_seq_prob=config.short_seq_prob,
      do_whole_word_mask=config.do_whole_word_mask,
      original_random_stream=config.original_random_stream,
      pack_sequences=config.pack_sequences,
      max_sequences_per_pack=config.max_sequences_per_pack)


def run(config, fork_workers=False):
  """Runs a `PretrainingDataConfig` in this process: `config.validate()`, then the records
  written by `config.num_workers` processes, or by a Beam pipeline when `config.pipeline_args`
  holds Beam's options; callable more than once in one process.

  Args:
    config: the `PretrainingDataConfig`.
    fork_workers: fork the worker processes (Linux) instead of spawning them: only for a
      process that has run no TensorFlow op (`worker_start_method`).

  Returns:
    the `DataResult`.

  Raises:
    errors.UserError: a flag, file or Beam option the run cannot use, input without a
      document, or, with local workers, a SIGTERM, SIGINT or SIGHUP (the workers ended, no
      temporary left).
  """
  config.validate()
  beam_options = config.beam_options()
  outputs = config.output_paths()
  inputs = config.input_paths()
  compression_type = "GZIP" if config.gzip else None
  try:
    if beam_options is None:
      logging.info("*** Reading from %d input file(s), %d worker(s) ***", len(inputs),
                   config.num_workers)
      stats = writer.write_pretraining_data(
          inputs, outputs, settings(config), num_workers=config.num_workers,
          shard_documents=config.shard_documents, compression_type=compression_type,
          start_method=worker_start_method(fork_workers))
    else:
      from tasks.pretraining import beam  # pylint: disable=g-import-not-at-top
      logging.info("*** Reading from %d input file(s) on Apache Beam's %s ***", len(inputs),
                   beam_options.get_all_options()["runner"])
      stats = beam.write_pretraining_data(
          inputs, outputs, settings(config), beam_options,
          shard_documents=config.shard_documents, compression_type=compression_type)
  except writer.NoDocumentsError as error:
    raise errors.UsageError(f"--input_file={config.input_file}: {error}") from None
  stats_file = writer.stats_path(outputs[0])
  packs = f" in {stats['packs']} packs" if config.pack_sequences else ""
  logging.info("Wrote %d instances%s from %d documents to %d file(s) in %.1f s; statistics in %s",
               stats["instances"], packs, stats["documents"], len(outputs), stats["seconds"],
               stats_file)
  return DataResult(output_files=tuple(outputs), stats_file=stats_file,
                    documents=stats["documents"], instances=stats["instances"],
                    packs=stats["packs"] if config.pack_sequences else None)
