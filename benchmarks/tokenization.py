"""Tokenization throughput: this project's paths beside HuggingFace's Rust tokenizer, one run.

Prints MB/s and word-pieces/s for `FullTokenizer` (pure Python), `GraphTokenizer` (batches of
lines, one process, as each data-creation worker uses it) and HuggingFace's `BertTokenizerFast`
(Rust, batched), all on the same text and vocab, with a plain
`str.lower().split()` pass beside them as this machine's floor for touching every byte in Python.

Usage:
  python benchmarks/tokenization.py --text_file=wikitext-2-valid.tokens.txt \
      --vocab_file=uncased_vocab.txt [--repeat=3]
"""

import os
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import base  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (TF as the scripts start it)
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from data import graph_tokenization  # pylint: disable=g-import-not-at-top
from data import tokenization  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_string("text_file", None, "UTF-8 text, one line per example (>= 1 MB).")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab.")
flags.DEFINE_bool("do_lower_case", True, "Uncased tokenization.")
flags.DEFINE_integer("repeat", 3, "Timed repetitions per path; the best is reported.")
flags.DEFINE_integer("batch_size", 1024, "Lines per batch for the batched paths.")
flags.mark_flags_as_required(["text_file", "vocab_file"])


def _best_time(function, repeat):
  """Returns (best seconds, result) of `repeat` calls after one warm-up call."""
  result = function()
  best = float("inf")
  for _ in range(repeat):
    start = time.perf_counter()
    result = function()
    best = min(best, time.perf_counter() - start)
  return best, result


def main(argv):
  del argv
  with open(FLAGS.text_file, encoding="utf-8") as reader:
    lines = [line for line in reader.read().splitlines() if line.strip()]
  megabytes = sum(len(line.encode("utf-8")) + 1 for line in lines) / 1e6
  batches = [lines[i:i + FLAGS.batch_size] for i in range(0, len(lines), FLAGS.batch_size)]

  full = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  graph = graph_tokenization.GraphTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)

  def floor():
    return sum(len(line.lower().split()) for line in lines)

  def python_path():
    return sum(len(full.tokenize(line)) for line in lines)

  def graph_batches():
    return sum(int(graph.tokenize(tf.constant(batch)).flat_values.shape[0]) for batch in batches)

  from transformers import BertTokenizerFast  # pylint: disable=g-import-not-at-top
  rust = BertTokenizerFast(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)

  def rust_path():
    return sum(len(ids) for ids in rust(lines, add_special_tokens=False)["input_ids"])

  paths = [
      ("str.lower().split() (floor: touch every byte)", floor),
      ("FullTokenizer, pure Python", python_path),
      ("GraphTokenizer, batches", graph_batches),
      ("HuggingFace BertTokenizerFast (Rust, batched)", rust_path),
  ]
  print(f"{len(lines)} lines, {megabytes:.2f} MB, {os.cpu_count()} cores, "
        f"best of {FLAGS.repeat}")
  print(f"{'path':52s} {'seconds':>8s} {'MB/s':>8s} {'pieces/s':>11s} {'vs Python':>9s}")
  python_seconds = None
  for name, function in paths:
    seconds, pieces = _best_time(function, FLAGS.repeat)
    if name.startswith("FullTokenizer"):
      python_seconds = seconds
    speedup = f"{python_seconds / seconds:8.1f}x" if python_seconds else ""
    print(f"{name:52s} {seconds:8.3f} {megabytes / seconds:8.2f} {pieces / seconds:11,.0f} "
          f"{speedup:>9s}")


if __name__ == "__main__":
  app.run(main)
