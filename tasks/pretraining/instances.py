"""Masked-LM and next-sentence training instances, by the original `create_pretraining_data.py`.

A faithful transcription of the original's `create_instances_from_document`,
`create_masked_lm_predictions` and `truncate_seq_pair`, with the same calls on the same
`random.Random` in the same order, so the same documents and seed give the original's instances.
It works on word-piece ids instead of strings (the vocabulary maps one to one). This is the path
of `--original_random_stream` and of the benchmark's pure-Python baseline; by default
`tasks/pretraining/layout.py` lays out the same instances on token ranges (with
`mask_with_rng=False` here the two are compared in the tests) and `tasks/pretraining/masking.py`
masks a whole shard at once: the same distribution, several times faster, but not the original's
random stream.
"""

import dataclasses
import random

# What each masked position was replaced with (for the statistics).
MASK, RANDOM, KEEP = "mask", "random", "keep"


@dataclasses.dataclass
class SpecialIds:
  """Ids the algorithm needs from the vocabulary.

  Attributes:
    cls_id, sep_id, mask_id: ids of `[CLS]`, `[SEP]`, `[MASK]`.
    vocab_size: random replacements are drawn from `[0, vocab_size)`, as the original drew from
      every vocabulary entry (`[PAD]`, `[unusedN]` and the specials included).
    is_continuation: sequence of bool per id, True for `##` pieces (whole-word masking).
  """
  cls_id: int
  sep_id: int
  mask_id: int
  vocab_size: int
  is_continuation: list

  @classmethod
  def from_vocab(cls, vocab):
    """Builds the ids from an ordered {token: id} vocabulary (`tokenization.load_vocab`)."""
    tokens = sorted(vocab, key=vocab.get)
    return cls(cls_id=vocab["[CLS]"], sep_id=vocab["[SEP]"], mask_id=vocab["[MASK]"],
               vocab_size=len(tokens),
               is_continuation=[token.startswith("##") for token in tokens])


@dataclasses.dataclass
class TrainingInstance:
  """One pretraining example before padding.

  Attributes:
    input_ids: `[CLS] A [SEP] B [SEP]` ids after masking (before it when not masked here).
    segment_ids: 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`.
    is_random_next: B was taken from a random document (next_sentence_labels = 1).
    masked_lm_positions: sorted positions of the predictions (empty when not masked here).
    masked_lm_ids: the original ids at those positions.
    masking_actions: per prediction, MASK, RANDOM or KEEP.
    is_short_target: the document's target length was drawn short (`short_seq_prob`).
    is_single_segment: the chunk held one segment, so B had to come from another document.
  """
  input_ids: list
  segment_ids: list
  is_random_next: bool
  masked_lm_positions: list
  masked_lm_ids: list
  masking_actions: list
  is_short_target: bool
  is_single_segment: bool


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Truncates the longer list one token at a time, from the front or back at random."""
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_num_tokens:
      break
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    # Truncating from both ends adds randomness and avoids biasing towards the document's end.
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


def draw_target_length(max_num_tokens, short_seq_prob, rng):
  """A document's target length, drawn as the original: `max_num_tokens`, or with probability
  `short_seq_prob` a random length in [2, max_num_tokens].

  Returns:
    `(target_seq_length, is_short_target)`.
  """
  if rng.random() < short_seq_prob:
    return rng.randint(2, max_num_tokens), True
  return max_num_tokens, False


def draw_random_document(num_documents, document_index, rng):
  """The index of a random next-sentence document, drawn as the original: up to 10 draws for one
  other than `document_index` (with a small corpus it can be this one)."""
  for _ in range(10):
    random_document_index = rng.randint(0, num_documents - 1)
    if random_document_index != document_index:
      break
  return random_document_index


def create_masked_lm_predictions(input_ids, masked_lm_prob, max_predictions_per_seq, special_ids,
                                 do_whole_word_mask, rng):
  """Chooses and replaces the masked positions of one sequence.

  `min(max_predictions_per_seq, max(1, round(len(input_ids) * masked_lm_prob)))` positions, never
  `[CLS]`/`[SEP]`; each replaced by `[MASK]` (80%), kept (10%) or a random id (10%).

  Args:
    input_ids: list of ids of `[CLS] A [SEP] B [SEP]`.
    masked_lm_prob: fraction of the sequence to predict.
    max_predictions_per_seq: cap on the predictions.
    special_ids: a `SpecialIds`.
    do_whole_word_mask: mask all pieces of a word together (a `##` piece joins the previous one).
    rng: `random.Random`.

  Returns:
    `(output_ids, positions, labels, actions)`: the masked sequence, the sorted positions, the
    original ids there, and MASK/RANDOM/KEEP per position.
  """
  cand_indexes = []
  for index, token_id in enumerate(input_ids):
    if token_id in (special_ids.cls_id, special_ids.sep_id):
      continue
    if (do_whole_word_mask and cand_indexes
        and special_ids.is_continuation[token_id]):
      cand_indexes[-1].append(index)
    else:
      cand_indexes.append([index])
  rng.shuffle(cand_indexes)
  output_ids = list(input_ids)
  num_to_predict = min(max_predictions_per_seq,
                       max(1, int(round(len(input_ids) * masked_lm_prob))))
  masked = []
  covered_indexes = set()
  for index_set in cand_indexes:
    if len(masked) >= num_to_predict:
      break
    # A whole word that would overflow the budget is skipped, as the original.
    if len(masked) + len(index_set) > num_to_predict:
      continue
    if any(index in covered_indexes for index in index_set):
      continue
    for index in index_set:
      covered_indexes.add(index)
      if rng.random() < 0.8:
        replacement, action = special_ids.mask_id, MASK
      elif rng.random() < 0.5:
        replacement, action = input_ids[index], KEEP
      else:
        replacement, action = rng.randint(0, special_ids.vocab_size - 1), RANDOM
      output_ids[index] = replacement
      masked.append((index, input_ids[index], action))
  masked.sort(key=lambda item: item[0])
  return (output_ids, [m[0] for m in masked], [m[1] for m in masked], [m[2] for m in masked])


def create_instances_from_document(all_documents, document_index, max_seq_length, short_seq_prob,
                                   masked_lm_prob, max_predictions_per_seq, special_ids,
                                   do_whole_word_mask, rng, mask_with_rng=True):
  """Cuts one document into instances, as the original.

  Segments (sentences) are packed up to a target length (`max_seq_length - 3`, or with
  probability `short_seq_prob` a random length in [2, that] for the whole document), each chunk
  is split at a random segment into A and B, and with probability 0.5 (always when the chunk has
  one segment) B is replaced by text from a random other document, the unused segments being put
  back for the next chunk.

  Args:
    all_documents: list of documents; a document is a list of segments, a segment a non-empty list
      of ids.
    document_index: the document to cut.
    max_seq_length, short_seq_prob, masked_lm_prob, max_predictions_per_seq: the flags.
    special_ids: a `SpecialIds`.
    do_whole_word_mask: see `create_masked_lm_predictions`.
    rng: `random.Random`.
    mask_with_rng: mask each instance as it is made, with `rng` (the original); False leaves the
      instances unmasked, with empty `masked_lm_*` lists (the layout alone, which
      `layout` must reproduce).

  Returns:
    list of `TrainingInstance`.
  """
  document = all_documents[document_index]
  max_num_tokens = max_seq_length - 3
  target_seq_length, is_short_target = draw_target_length(max_num_tokens, short_seq_prob, rng)

  instances = []
  current_chunk = []
  current_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    current_chunk.append(segment)
    current_length += len(segment)
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        a_end = 1
        if len(current_chunk) >= 2:
          a_end = rng.randint(1, len(current_chunk) - 1)
        tokens_a = []
        for j in range(a_end):
          tokens_a.extend(current_chunk[j])
        tokens_b = []
        if len(current_chunk) == 1 or rng.random() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          random_document = all_documents[
              draw_random_document(len(all_documents), document_index, rng)]
          random_start = rng.randint(0, len(random_document) - 1)
          for j in range(random_start, len(random_document)):
            tokens_b.extend(random_document[j])
            if len(tokens_b) >= target_b_length:
              break
          # The segments not used for A go back, so they are not wasted.
          num_unused_segments = len(current_chunk) - a_end
          i -= num_unused_segments
        else:
          is_random_next = False
          for j in range(a_end, len(current_chunk)):
            tokens_b.extend(current_chunk[j])
        truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)

        input_ids = [special_ids.cls_id] + tokens_a + [special_ids.sep_id]
        segment_ids = [0] * len(input_ids)
        input_ids += tokens_b + [special_ids.sep_id]
        segment_ids += [1] * (len(tokens_b) + 1)
        positions, labels, actions = [], [], []
        if mask_with_rng:
          input_ids, positions, labels, actions = create_masked_lm_predictions(
              input_ids, masked_lm_prob, max_predictions_per_seq, special_ids,
              do_whole_word_mask, rng)
        instances.append(TrainingInstance(
            input_ids=input_ids, segment_ids=segment_ids, is_random_next=is_random_next,
            masked_lm_positions=positions, masked_lm_ids=labels, masking_actions=actions,
            is_short_target=is_short_target, is_single_segment=len(current_chunk) == 1))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def create_instances(documents, dupe_factor, max_seq_length, short_seq_prob, masked_lm_prob,
                     max_predictions_per_seq, special_ids, do_whole_word_mask, rng, counts=None,
                     mask_with_rng=True):
  """The original's `create_training_instances` after reading: shuffle, `dupe_factor` passes,
  shuffle.

  Args:
    documents: list of documents (lists of non-empty id lists); empty documents are dropped.
    dupe_factor: passes over the documents, each with different masks.
    others: see `create_instances_from_document`.
    counts: optional `collections.Counter`; gets `document_passes` and `short_target_passes`
      (passes whose target length was drawn short, expected `short_seq_prob` of them).
    mask_with_rng: see `create_instances_from_document`.

  Returns:
    list of `TrainingInstance` in the original's final shuffled order.
  """
  all_documents = [document for document in documents if document]
  rng.shuffle(all_documents)
  instances = []
  for _ in range(dupe_factor):
    for document_index in range(len(all_documents)):
      document_instances = create_instances_from_document(
          all_documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
          max_predictions_per_seq, special_ids, do_whole_word_mask, rng, mask_with_rng)
      if counts is not None:
        counts["document_passes"] += 1
        counts["short_target_passes"] += document_instances[0].is_short_target
      instances.extend(document_instances)
  rng.shuffle(instances)
  return instances


def seeded_rng(random_seed, shard_index):
  """The rng of one input shard: shard 0 uses `random_seed` itself, as the original's only rng."""
  return random.Random(random_seed + shard_index)
