"""Packing one or two token sequences into the `[CLS] A [SEP] (B [SEP])` input of BERT.

The layout and truncation rule of the original's fine-tuning and feature-extraction scripts
(`run_classifier.convert_single_example`, `extract_features.convert_examples_to_features`).
"""

import dataclasses


@dataclasses.dataclass
class PackedSequence:
  """One packed, padded input.

  Attributes:
    tokens: the real word pieces, `[CLS]`/`[SEP]` included (no padding).
    input_ids: `[max_seq_length]` ids, 0-padded.
    input_mask: `[max_seq_length]`, 1 for real tokens.
    segment_ids: `[max_seq_length]`, 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`, 0 for padding.
  """
  tokens: list
  input_ids: list
  input_mask: list
  segment_ids: list


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Pops tokens off the end of the longer list (B on ties) until the two fit in `max_length`.

  As the original: truncating the longer side one token at a time keeps more of a short sequence
  than truncating both by the same proportion. Modifies the lists in place.
  """
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def pack(tokenizer, tokens_a, tokens_b, max_seq_length):
  """Truncates and packs word pieces into `[CLS] A [SEP] (B [SEP])`, padded to `max_seq_length`.

  Args:
    tokenizer: a `FullTokenizer` (for `convert_tokens_to_ids`).
    tokens_a: list of word pieces of the first text.
    tokens_b: list of word pieces of the second text, or None.
    max_seq_length: length of the padded arrays.

  Returns:
    a `PackedSequence`.
  """
  tokens_a = list(tokens_a)
  if tokens_b is not None:
    tokens_b = list(tokens_b)
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
  else:
    del tokens_a[max_seq_length - 2:]
  tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
  segment_ids = [0] * len(tokens)
  if tokens_b is not None:
    tokens += tokens_b + ["[SEP]"]
    segment_ids += [1] * (len(tokens_b) + 1)
  input_ids = tokenizer.convert_tokens_to_ids(tokens)
  padding = [0] * (max_seq_length - len(tokens))
  return PackedSequence(tokens=tokens,
                        input_ids=input_ids + padding,
                        input_mask=[1] * len(tokens) + padding,
                        segment_ids=segment_ids + padding)
