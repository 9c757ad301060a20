"""The input and output of `extract_features`: lines of `text_a ||| text_b` or one text, packed
into batches, and the original's JSON lines."""

import json
import re

from data import sequence_pairs
from data import text_files

_PAIR_PATTERN = re.compile(r"^(.*) \|\|\| (.*)$")


def read_examples(path):
  """Yields `(line_index, text_a, text_b or None)` per line, stripped, as the original."""
  for index, line in enumerate(text_files.read_lines(path)):
    line = line.strip()
    match = _PAIR_PATTERN.match(line)
    yield (index, match.group(1), match.group(2)) if match else (index, line, None)


def scan_input(path):
  """Returns `(number of lines, 1-based number of the first ' ||| ' pair line or None)`."""
  num_lines, first_pair = 0, None
  for index, _, text_b in read_examples(path):
    num_lines += 1
    if first_pair is None and text_b is not None:
      first_pair = index + 1
  return num_lines, first_pair


def batches(examples, tokenizer, max_seq_length, batch_size):
  """Groups packed examples into lists of at most `batch_size` `(line_index, PackedSequence)`."""
  batch = []
  for index, text_a, text_b in examples:
    tokens_b = tokenizer.tokenize(text_b) if text_b is not None else None
    batch.append((index, sequence_pairs.pack(tokenizer, tokenizer.tokenize(text_a), tokens_b,
                                             max_seq_length)))
    if len(batch) == batch_size:
      yield batch
      batch = []
  if batch:
    yield batch


def to_json_line(line_index, tokens, layer_outputs, layer_indices):
  """Formats one input's features as the original's JSON line.

  Args:
    line_index: the input's line number.
    tokens: its real word pieces.
    layer_outputs: list aligned with `layer_indices` of float arrays `[num_tokens, hidden_size]`.
    layer_indices: the `--layers` values.
  """
  features = []
  for position, token in enumerate(tokens):
    features.append({
        "token": token,
        "layers": [{"index": layer_index,
                    "values": [round(float(x), 6) for x in layer_output[position]]}
                   for layer_index, layer_output in zip(layer_indices, layer_outputs)],
    })
  return json.dumps({"linex_index": line_index, "features": features}) + "\n"


def to_embedding_line(line_index, embedding):
  """One line's sentence embedding as a JSON line, values rounded to 6 decimals."""
  return json.dumps({"linex_index": line_index,
                     "embedding": [round(float(x), 6) for x in embedding]}) + "\n"
