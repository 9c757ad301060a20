"""Pretraining-data creation: marginal seconds per MB, the original release's script beside ours.

Runs the original release's `create_pretraining_data.py` (Google's, from the `bert-tensorflow`
wheel on PyPI, unchanged) and this project's `create_pretraining_data.py` with the same flags
(`--do_lower_case=True --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15
--random_seed=12345 --dupe_factor=5`; ours with its defaults for the rest: a worker per core,
`--shard_documents=10000`), each on WikiText-2 valid in the original input format
(`data/wikitext.py`) repeated at two sizes. Each run is a fresh process timed from its start to
its end; the rate compared is the marginal time per MB of input, (t2 - t1) / (MB2 - MB1), so
what each pays once (the interpreter, importing TensorFlow, loading the vocab, starting workers)
cancels. Before them each script runs once, untimed, on its smaller size (`--warmup`): what only
a first process pays (this project's modules compiled to `.pyc` in a fresh checkout, libraries
read from disk into the page cache) would otherwise fall on one timed run and skew the rate.
Ours is faster, so it runs on larger multiples of the input than the original, which takes 3-4 s
per copy.

The original is TF1 code (`tf.flags`, `tf.gfile`, `tf.python_io.TFRecordWriter`); a launcher
(`LAUNCHER`) puts the wheel on `sys.path` as a zip, maps `tensorflow` to `tensorflow.compat.v1`,
and calls its `main` through `tf.app.run`, as its own `__main__` block does. The wheel is
`--original_wheel`, or `pip download --no-deps bert-tensorflow==1.0.4` into
`--wheel_cache_dir` (once; later runs reuse it).

With `--profile` it runs neither script, but times each step of ours on the largest project
size's input (its first shard, as the real run makes it: all workers tokenize a run's only shard
together, then each lays out the whole shard and masks, serializes and writes its share of the
instances; here the first share), each step alone in this process, by calling the writer's own
functions; the main process's steps (reading, appending the part to the output) are timed here
too.

The check: the instance counts of the two (ours lays out the original's instances, the shards
of 10,000 documents drawing their random next sentences from their own shard), and one record of
each with the same feature names and value counts.

Usage (the lock keeps other benchmarks off the two cores while it runs):
  flock /tmp/bench.lock python benchmarks/original_pretraining_data.py \
      --wikitext=wikitext-2-valid.tokens.txt --vocab_file=uncased_vocab.txt [--profile]
"""

import collections
import concurrent.futures
import contextlib
import dataclasses
import glob
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from data import text_files  # pylint: disable=g-import-not-at-top
from data import wikitext  # pylint: disable=g-import-not-at-top
from tasks.pretraining import examples  # pylint: disable=g-import-not-at-top
from tasks.pretraining import layout  # pylint: disable=g-import-not-at-top
from tasks.pretraining import masking  # pylint: disable=g-import-not-at-top
from tasks.pretraining import writer as writer_lib  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_string("wikitext", None, "wikitext-2-valid.tokens.txt")
flags.DEFINE_string("vocab_file", None, "Uncased vocab.")
flags.DEFINE_string("original_wheel", None, "The bert-tensorflow wheel; default: downloaded "
                    "into --wheel_cache_dir.")
flags.DEFINE_string("wheel_cache_dir", os.path.join(tempfile.gettempdir(), "bert-tensorflow-wheel"),
                    "Where `pip download` puts the original's wheel (reused when there).")
flags.DEFINE_string("original_version", "1.0.4", "bert-tensorflow version to download.")
flags.DEFINE_list("original_sizes", ["5", "20"], "Copies of the input for the original's runs.")
flags.DEFINE_list("project_sizes", ["10", "40"], "Copies of the input for this project's runs.")
flags.DEFINE_integer("num_workers", None, "Workers of this project's runs (default: its own, "
                     "one per core).")
flags.DEFINE_integer("shard_documents", None, "This project's --shard_documents (default: its "
                     "own, 10,000).")
flags.DEFINE_bool("warmup", True, "One untimed run of each script on its smaller size first.")
flags.DEFINE_bool("profile", False, "Instead of the comparison: the seconds of each step of ours "
                  "on the largest --project_sizes input (see the module's docstring).")
flags.mark_flags_as_required(["wikitext", "vocab_file"])

REPO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# The original's flags (its defaults but for --dupe_factor), given to both scripts.
COMMON_FLAGS = ["--do_lower_case=True", "--max_seq_length=128", "--max_predictions_per_seq=20",
                "--masked_lm_prob=0.15", "--random_seed=12345", "--dupe_factor=5"]

# Runs the original script unchanged: argv[1] is the wheel, the rest its flags.
LAUNCHER = """
import sys

sys.path.insert(0, sys.argv.pop(1))  # The wheel, imported as a zip.
import tensorflow.compat.v1 as tf
sys.modules["tensorflow"] = tf
from bert import create_pretraining_data as original

for name in ("input_file", "output_file", "vocab_file"):
  original.flags.mark_flag_as_required(name)
tf.app.run(original.main)
"""

# One record's feature names and value counts, as "name:count" words.
FEATURES = """
import sys

import tensorflow as tf

record = next(iter(tf.data.TFRecordDataset(sys.argv[1]))).numpy()
example = tf.train.Example.FromString(record)
for name, feature in sorted(example.features.feature.items()):
  kind = feature.WhichOneof("kind")
  print(f"{name}:{kind}:{len(getattr(feature, kind).value)}")
"""


@dataclasses.dataclass(frozen=True)
class Run:
  name: str
  times: int  # Copies of the input.
  megabytes: float
  seconds: float  # The whole process.
  instances: int
  work_seconds: float | None = None  # Ours: its stats.json seconds.


def original_wheel():
  """The bert-tensorflow wheel: --original_wheel, or the one in --wheel_cache_dir (downloaded
  with pip if absent)."""
  if FLAGS.original_wheel:
    return FLAGS.original_wheel
  pattern = os.path.join(FLAGS.wheel_cache_dir,
                         f"bert_tensorflow-{FLAGS.original_version}-*.whl")
  if not glob.glob(pattern):
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                    f"bert-tensorflow=={FLAGS.original_version}", "-d", FLAGS.wheel_cache_dir],
                   check=True)
  return sorted(glob.glob(pattern))[-1]


def run_timed(command, log_path):
  """Runs `command` from the repository's root; returns (seconds, its output)."""
  start = time.perf_counter()
  with open(log_path, "w+", encoding="utf-8") as log:
    process = subprocess.run(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                             env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    seconds = time.perf_counter() - start
    log.seek(0)
    output = log.read()
  if process.returncode:
    raise RuntimeError(f"{command[:3]} failed:\n{output[-3000:]}")
  return seconds, output


def features_of(path):
  return subprocess.run([sys.executable, "-c", FEATURES, path], check=True, capture_output=True,
                        text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout.split()


def marginal(small, large):
  """Seconds per MB of input between two runs of one implementation."""
  return (large.seconds - small.seconds) / (large.megabytes - small.megabytes)


def write_corpora(sizes, temp_dir):
  """Writes --wikitext as documents, repeated `times` for each of `sizes`; returns
  {times: path}."""
  with open(FLAGS.wikitext, encoding="utf-8") as reader:
    text = "\n".join(wikitext.to_documents(reader)) + "\n"
  corpora = {}
  for times in sorted(set(sizes)):
    corpora[times] = os.path.join(temp_dir, f"wikitext_{times}x.txt")
    with open(corpora[times], "w", encoding="utf-8") as writer:
      writer.write("\n".join([text] * times))
  return corpora


@contextlib.contextmanager
def timed(module, name, seconds, step):
  """Within it, calls of `module.name` add their seconds to `seconds[step]`."""
  function = getattr(module, name)

  def timed_function(*args, **kwargs):
    start = time.perf_counter()
    try:
      return function(*args, **kwargs)
    finally:
      seconds[step] += time.perf_counter() - start

  setattr(module, name, timed_function)
  try:
    yield
  finally:
    setattr(module, name, function)


def profile(corpus, temp_dir):
  """Prints the seconds of each step of ours on the first shard of `corpus` (see the module's
  docstring)."""
  num_workers = FLAGS.num_workers or os.cpu_count()
  settings = writer_lib.Settings(
      vocab_file=FLAGS.vocab_file, do_lower_case=True, max_seq_length=128,
      max_predictions_per_seq=20, random_seed=12345, dupe_factor=5, masked_lm_prob=0.15,
      short_seq_prob=0.1, do_whole_word_mask=False)
  seconds = collections.Counter()
  start = time.perf_counter()
  documents, num_bytes = next(writer_lib.read_document_shards(
      [corpus], FLAGS.shard_documents or 10000, text_files.DecodeStats()))
  seconds["read and split documents (main process)"] = time.perf_counter() - start
  # Forked before this process runs a TensorFlow op, as the writer's workers.
  start = time.perf_counter()
  with concurrent.futures.ProcessPoolExecutor(
      num_workers, mp_context=multiprocessing.get_context("fork"),
      initializer=writer_lib._start_worker, initargs=(num_workers, os.getpid())) as executor:  # pylint: disable=protected-access
    tokenized = writer_lib._tokenized_by_workers(executor, num_workers, documents, settings)  # pylint: disable=protected-access
  seconds[f"tokenize in the graph ({num_workers} workers, their start included)"] = (
      time.perf_counter() - start)
  # This process now makes the shard as the worker given the only shard does.
  writer_lib._share_the_cores(num_workers)  # pylint: disable=protected-access
  writer_lib._keep_freed_memory()  # pylint: disable=protected-access
  steps = [(layout, "lay_out", "layout: the random draws"),
           (layout, "pack", "layout: truncate and pack"),
           (masking, "mask_batch", "masking"),
           (examples, "serialize", "serialize"),
           (writer_lib, "_write_parts", "write the part file")]
  seconds.update({step: 0.0 for _, _, step in steps})  # The table's order.
  start = time.perf_counter()
  with contextlib.ExitStack() as stack:
    for module, name, step in steps:
      stack.enter_context(timed(module, name, seconds, step))
    (part_path,), counts = writer_lib.process_shard(
        0, None, settings, 1, None, temp_dir, tokenized=tokenized, share=(0, num_workers))
  seconds["other (statistics)"] = (
      time.perf_counter() - start - sum(seconds[step] for _, _, step in steps))
  start = time.perf_counter()
  with writer_lib.open_output(os.path.join(temp_dir, "output.tfrecord")) as output:
    writer_lib.append_file(part_path, output)
  seconds["append the part to the output (main process)"] = time.perf_counter() - start
  print(f"\n{num_bytes / 1e6:.1f} MB, {counts['documents']:,} documents, "
        f"{counts['instances']:,} instances in the first of {num_workers} shares; "
        f"{' '.join(COMMON_FLAGS)}")
  print(f"| {'step':<62} | seconds |\n|{'-' * 64}|---------|")
  for step, value in seconds.items():
    print(f"| {step:<62} | {value:>7.2f} |")
  print(f"| {'total':<62} | {sum(seconds.values()):>7.2f} |")


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as temp_dir:
    if FLAGS.profile:
      largest = max(map(int, FLAGS.project_sizes))
      profile(write_corpora([largest], temp_dir)[largest], temp_dir)
      return
    wheel = original_wheel()
    corpora = write_corpora(map(int, FLAGS.original_sizes + FLAGS.project_sizes), temp_dir)

    def megabytes(times):
      return os.path.getsize(corpora[times]) / 1e6

    def original(times):
      output = os.path.join(temp_dir, f"original_{times}x.tfrecord")
      seconds, log = run_timed(
          [sys.executable, "-c", LAUNCHER, wheel, f"--input_file={corpora[times]}",
           f"--output_file={output}", f"--vocab_file={FLAGS.vocab_file}", *COMMON_FLAGS],
          os.path.join(temp_dir, f"original_{times}x.log"))
      instances = int(log.split("Wrote ")[-1].split(" ")[0])
      return Run("original (bert-tensorflow " + FLAGS.original_version + ")", times,
                 megabytes(times), seconds, instances), output

    def project(times):
      output = os.path.join(temp_dir, f"project_{times}x.tfrecord")
      command = [sys.executable, "create_pretraining_data.py", f"--input_file={corpora[times]}",
                 f"--output_file={output}", f"--vocab_file={FLAGS.vocab_file}", *COMMON_FLAGS]
      for name in ("num_workers", "shard_documents"):
        if FLAGS[name].value is not None:
          command.append(f"--{name}={FLAGS[name].value}")
      seconds, log = run_timed(command, os.path.join(temp_dir, f"project_{times}x.log"))
      instances = int(log.split("Wrote ")[-1].split(" ")[0])
      with open(writer_lib.stats_path(output), encoding="utf-8") as stats:
        work_seconds = json.load(stats)["seconds"]
      return Run("this project", times, megabytes(times), seconds, instances,
                 work_seconds), output

    if FLAGS.warmup:
      original(int(FLAGS.original_sizes[0]))
      project(int(FLAGS.project_sizes[0]))
    runs, outputs = {}, {}
    for times in map(int, FLAGS.original_sizes):
      runs["original", times], outputs["original", times] = original(times)
    for times in map(int, FLAGS.project_sizes):
      runs["project", times], outputs["project", times] = project(times)
    original_features = features_of(outputs["original", int(FLAGS.original_sizes[0])])
    project_features = features_of(outputs["project", int(FLAGS.project_sizes[0])])

  workers = FLAGS.num_workers or f"default ({os.cpu_count()})"
  shard_documents = FLAGS.shard_documents or "default (10,000)"
  print(f"\nWikiText-2 valid as documents ({runs['original', int(FLAGS.original_sizes[0])].megabytes / int(FLAGS.original_sizes[0]):.2f} MB per copy); "
        f"{' '.join(COMMON_FLAGS)}; {os.cpu_count()} cores; ours: workers {workers}, "
        f"shard_documents {shard_documents}")
  print(f"| {'run':<32} | copies | {'MB':>6} | {'instances':>9} | {'instances/MB':>12} | "
        f"{'seconds':>7} | {'ours: work s':>12} |")
  print(f"|{'-' * 34}|--------|{'-' * 8}|{'-' * 11}|{'-' * 14}|{'-' * 9}|{'-' * 14}|")
  for run in runs.values():
    work = "" if run.work_seconds is None else f"{run.work_seconds:.1f}"
    print(f"| {run.name:<32} | {run.times:>5}x | {run.megabytes:>6.1f} | {run.instances:>9,} | "
          f"{run.instances / run.megabytes:>12,.0f} | {run.seconds:>7.1f} | {work:>12} |")
  rates = {}
  for name, sizes in (("original", FLAGS.original_sizes), ("project", FLAGS.project_sizes)):
    small, large = (runs[name, int(size)] for size in sizes)
    rates[name] = marginal(small, large)
    print(f"{name}: marginal {rates[name]:.3f} s/MB ({small.times}x -> {large.times}x: "
          f"{large.seconds - small.seconds:.1f} s for {large.megabytes - small.megabytes:.1f} MB), "
          f"{1 / rates[name]:.2f} MB/s")
  print(f"ratio original / ours (marginal s per MB): {rates['original'] / rates['project']:.1f}x "
        "(target: at least 20x)")
  per_mb = {name: [run.instances / run.megabytes for (kind, _), run in runs.items()
                   if kind == name] for name in ("original", "project")}
  difference = (sum(per_mb["project"]) / len(per_mb["project"])
                / (sum(per_mb["original"]) / len(per_mb["original"])) - 1)
  print(f"instances per MB: original {min(per_mb['original']):,.0f}-"
        f"{max(per_mb['original']):,.0f}, ours {min(per_mb['project']):,.0f}-"
        f"{max(per_mb['project']):,.0f}: ours {difference:+.1%} (the same layout; its "
        "random.Random stream differs from the original's once masking draws from NumPy)")
  same = original_features == project_features
  print(f"features of one record: {'the same' if same else 'DIFFERENT'} names and value "
        f"counts: {' '.join(project_features)}"
        + ("" if same else f"; original: {' '.join(original_features)}"))


if __name__ == "__main__":
  app.run(main)
