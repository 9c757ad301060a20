"""Pretraining-data creation: instances/s and peak memory, this project beside a pure-Python run.

Converts WikiText-2 valid (`data/wikitext.py`) to the original input format, then creates
instances at `--dupe_factor=5 --max_seq_length=128` with:
  - this project: `create_pretraining_data.py` with `--num_workers` processes (in-graph
    tokenizer, shards of `--shard_documents` documents, masking vectorised with NumPy);
  - the baseline: the same algorithm as the original's design, in one process from the project's
    pure-Python parts: the `FullTokenizer`, the transcription of the original's instance creation
    and per-instance masking on `random.Random` (`instances`, as
    `--original_random_stream`), and one `tf.train.Example` per instance.
Each run is a child process whose peak memory, summed over its process tree and sampled every
50 ms, is reported: resident (RSS, counting a page that forked processes share once in each),
and for the project's runs proportional (PSS, dividing it among them: the memory the run takes;
measured in a second run, see `_tree_memory_bytes`). The project also runs on the input repeated
10 and 40 times, to show that memory does not grow with the corpus. Throughput is printed twice:
over the whole run (start-up included: importing TensorFlow alone takes 4-5 s), and over each
run's own timing of its work, after the interpreter and the imports (the project's `stats.json`
seconds, which include starting its workers and tracing their tokenizers). The baseline runs at
1x, and at 2x before and after the project's runs (the machine's speed drifts: one baseline run
took 10.2 s and another 14.1 s); the work-time ratios are against the mean rate of the 2x runs.

Usage:
  python benchmarks/pretraining_data.py --wikitext=wikitext-2-valid.tokens.txt \
      --vocab_file=uncased_vocab.txt
"""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from data import wikitext  # pylint: disable=g-import-not-at-top
from tasks.pretraining import writer as writer_lib  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_string("wikitext", None, "wikitext-2-valid.tokens.txt")
flags.DEFINE_string("vocab_file", None, "Uncased vocab.")
flags.DEFINE_integer("num_workers", 2, "Workers of this project's runs.")
flags.DEFINE_integer("shard_documents", 60, "Documents per shard (WikiText-2 valid has 60 "
                     "articles, so 1x is one shard and 10x is ten).")
flags.DEFINE_integer("dupe_factor", 5, "As the issue's setting.")
flags.mark_flags_as_required(["wikitext", "vocab_file"])

REPO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# The original's design, from the project's pure-Python parts: one process, the whole corpus in
# memory, the `FullTokenizer`, the transcription of the original's instance creation and masking
# on `random.Random`, and each instance padded as lists and written as a `tf.train.Example`, as the
# original's `write_instance_to_example_files` does.
BASELINE = """
import sys
import time

import tensorflow as tf

from data import schemas
from data import text_files
from data import tokenization
from tasks.pretraining import instances as instances_lib
from tasks.pretraining import writer as writer_lib

start = time.perf_counter()
input_file, output_file, vocab_file, dupe_factor = sys.argv[1:]
tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
(documents, _), = writer_lib.read_document_shards([input_file], 10 ** 9,
                                                               text_files.DecodeStats())
documents = [[ids for ids in (tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
                              for line in document) if ids]
             for document in documents]
instances = instances_lib.create_instances(
    documents, int(dupe_factor), max_seq_length=128, short_seq_prob=0.1, masked_lm_prob=0.15,
    max_predictions_per_seq=20,
    special_ids=instances_lib.SpecialIds.from_vocab(tokenizer.vocab),
    do_whole_word_mask=False, rng=instances_lib.seeded_rng(12345, 0))

with tf.io.TFRecordWriter(output_file) as writer:
  for instance in instances:
    padding = [0] * (128 - len(instance.input_ids))
    num_predictions = len(instance.masked_lm_positions)
    prediction_padding = [0] * (20 - num_predictions)
    features = {
        "input_ids": schemas.int64_feature(instance.input_ids + padding),
        "input_mask": schemas.int64_feature([1] * len(instance.input_ids) + padding),
        "segment_ids": schemas.int64_feature(instance.segment_ids + padding),
        "masked_lm_positions": schemas.int64_feature(
            instance.masked_lm_positions + prediction_padding),
        "masked_lm_ids": schemas.int64_feature(instance.masked_lm_ids + prediction_padding),
        "masked_lm_weights": schemas.float_feature(
            [1.0] * num_predictions + [0.0] * len(prediction_padding)),
        "next_sentence_labels": schemas.int64_feature([int(instance.is_random_next)]),
    }
    writer.write(tf.train.Example(features=tf.train.Features(feature=features))
                 .SerializeToString())
print("INSTANCES", len(instances), "SECONDS", time.perf_counter() - start)
"""


@dataclasses.dataclass(frozen=True)
class Run:
  name: str
  times: int  # Copies of the input.
  seconds: float
  work_seconds: float  # After the interpreter's start and the imports.
  peak_rss: int  # Bytes, summed over the process tree.
  peak_pss: int  # None for one process.
  instances: int


def _tree_memory_bytes(pid, measure):
  """Memory of `pid` and all its descendants, summed, from /proc: "rss" or "pss".

  RSS counts a page shared by several processes (a forked worker's pages not yet written since
  the fork) once in each of them; PSS divides it among them, so its sum is the memory the tree
  takes. Reading PSS (`smaps_rollup`) walks each process's page tables: sampled every 50 ms it
  took enough CPU to slow the run measured (40x: 14.1 s of work in the benchmark, 11.2-11.8 s in
  unsampled runs of the same code), so it has runs of its own.
  """
  path, field = ("status", "VmRSS:") if measure == "rss" else ("smaps_rollup", "Pss:")
  total, stack = 0, [pid]
  while stack:
    current = stack.pop()
    try:
      with open(f"/proc/{current}/{path}") as lines:
        total += sum(int(line.split()[1]) * 1024 for line in lines if line.startswith(field))
      for task in os.listdir(f"/proc/{current}/task"):
        with open(f"/proc/{current}/task/{task}/children") as children:
          stack.extend(int(child) for child in children.read().split())
    except (FileNotFoundError, ProcessLookupError):
      continue
  return total


def run_measured(command, measure="rss"):
  """Runs `command`; returns (seconds, peak tree memory in bytes by `measure`, stdout+stderr)."""
  start = time.perf_counter()
  process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             env=dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2"))
  peak = 0
  while process.poll() is None:
    peak = max(peak, _tree_memory_bytes(process.pid, measure))
    time.sleep(0.05)
  output = process.stdout.read()
  if process.returncode:
    raise RuntimeError(f"{command[:3]} failed:\n{output[-3000:]}")
  return time.perf_counter() - start, peak, output


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as temp_dir:
    with open(FLAGS.wikitext, encoding="utf-8") as reader:
      text = "\n".join(wikitext.to_documents(reader)) + "\n"
    corpora = {}
    for times in (1, 2, 10, 40):
      corpora[times] = os.path.join(temp_dir, f"wikitext_{times}x.txt")
      with open(corpora[times], "w", encoding="utf-8") as writer:
        writer.write("\n".join([text] * times))

    def project(times, name):
      output = os.path.join(temp_dir, f"{name}.tfrecord")
      command = [
          sys.executable, "create_pretraining_data.py", f"--input_file={corpora[times]}",
          f"--output_file={output}", f"--vocab_file={FLAGS.vocab_file}",
          "--max_seq_length=128", "--max_predictions_per_seq=20",
          f"--dupe_factor={FLAGS.dupe_factor}", f"--num_workers={FLAGS.num_workers}",
          f"--shard_documents={FLAGS.shard_documents}"]
      seconds, peak_rss, log = run_measured(command)
      instances = int(log.split("Wrote ")[1].split(" ")[0])
      with open(writer_lib.stats_path(output), encoding="utf-8") as stats:
        work_seconds = json.load(stats)["seconds"]
      _, peak_pss, _ = run_measured(command, measure="pss")
      return Run(f"this project, {FLAGS.num_workers} workers", times, seconds, work_seconds,
                 peak_rss, peak_pss, instances)

    def baseline(times, name):
      output = os.path.join(temp_dir, f"{name}.tfrecord")
      seconds, peak_rss, log = run_measured([
          sys.executable, "-c", BASELINE, corpora[times], output, FLAGS.vocab_file,
          str(FLAGS.dupe_factor)])
      instances, work_seconds = log.split("INSTANCES ")[1].split()[0:3:2]
      # One process: its PSS is its RSS but for the pages it shares with other programs.
      return Run("pure Python, 1 process (the original's design)", times, seconds,
                 float(work_seconds), peak_rss, None, int(instances))

    runs = {}
    runs["baseline", 1] = baseline(1, "baseline_1x")
    runs["baseline", 2, "before"] = baseline(2, "baseline_2x")
    for times in (1, 10, 40):
      runs["project", times] = project(times, f"{times}x")
    runs["baseline", 2, "after"] = baseline(2, "baseline_2x")
    input_mb = os.path.getsize(corpora[1]) / 1e6

  baseline_rate = runs["baseline", 1].instances / runs["baseline", 1].seconds
  baseline_2x_rates = [runs["baseline", 2, when].instances / runs["baseline", 2, when].work_seconds
                       for when in ("before", "after")]
  baseline_work_rate = sum(baseline_2x_rates) / 2
  print(f"\nWikiText-2 valid ({input_mb:.2f} MB as documents), dupe_factor {FLAGS.dupe_factor}, "
        f"max_seq_length 128; {os.cpu_count()} cores. Whole run: wall time with interpreter and "
        "TensorFlow start-up; work: the run's own timing, after them")
  print(f"| {'run':<46} | input | {'instances':>9} | {'seconds':>7} | {'instances/s':>11} | "
        f"{'vs baseline 1x':>14} | {'work s':>6} | {'work inst/s':>11} | {'vs baseline 2x':>14} | "
        f"{'peak RSS MB':>11} | {'peak PSS MB':>11} |")
  print(f"|{'-' * 48}|-------|{'-' * 11}|{'-' * 9}|{'-' * 13}|{'-' * 16}|{'-' * 8}|{'-' * 13}|"
        f"{'-' * 16}|{'-' * 13}|{'-' * 13}|")
  for run in runs.values():
    rate = run.instances / run.seconds
    work_rate = run.instances / run.work_seconds
    print(f"| {run.name:<46} | {run.times:>4}x | {run.instances:>9,} | {run.seconds:>7.1f} | "
          f"{rate:>11,.0f} | {rate / baseline_rate:>13.1f}x | {run.work_seconds:>6.1f} | "
          f"{work_rate:>11,.0f} | {work_rate / baseline_work_rate:>13.1f}x | "
          f"{run.peak_rss / 1e6:>11,.0f} | "
          f"{'-' if run.peak_pss is None else f'{run.peak_pss / 1e6:,.0f}':>11} |")
  print(f"baseline 2x work rate before and after the project's runs: {baseline_2x_rates[0]:,.0f} "
        f"and {baseline_2x_rates[1]:,.0f} instances/s; the ratios use their mean, "
        f"{baseline_work_rate:,.0f}")
  print(f"peak memory 10x / 1x (this project): RSS "
        f"{runs['project', 10].peak_rss / runs['project', 1].peak_rss:.2f}, PSS "
        f"{runs['project', 10].peak_pss / runs['project', 1].peak_pss:.2f}")


if __name__ == "__main__":
  app.run(main)
