"""Prints the word pieces of the first lines of a text file, from both tokenizers.

Used by `make demo` to show a learned vocabulary at work; exits 1 if the pure-Python and the
in-graph tokenizer ever disagree.
"""

import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import base  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (TensorFlow, quietly)
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from data import graph_tokenization  # pylint: disable=g-import-not-at-top
from data import text_files  # pylint: disable=g-import-not-at-top
from data import tokenization  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file, one sentence per line.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocab.")
flags.DEFINE_bool("do_lower_case", True, "Uncased tokenization.")
flags.DEFINE_integer("show", 3, "How many lines to print.")
flags.mark_flags_as_required(["input_file", "vocab_file"])


def main(argv):
  del argv
  lines = [line for line in text_files.read_lines(FLAGS.input_file) if line.strip()]
  full = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  graph = graph_tokenization.GraphTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  graph_ids = graph.tokenize(tf.constant(lines)).to_list()
  num_pieces = num_unknown = 0
  for index, (line, ids) in enumerate(zip(lines, graph_ids)):
    pieces = full.tokenize(line)
    if full.convert_tokens_to_ids(pieces) != ids:
      print(f"{FLAGS.input_file}:{index + 1}: tokenizers disagree: {line!r}", file=sys.stderr)
      sys.exit(1)
    num_pieces += len(pieces)
    num_unknown += pieces.count("[UNK]")
    if index < FLAGS.show:
      print(f"{line}\n  -> {' '.join(pieces)}")
  print(f"{len(lines)} lines, {num_pieces} word pieces, {num_unknown} [UNK]; the Python and "
        "in-graph tokenizers agree on every line")


if __name__ == "__main__":
  app.run(main)
