"""Learns a WordPiece `vocab.txt` from text in the original pretraining input format.

Example:
  python learn_vocab.py --input_file='corpus/*.txt' --vocab_file=vocab.txt --vocab_size=30522
"""

from absl import flags
from absl import logging

from base import cli
from base import errors
from data import file_patterns
from data import text_files
from data import vocab_learning

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Comma-separated globs of text files, one sentence per "
                    "line (blank lines between documents are ignored).")
flags.DEFINE_string("vocab_file", None, "Where to write the vocabulary, one entry per line.")
flags.DEFINE_integer("vocab_size", 30522, "Maximum number of entries, special tokens and unused "
                     "slots included.", lower_bound=1)
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents before counting words; "
                  "use the same value when tokenizing with the vocabulary.")
flags.DEFINE_integer("num_unused", vocab_learning.DEFAULT_NUM_UNUSED,
                     "Number of [unusedN] slots between [PAD] and [UNK] (99 puts [UNK], [CLS], "
                     "[SEP], [MASK] at ids 100-103 as in the released vocabularies).",
                     lower_bound=0)
flags.DEFINE_integer("min_count", vocab_learning.DEFAULT_MIN_COUNT,
                     "Word pieces seen fewer times than this are not learned; lower it for a "
                     "small corpus.", lower_bound=1)
flags.mark_flags_as_required(["input_file", "vocab_file"])


def main(argv):
  del argv
  files = file_patterns.expand_globs(FLAGS.input_file)
  stats = text_files.DecodeStats()
  lines = (line for path in files for line in text_files.read_lines(path, stats))
  word_counts = vocab_learning.count_words(lines, FLAGS.do_lower_case)
  logging.info("counted %d distinct words in %d lines of %d file(s); %d line(s) held "
               "undecodable bytes (replaced)", len(word_counts), stats.lines, len(files),
               stats.undecodable_lines)
  if not word_counts:
    raise errors.UsageError(f"--input_file={FLAGS.input_file}: no words in {len(files)} file(s)")
  try:
    vocab = vocab_learning.learn_vocab(word_counts, FLAGS.vocab_size, FLAGS.num_unused,
                                       FLAGS.min_count)
  except ValueError as error:
    raise errors.UsageError(str(error)) from None
  vocab_learning.write_vocab(vocab, FLAGS.vocab_file)
  logging.info("wrote %d entries to %s", len(vocab), FLAGS.vocab_file)


if __name__ == "__main__":
  cli.run(main, output_file_flags=("vocab_file",))
