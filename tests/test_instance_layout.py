"""The fast layout (`layout`, on token ranges) against the transcription of the original
(`instances`, on lists): the same instances from the same documents and seed."""

import collections
import random

import numpy as np
import pytest

from data import tokenization
from tasks.pretraining import batches
from tasks.pretraining import instances as instances_lib
from tasks.pretraining import layout
from tests.conftest import SAMPLES_DIR

# Ids 0-2: [CLS], [SEP], [MASK]; the rest words.
SPECIAL_IDS = instances_lib.SpecialIds(cls_id=0, sep_id=1, mask_id=2, vocab_size=100,
                                               is_continuation=[False] * 100)
MAX_PREDICTIONS = 5


def both_layouts(lines, lines_per_document, dupe_factor, max_seq_length, short_seq_prob, seed,
                 special_ids=SPECIAL_IDS):
  """(fast batch, fast counts, transcription batch, transcription counts) of tokenized lines."""
  ids = np.array([token for line in lines for token in line], np.int64)
  line_splits = np.cumsum([0] + [len(line) for line in lines])
  documents = layout.Documents.from_lines(ids, line_splits, lines_per_document)
  fast_counts, original_counts = collections.Counter(), collections.Counter()
  instance_layout = layout.lay_out(documents, dupe_factor, max_seq_length, short_seq_prob,
                                   random.Random(seed), fast_counts)
  fast = layout.pack(layout.ids_with_specials(documents.ids, special_ids), instance_layout,
                     slice(None), max_seq_length, MAX_PREDICTIONS)
  # The transcription on the documents as lists, empty lines and documents dropped as the
  # writer always did.
  lists, start = [], 0
  for count in lines_per_document:
    lists.append([line for line in lines[start:start + count] if line])
    start += count
  assert documents.as_lists() == [document for document in lists if document]
  instances = instances_lib.create_instances(
      lists, dupe_factor, max_seq_length, short_seq_prob, 0.15, MAX_PREDICTIONS, special_ids,
      False, random.Random(seed), original_counts, mask_with_rng=False)
  original = batches.from_instances(instances, max_seq_length, MAX_PREDICTIONS)
  return fast, fast_counts, original, original_counts


def assert_same_instances(fast, original):
  assert len(fast.lengths) == len(original.lengths)
  for field in ("input_ids", "segment_ids", "lengths", "is_random_next", "is_single_segment",
                "masked_lm_positions", "num_predictions"):
    np.testing.assert_array_equal(getattr(fast, field), getattr(original, field), err_msg=field)


def test_the_sample_corpus_gives_the_transcriptions_instances(sample_vocab):
  tokenizer = tokenization.FullTokenizer(str(sample_vocab), do_lower_case=True)
  lines, lines_per_document = [], [0]
  for line in (SAMPLES_DIR / "sample_corpus.txt").read_text(encoding="utf-8").splitlines():
    if line.strip():
      lines.append(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)))
      lines_per_document[-1] += 1
    else:
      lines_per_document.append(0)
  for max_seq_length, short_seq_prob in [(64, 0.1), (128, 0.5), (16, 0.0)]:
    fast, fast_counts, original, original_counts = both_layouts(
        lines, lines_per_document, 3, max_seq_length, short_seq_prob, 12345)
    assert len(fast.lengths) > 100
    assert_same_instances(fast, original)
    assert fast_counts == original_counts


@pytest.mark.parametrize("seed", range(4))
def test_random_documents_give_the_transcriptions_instances(seed):
  # Empty lines and documents, one-document shards (the random B comes from the document
  # itself), lines longer than the sequence, short targets: 200 shards per seed.
  rng = random.Random(seed)
  truncated = 0
  for _ in range(200):
    lines_per_document = [rng.randint(1, 8) for _ in range(rng.randint(1, 6))]
    lines = [[rng.randint(3, 99) for _ in range(rng.choice([0, 1, 2, 5, 20, 60]))]
             for _ in range(sum(lines_per_document))]
    max_seq_length = rng.choice([5, 8, 16, 64])
    fast, fast_counts, original, original_counts = both_layouts(
        lines, lines_per_document, 2, max_seq_length, rng.choice([0.0, 0.1, 0.9]),
        rng.randrange(1000))
    assert_same_instances(fast, original)
    assert fast_counts == original_counts
    truncated += int((fast.lengths == max_seq_length).sum())
  assert truncated > 100
