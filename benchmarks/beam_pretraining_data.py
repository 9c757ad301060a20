"""Pretraining data on Apache Beam beside the local path: the overhead of the pipeline on one machine.

Writes WikiText-2 valid (`data/wikitext.py`) in the original input format as 10 files, once (1x)
and ten times over (10x), and creates instances from each with `create_pretraining_data.py` at
`--dupe_factor=5 --max_seq_length=128 --shard_documents=10`:
  - the local path, `--num_workers` processes;
  - Beam's FnApiRunner (the DirectRunner's local engine) in multi-process mode with as many
    workers, and in its one-process mode.
Each run is repeated `--repeats` times (alternating, as the machine's speed drifts); the table
shows the median. Whole run: the wall time of the command, interpreter and imports included;
work: the run's own timing in its statistics (for Beam: from building the pipeline to the last
step). Every run's outputs are checked to be the local path's, byte for byte.

Usage:
  python benchmarks/beam_pretraining_data.py \
      --wikitext=wikitext-2-valid.tokens.txt --vocab_file=uncased_vocab.txt
"""

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from data import wikitext  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_string("wikitext", None, "wikitext-2-valid.tokens.txt")
flags.DEFINE_string("vocab_file", None, "Uncased vocab.")
flags.DEFINE_integer("num_workers", 2, "Local workers, and the Beam runner's workers.")
flags.DEFINE_integer("repeats", 3, "Runs of each command at each size.")
flags.mark_flags_as_required(["wikitext", "vocab_file"])

REPO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NUM_FILES = 10


def _write_corpus(text_documents, times, directory):
  """Writes the documents `times` over as NUM_FILES files; returns their glob."""
  os.makedirs(directory)
  documents = text_documents * times
  per_file = -(-len(documents) // NUM_FILES)
  for index in range(NUM_FILES):
    with open(os.path.join(directory, f"part-{index}.txt"), "w", encoding="utf-8") as writer:
      writer.write("\n\n".join(documents[index * per_file:(index + 1) * per_file]) + "\n")
  return os.path.join(directory, "part-*.txt")


def _run(inputs, output, extra):
  """Runs the script; returns (wall seconds, its statistics, sha256 of its output)."""
  start = time.perf_counter()
  result = subprocess.run(
      [sys.executable, "create_pretraining_data.py", f"--input_file={inputs}",
       f"--output_file={output}", f"--vocab_file={FLAGS.vocab_file}", "--max_seq_length=128",
       "--max_predictions_per_seq=20", "--dupe_factor=5", "--shard_documents=10", *extra],
      cwd=REPO_ROOT, capture_output=True, text=True,
      env=dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2"))
  seconds = time.perf_counter() - start
  if result.returncode:
    raise RuntimeError(f"{extra} failed:\n{result.stderr[-3000:]}")
  directory, name = os.path.split(output)
  with open(os.path.join(directory, f"_{name}.stats.json"), encoding="utf-8") as reader:
    stats = json.load(reader)
  with open(output, "rb") as reader:
    digest = hashlib.sha256(reader.read()).hexdigest()
  return seconds, stats, digest


def main(argv):
  del argv
  commands = {
      f"local path, {FLAGS.num_workers} workers": [f"--num_workers={FLAGS.num_workers}"],
      f"Beam FnApiRunner, multi_processing, {FLAGS.num_workers} workers": [
          "--runner=FnApiRunner", "--direct_running_mode=multi_processing",
          f"--direct_num_workers={FLAGS.num_workers}"],
      "Beam FnApiRunner, in_memory (1 process)": ["--runner=FnApiRunner"],
  }
  with open(FLAGS.wikitext, encoding="utf-8") as reader:
    text = "\n".join(wikitext.to_documents(reader))
  documents = [document for document in text.split("\n\n") if document.strip()]
  rows = []
  with tempfile.TemporaryDirectory() as temp_dir:
    for times in (1, 10):
      inputs = _write_corpus(documents, times, os.path.join(temp_dir, f"corpus_{times}x"))
      runs = {name: [] for name in commands}
      for repeat in range(FLAGS.repeats):
        for index, (name, extra) in enumerate(commands.items()):
          output = os.path.join(temp_dir, f"out_{times}x_{index}_{repeat}.tfrecord")
          runs[name].append(_run(inputs, output, extra))
      local_digest = runs[next(iter(commands))][0][2]
      for name, measured in runs.items():
        if any(digest != local_digest for _, _, digest in measured):
          raise RuntimeError(f"{name}: the output differs from the local path's")
        instances = measured[0][1]["instances"]
        rows.append((name, times, instances,
                     statistics.median(seconds for seconds, _, _ in measured),
                     statistics.median(stats["seconds"] for _, stats, _ in measured)))
  print(f"\nWikiText-2 valid as {NUM_FILES} files, dupe_factor 5, max_seq_length 128, shards of "
        f"10 documents; {os.cpu_count()} cores; median of {FLAGS.repeats} runs. Every output is "
        "the local path's, byte for byte.")
  print(f"| {'run':<46} | input | {'instances':>9} | {'seconds':>7} | {'work s':>6} | "
        f"{'work inst/s':>11} | {'work vs local':>13} |")
  print(f"|{'-' * 48}|-------|{'-' * 11}|{'-' * 9}|{'-' * 8}|{'-' * 13}|{'-' * 15}|")
  local_work = {times: work for name, times, _, _, work in rows if name.startswith("local")}
  for name, times, instances, seconds, work in rows:
    print(f"| {name:<46} | {times:>4}x | {instances:>9,} | {seconds:>7.1f} | {work:>6.1f} | "
          f"{instances / work:>11,.0f} | {work / local_work[times]:>12.1f}x |")


if __name__ == "__main__":
  app.run(main)
