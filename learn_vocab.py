"""Learns a WordPiece `vocab.txt` from text in the original pretraining input format.

Example:
  python learn_vocab.py --input_file='corpus/*.txt' --vocab_file=vocab.txt --vocab_size=30522
"""

from base import cli
from tasks.vocab import runner
from tasks.vocab.config import LearnVocabConfig

if __name__ == "__main__":
  cli.run_config(LearnVocabConfig, runner.run)
