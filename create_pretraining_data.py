r"""Creates masked-LM / next-sentence pretraining TFRecords, as the original script, in parallel.

Input: text files with one sentence per line and a blank line between documents. Output:
`tf.train.Example` records with the original seven features, plus `_<output name>.stats.json`
beside the first output (a name that `--input_file=<output>*` does not match). With
`--pack_sequences`, each record instead packs up to `--max_sequences_per_pack` instances into
one `max_seq_length` row, with four more features (`data/schemas.py`,
`packed_pretraining_feature_spec`), which `run_pretraining.py` reads.

With `--runner` and Apache Beam's other pipeline options (`pip install -r requirements-beam.txt`),
the same shards are made by a Beam pipeline instead of local processes: the same records, byte for
byte, on any runner (`data/beam_pretraining_data.py`; docs/pretraining.md has the Dataflow
command).

Example:
  python create_pretraining_data.py --input_file='corpus/*.txt' \
      --output_file=pretraining_data/part.tfrecord --num_output_shards=8 \
      --vocab_file=$BERT_DIR/vocab.txt --do_lower_case=True --max_seq_length=128 \
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5
  # The same records from a Beam pipeline, here on this machine's cores (FnApiRunner: the
  # DirectRunner's local engine, which the DirectRunner reaches after trying to download Prism):
  python create_pretraining_data.py ...the flags above... --runner=FnApiRunner \
      --direct_running_mode=multi_processing --direct_num_workers=8
"""

import os
import sys

from absl import flags
from absl import logging

from base import cli
from base import errors
from data import file_patterns
from data import pretraining_data_writer
from data import tokenization

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files or globs).")
flags.DEFINE_string("output_file", None,
                    "Output TF example file (or comma-separated list of files); with "
                    "--num_output_shards, the prefix of the shard names.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text.")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Whether to use whole word masking rather than per-WordPiece masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10,
                     "Number of times to duplicate the input data (with different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of creating sequences which are shorter than the maximum length.")
flags.DEFINE_integer("num_workers", os.cpu_count() or 1,
                     "Processes making shards (default: all cores); with more than one, this "
                     "process only reads the input and writes the output. The output does not "
                     "depend on it.")
flags.DEFINE_integer("num_output_shards", None,
                     "Write <output_file>-NNNNN-of-MMMMM files instead of the listed outputs.")
flags.DEFINE_integer("shard_documents", 10000,
                     "Documents per input shard: the unit of work and memory, and the pool the "
                     "random next sentences are drawn from.")
flags.DEFINE_bool("original_random_stream", False,
                  "Mask with the original's random.Random calls, one instance at a time: "
                  "reproduces the original's instances for a seed (within a shard), several "
                  "times slower. By default a shard is masked at once with NumPy: the same "
                  "distribution, not the same instances.")
flags.DEFINE_bool("pack_sequences", False,
                  "Pack up to --max_sequences_per_pack instances into each record, back to back "
                  "in one max_seq_length row instead of one padded instance per record (fewer "
                  "records, less padding; the instances themselves are unchanged). The records "
                  "add position_ids, instance_ids and per-instance next-sentence features; "
                  "run_pretraining.py reads them.")
flags.DEFINE_integer("max_sequences_per_pack", 3,
                     "With --pack_sequences, the most instances of one record.")
flags.DEFINE_bool("gzip", False, "Compress the output with GZIP (read with "
                  "--input_compression=gzip).")
flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])


def output_paths():
  """The output files: the comma-separated list, or the shard names of --num_output_shards."""
  if FLAGS.num_output_shards is None:
    return [path.strip() for path in FLAGS.output_file.split(",") if path.strip()]
  count = FLAGS.num_output_shards
  return [f"{FLAGS.output_file}-{index:05d}-of-{count:05d}" for index in range(count)]


def check_flags():
  """Raises errors.UsageError naming the first flag that cannot work."""
  if FLAGS.max_seq_length < 5:
    raise errors.UsageError(f"--max_seq_length={FLAGS.max_seq_length}: must be at least 5 "
                         "([CLS] A [SEP] B [SEP] with one token each)")
  if not 0.0 < FLAGS.masked_lm_prob <= 1.0:
    raise errors.UsageError(f"--masked_lm_prob={FLAGS.masked_lm_prob}: must be in (0, 1]")
  if not 0.0 <= FLAGS.short_seq_prob <= 1.0:
    raise errors.UsageError(f"--short_seq_prob={FLAGS.short_seq_prob}: must be in [0, 1]")
  for name in ("dupe_factor", "max_predictions_per_seq", "num_workers", "shard_documents",
               "max_sequences_per_pack"):
    if FLAGS[name].value < 1:
      raise errors.UsageError(f"--{name}={FLAGS[name].value}: must be at least 1")
  if FLAGS.num_output_shards is not None and FLAGS.num_output_shards < 1:
    raise errors.UsageError(f"--num_output_shards={FLAGS.num_output_shards}: must be at least 1")
  # The original silently capped full-length sequences below masked_lm_prob.
  needed = int(round(FLAGS.max_seq_length * FLAGS.masked_lm_prob))
  if FLAGS.max_predictions_per_seq < needed:
    raise errors.UsageError(
        f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq} is smaller than "
        f"round(max_seq_length * masked_lm_prob) = {needed}: full-length sequences would mask "
        f"less than --masked_lm_prob={FLAGS.masked_lm_prob} of their tokens")


def _worker_start_method():
  """Forks the workers on Linux: this process has imported TensorFlow but run no op (only file
  system calls), so forking is safe, and the workers start at once instead of importing
  TensorFlow again (4.7 s each on the benchmark's machine, during which a core would make no
  shard). Elsewhere fork is unsafe with the system's frameworks (macOS) or absent (Windows)."""
  return "fork" if sys.platform.startswith("linux") else "spawn"


def beam_pipeline_options(args):
  """Beam's pipeline options from the arguments this script does not define, or None for the
  local path (no such argument)."""
  if not [arg for arg in args if arg.startswith("-")]:
    return None
  try:
    from data import beam_pretraining_data  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise errors.UsageError(
        f"{args[0]}: not a flag of this script; Apache Beam's pipeline options (--runner=...) "
        "need apache-beam: pip install -r requirements-beam.txt") from None
  return beam_pretraining_data.pipeline_options_from_args(args)


def main(argv):
  beam_options = beam_pipeline_options(argv[1:])
  check_flags()
  outputs = output_paths()
  if not outputs:
    raise errors.UsageError("--output_file is empty")
  inputs = file_patterns.expand_globs(FLAGS.input_file, "input_file")
  file_patterns.check_readable(inputs, "input_file")
  tokenization.load_vocab(FLAGS.vocab_file)
  settings = pretraining_data_writer.Settings(
      vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
      max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      random_seed=FLAGS.random_seed, dupe_factor=FLAGS.dupe_factor,
      masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
      do_whole_word_mask=FLAGS.do_whole_word_mask,
      original_random_stream=FLAGS.original_random_stream, pack_sequences=FLAGS.pack_sequences,
      max_sequences_per_pack=FLAGS.max_sequences_per_pack)
  compression_type = "GZIP" if FLAGS.gzip else None
  try:
    if beam_options is None:
      logging.info("*** Reading from %d input file(s), %d worker(s) ***", len(inputs),
                   FLAGS.num_workers)
      stats = pretraining_data_writer.write_pretraining_data(
          inputs, outputs, settings, num_workers=FLAGS.num_workers,
          shard_documents=FLAGS.shard_documents, compression_type=compression_type,
          start_method=_worker_start_method())
    else:
      from data import beam_pretraining_data  # pylint: disable=g-import-not-at-top
      logging.info("*** Reading from %d input file(s) on Apache Beam's %s ***", len(inputs),
                   beam_options.get_all_options()["runner"])
      stats = beam_pretraining_data.write_pretraining_data(
          inputs, outputs, settings, beam_options, shard_documents=FLAGS.shard_documents,
          compression_type=compression_type)
  except pretraining_data_writer.NoDocumentsError as error:
    raise errors.UsageError(f"--input_file={FLAGS.input_file}: {error}") from None
  packs = f" in {stats['packs']} packs" if FLAGS.pack_sequences else ""
  logging.info("Wrote %d instances%s from %d documents to %d file(s) in %.1f s; statistics in %s",
               stats["instances"], packs, stats["documents"], len(outputs), stats["seconds"],
               pretraining_data_writer.stats_path(outputs[0]))


if __name__ == "__main__":
  cli.run(main, pass_unknown_flags=True)
