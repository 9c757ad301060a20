"""Pretraining data on Apache Beam: the local path's shards, made by a pipeline's workers.

The shards are those of `writer.read_document_shards`: shard `k` holds the
input's documents `k * shard_documents` to `(k + 1) * shard_documents - 1`, counted over the files
in order. A pipeline does not read its files in order, so it reads them twice: once to count each
file's documents (and lines, for the statistics), which gives every file its first document's
index; then each file is cut at the shard boundaries, a shard's pieces are grouped and put back in
file order, and the shard is made by `writer.process_shard`, the function the
local workers run, with the same seed. Each shard writes its part files beside the outputs; the
outputs then take them in shard order (`part_outputs`, as the local path appends them), one worker
per output file, so that every output holds the local path's records in the local path's order.
Outputs are written under temporary names and renamed, with the statistics written beside them,
once every output is complete.

Requires `apache-beam` (`requirements-beam.txt`); the rest of the project does not import it.
"""

import argparse
import collections
import os
import time

import apache_beam as beam
from apache_beam.options import pipeline_options
from apache_beam.options import pipeline_options_validator
from apache_beam.runners import runner as beam_runner
import tensorflow as tf

from base import atomic_files
from base import errors
from data import text_files
from tasks.pretraining import writer

# The namespace of the pipeline's counters (shown by Dataflow's monitoring page too).
METRICS_NAMESPACE = "create_pretraining_data"


class PipelineOptionsError(errors.UsageError):
  """An argument that neither the script nor Apache Beam defines, or Beam options without a
  runner."""


def pipeline_options_from_args(args):
  """Beam's pipeline options from the arguments the script's own flags left.

  Args:
    args: list of str, e.g. `["--runner=DataflowRunner", "--project", "my-project"]`.

  Returns:
    `apache_beam.options.pipeline_options.PipelineOptions`.

  Raises:
    PipelineOptionsError: an argument Beam does not know either (Beam itself would only warn and
      drop it), options without `--runner`, an unknown runner, or options the runner's own
      validation refuses (Dataflow without --project, --region, --temp_location, ...).
  """
  # The parser Beam fills with every PipelineOptions subclass's options, as `get_all_options`
  # does, but whose leftovers are an error here instead of a warning.
  parser = pipeline_options._BeamArgumentParser(  # pylint: disable=protected-access
      allow_abbrev=False, exit_on_error=False)
  for options_class in {str(c): c for c in pipeline_options.PipelineOptions.__subclasses__()
                        }.values():
    options_class._add_argparse_args(parser)  # pylint: disable=protected-access
  try:
    known, unknown = parser.parse_known_args(args)
  except argparse.ArgumentError as error:
    raise PipelineOptionsError(f"Apache Beam pipeline option {error}") from None
  if unknown:
    raise PipelineOptionsError(f"{unknown[0]}: neither a flag of this script nor an Apache Beam "
                               "pipeline option")
  if known.runner is None:
    raise PipelineOptionsError(
        f"{args[0]}: Apache Beam pipeline options are taken only with --runner "
        "(e.g. --runner=DirectRunner); without it, leave them out")
  if (getattr(known, "direct_num_workers", None) or 0) < 0:
    raise PipelineOptionsError(f"--direct_num_workers={known.direct_num_workers}: must be 0 "
                               "(every core) or more")
  try:
    runner = beam_runner.create_runner(known.runner)
  except (ValueError, ImportError) as error:
    raise PipelineOptionsError(f"--runner={known.runner}: {error}") from None
  options = pipeline_options.PipelineOptions(args)
  # The checks `beam.Pipeline` makes when it is built, here before any work, in one line.
  problems = pipeline_options_validator.PipelineOptionsValidator(options, runner).validate()
  if problems:
    raise PipelineOptionsError(f"Apache Beam pipeline options for --runner={known.runner}: "
                               + " ".join(problems))
  return options


def _count_documents(input_file):
  """Returns `(file_index, documents, lines, undecodable_lines)` of `input_file`, a
  `(file_index, path)`."""
  file_index, path = input_file
  stats = text_files.DecodeStats()
  documents = sum(1 for _ in writer.read_documents(path, stats))
  beam.metrics.Metrics.counter(METRICS_NAMESPACE, "lines").inc(stats.lines)
  return file_index, documents, stats.lines, stats.undecodable_lines


def _first_documents(file_counts):
  """The global index of each file's first document: {file_index: index}."""
  first, total = {}, 0
  for file_index, documents, _, _ in sorted(file_counts):
    first[file_index] = total
    total += documents
  return first


def _shard_pieces(input_file, first_documents, shard_documents):
  """Cuts one file's documents at the shard boundaries.

  Args:
    input_file: `(file_index, path)`.
    first_documents: `_first_documents`.
    shard_documents: documents per shard.

  Yields:
    `(shard_index, (file_index, documents))`, a run of the file's documents within one shard.
  """
  file_index, path = input_file
  document_index = first_documents[file_index]
  piece = []
  for document in writer.read_documents(path):
    if piece and document_index % shard_documents == 0:
      yield document_index // shard_documents - 1, (file_index, piece)
      piece = []
    piece.append(document)
    document_index += 1
  if piece:
    yield (document_index - 1) // shard_documents, (file_index, piece)


def _make_shard(shard, settings, num_outputs, compression_type, parts_directory):
  """Makes one shard, `(shard_index, pieces)`, from its pieces in file order, with the local
  workers' function.

  Returns:
    `(shard_index, part_paths, counts)`: see `writer.process_shard`; counts as
    a dict.
  """
  shard_index, pieces = shard
  documents = [document for _, piece in sorted(pieces, key=lambda item: item[0])
               for document in piece]
  part_paths, counts = writer.process_shard(
      shard_index, documents, settings, num_outputs, compression_type, parts_directory)
  for name in ("documents", "instances", "records"):
    beam.metrics.Metrics.counter(METRICS_NAMESPACE, name).inc(counts[name])
  return shard_index, part_paths, dict(counts)


def _write_output(output_index, shards, temp_paths):
  """Appends, in shard order, every part that goes to output `output_index`, to its temporary.

  Part files are left for `write_pretraining_data` to remove, so that a retried write finds them
  again.
  """
  records_before = 0
  with tf.io.gfile.GFile(temp_paths[output_index], "wb") as output:
    for _, part_paths, counts in sorted(shards, key=lambda shard: shard[0]):
      for index, part_path in writer.part_outputs(records_before, part_paths,
                                                                   len(temp_paths)):
        if index == output_index:
          writer.append_file(part_path, output)
      records_before += counts.get("records", 0)
  return output_index


def _finish(unused_outputs, shards, file_counts, settings, temp_paths, output_files,
            start_time):
  """Renames the complete outputs and writes the statistics; with no instance, writes nothing
  (`write_pretraining_data` removes the temporaries and the parts either way). A retry renames
  only what is left to rename."""
  counts = collections.Counter()
  for _, _, shard_counts in shards:
    counts.update(shard_counts)
  if not counts["instances"]:
    return
  decode_stats = text_files.DecodeStats(
      lines=sum(lines for _, _, lines, _ in file_counts),
      undecodable_lines=sum(undecodable for _, _, _, undecodable in file_counts))
  for temp_path, path in zip(temp_paths, output_files):
    if tf.io.gfile.exists(temp_path):
      tf.io.gfile.rename(temp_path, path, overwrite=True)
  writer.write_stats(output_files[0], writer.summarize(
      counts, decode_stats, time.time() - start_time, settings))


def build_pipeline(pipeline, input_files, output_files, settings, shard_documents,
                   compression_type, temp_paths, parts_directory, start_time):
  """Adds the steps that write `output_files` from `input_files` to `pipeline`.

  Args:
    pipeline: a `beam.Pipeline`.
    input_files, output_files, settings, shard_documents, compression_type: as
      `writer.write_pretraining_data`.
    temp_paths: the name each output is written under until all are complete.
    parts_directory: where the shards' part files wait (a directory every worker reaches).
    start_time: `time.time()` when the run started, for the statistics' seconds.
  """
  files = pipeline | "InputFiles" >> beam.Create(list(enumerate(input_files)))
  file_counts = files | "CountDocuments" >> beam.Map(_count_documents)
  all_file_counts = file_counts | "AllFileCounts" >> beam.combiners.ToList()
  first_documents = all_file_counts | "FirstDocuments" >> beam.Map(_first_documents)
  shards = (
      files
      | "CutShards" >> beam.FlatMap(_shard_pieces, beam.pvalue.AsSingleton(first_documents),
                                    shard_documents)
      | "GroupShards" >> beam.GroupByKey()
      | "MakeShards" >> beam.Map(_make_shard, settings, len(output_files), compression_type,
                                 parts_directory))
  all_shards = beam.pvalue.AsSingleton(shards | "AllShards" >> beam.combiners.ToList())
  _ = (pipeline
       | "Outputs" >> beam.Create(list(range(len(output_files))))
       | "AppendParts" >> beam.Map(_write_output, all_shards, temp_paths)
       | "AllOutputs" >> beam.combiners.ToList()
       | "Finish" >> beam.Map(_finish, all_shards, beam.pvalue.AsSingleton(all_file_counts),
                              settings, temp_paths, output_files, start_time))


def _counter(result, name):
  """The committed (else attempted) total of the pipeline counter `name`."""
  query = result.metrics().query(beam.metrics.MetricsFilter().with_namespace(
      METRICS_NAMESPACE).with_name(name))
  return sum((counter.committed if counter.committed is not None else counter.attempted)
             for counter in query["counters"])


def _importable_by_workers():
  """Puts the project's root on the PYTHONPATH that local worker processes (the DirectRunner's
  multi-process mode) inherit: they import the steps' modules by name."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  path = os.environ.get("PYTHONPATH", "")
  if root not in path.split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, path]))


def write_pretraining_data(input_files, output_files, settings, options, shard_documents=10000,
                           compression_type=None):
  """Runs the pipeline that writes `output_files`, and waits for it.

  Args:
    input_files, output_files, settings, shard_documents, compression_type: as
      `writer.write_pretraining_data`.
    options: Beam's `PipelineOptions` (`pipeline_options_from_args`).

  Returns:
    the statistics dict, as written beside the first output.

  Raises:
    writer.NoDocumentsError: nothing to create instances from.
  """
  start_time = time.time()
  directory, name = os.path.split(output_files[0])
  directory = directory or "."
  for path in output_files:
    atomic_files.remove_stale_temporaries(os.path.dirname(path) or ".", os.path.basename(path))
  parts_prefix = f"_{name}.parts"
  atomic_files.remove_stale_temporaries(directory, parts_prefix)
  parts_directory = atomic_files.temporary_name(os.path.join(directory, parts_prefix))
  temp_paths = [atomic_files.temporary_name(path) for path in output_files]
  tf.io.gfile.makedirs(parts_directory)
  _importable_by_workers()
  try:
    pipeline = beam.Pipeline(options=options)
    build_pipeline(pipeline, input_files, output_files, settings, shard_documents,
                   compression_type, temp_paths, parts_directory, start_time)
    result = pipeline.run()
    result.wait_until_finish()
    if not _counter(result, "instances"):
      raise writer.NoDocumentsError(len(input_files), _counter(result, "lines"))
  finally:
    for path in temp_paths + [parts_directory]:
      if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
      elif tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)
  return writer.read_stats(output_files[0])
