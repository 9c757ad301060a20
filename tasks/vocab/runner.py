"""Learning a vocabulary: `run(config)` counts the words of the text and writes the WordPiece
vocabulary that covers them best.

Usage, from Python (learn_vocab.py does the same with the config of its flags):
  from tasks.vocab import runner
  from tasks.vocab.config import LearnVocabConfig
  result = runner.run(LearnVocabConfig(input_file="corpus/*.txt", vocab_file="vocab.txt"))
"""

import dataclasses

from absl import logging

from base import errors
from data import text_files
from data import vocab_learning


@dataclasses.dataclass(frozen=True)
class VocabResult:
  """What a run of `learn_vocab` wrote.

  Attributes:
    vocab_file: the vocabulary written.
    entries: its number of entries (special tokens and unused slots included).
    input_files: the number of text files read.
    lines: the number of lines read.
  """
  vocab_file: str
  entries: int
  input_files: int
  lines: int


def run(config):
  """Runs a `LearnVocabConfig` in this process: `config.validate()`, then the words counted
  and the vocabulary learned and written; callable more than once in one process.

  Returns:
    the `VocabResult`.

  Raises:
    errors.UserError: a flag or file the run cannot use, or text without words.
  """
  config.validate()
  files = config.input_paths()
  stats = text_files.DecodeStats()
  lines = (line for path in files for line in text_files.read_lines(path, stats))
  word_counts = vocab_learning.count_words(lines, config.do_lower_case)
  logging.info("counted %d distinct words in %d lines of %d file(s); %d line(s) held "
               "undecodable bytes (replaced)", len(word_counts), stats.lines, len(files),
               stats.undecodable_lines)
  if not word_counts:
    raise errors.UsageError(f"--input_file={config.input_file}: no words in {len(files)} file(s)")
  try:
    vocab = vocab_learning.learn_vocab(word_counts, config.vocab_size, config.num_unused,
                                       config.min_count)
  except ValueError as error:
    raise errors.UsageError(str(error)) from None
  vocab_learning.write_vocab(vocab, config.vocab_file)
  logging.info("wrote %d entries to %s", len(vocab), config.vocab_file)
  return VocabResult(vocab_file=config.vocab_file, entries=len(vocab), input_files=len(files),
                     lines=stats.lines)
