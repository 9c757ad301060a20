"""`learn_vocab.py`'s config: the text, the vocabulary file to write and its size."""

import dataclasses

from base import config
from base import output_locations
from data import file_patterns
from data import vocab_learning


@dataclasses.dataclass(kw_only=True)
class LearnVocabConfig(config.FlagConfig):
  """A WordPiece `vocab.txt` learned from text in the original pretraining input format (see
  the flags' help).

  Example:
    >>> from tasks.vocab.config import LearnVocabConfig
    >>> _ = open("corpus.txt", "w").write("Hello, world!\\n\\nHello again.\\n")
    >>> vocab_config = LearnVocabConfig(input_file="corpus.txt", vocab_file="learned.txt",
    ...                                 vocab_size=200, min_count=1)
    >>> vocab_config.validate()
    >>> vocab_config.input_paths()
    ['corpus.txt']
  """
  REQUIRED = ("input_file", "vocab_file")

  input_file: str | None = config.flag(
      "string", None, "Comma-separated globs of text files, one sentence per line (blank lines "
      "between documents are ignored).")
  vocab_file: str | None = config.flag(
      "string", None, "Where to write the vocabulary, one entry per line.")
  vocab_size: int = config.flag(
      "integer", 30522, "Maximum number of entries, special tokens and unused slots included.",
      lower_bound=1)
  do_lower_case: bool = config.flag(
      "bool", True, "Lower-case and strip accents before counting words; use the same value "
      "when tokenizing with the vocabulary.")
  num_unused: int = config.flag(
      "integer", vocab_learning.DEFAULT_NUM_UNUSED, "Number of [unusedN] slots between [PAD] "
      "and [UNK] (99 puts [UNK], [CLS], [SEP], [MASK] at ids 100-103 as in the released "
      "vocabularies).", lower_bound=0)
  min_count: int = config.flag(
      "integer", vocab_learning.DEFAULT_MIN_COUNT, "Word pieces seen fewer times than this are "
      "not learned; lower it for a small corpus.", lower_bound=1)

  def input_paths(self):
    """The files of --input_file's globs (`file_patterns.InputError` for a glob matching
    none)."""
    return file_patterns.expand_globs(self.input_file)

  def validate(self):
    """Every check before the text is read: where the vocabulary goes, the sizes, the input
    files.

    Raises:
      errors.UserError: the first problem found (its message names the flag or file).
    """
    output_locations.check_output_file("vocab_file", self.vocab_file)
    super().validate()
    self.input_paths()
