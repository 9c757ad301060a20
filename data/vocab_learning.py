"""Learning a WordPiece vocabulary with tensorflow-text's learner, laid out like the released ones.

Words are counted after this project's own basic tokenization (`graph_tokenization.basic_tokenize`,
identical to the original's `BasicTokenizer`), so the learned pieces fit the words the tokenizer
will actually produce; tensorflow-text's `bert_vocab_from_dataset` would count words split by its
own `BasicTokenizer`, which case-folds with NFKC.
"""

import collections

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from base import atomic_files
from data import graph_tokenization

# Released vocabularies put 99 unused slots between [PAD] and [UNK], so [UNK]=100 .. [MASK]=103.
DEFAULT_NUM_UNUSED = 99
_COUNT_BATCH_SIZE = 4096
# tensorflow-text's own default; small corpora need a lower one to fill the vocabulary.
DEFAULT_MIN_COUNT = 10


def reserved_tokens(num_unused):
  """Returns `[PAD]`, `[unused0]`..`[unused{num_unused-1}]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`."""
  return (["[PAD]"] + [f"[unused{i}]" for i in range(num_unused)]
          + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])


def count_words(lines, do_lower_case):
  """Counts the basic-tokenizer words of an iterable of text lines.

  Args:
    lines: iterable of str.
    do_lower_case: as the tokenizer that will use the vocabulary.

  Returns:
    collections.Counter of word -> count.
  """
  counts = collections.Counter()
  batch = []

  def flush():
    words = graph_tokenization.basic_tokenize(tf.constant(batch), do_lower_case)
    counts.update(word.decode("utf-8") for word in words.flat_values.numpy())
    batch.clear()

  for line in lines:
    batch.append(line)
    if len(batch) == _COUNT_BATCH_SIZE:
      flush()
  if batch:
    flush()
  return counts


def learn_vocab(word_counts, vocab_size, num_unused=DEFAULT_NUM_UNUSED,
                min_count=DEFAULT_MIN_COUNT):
  """Learns a WordPiece vocabulary of at most `vocab_size` entries, special tokens first.

  Args:
    word_counts: dict of word -> count.
    vocab_size: the maximum number of entries, special tokens and unused slots included.
    num_unused: number of `[unusedN]` slots.
    min_count: pieces seen fewer times are never learned (the learner's lower threshold).

  Returns:
    list of vocabulary entries, id = index.

  Raises:
    ValueError: no words, or a `vocab_size` with no room for learned pieces.
  """
  reserved = reserved_tokens(num_unused)
  if vocab_size <= len(reserved):
    raise ValueError(f"--vocab_size={vocab_size} leaves no room for learned pieces after "
                     f"{len(reserved)} special and unused tokens")
  if not word_counts:
    raise ValueError("no words to learn a vocabulary from")
  return learner.learn(word_counts, vocab_size, reserved, lower_thresh=min_count)


def write_vocab(vocab, vocab_file):
  """Writes one entry per line to `vocab_file`, which appears only when complete."""
  with atomic_files.open_for_writing(vocab_file) as writer:
    writer.write("".join(token + "\n" for token in vocab))
