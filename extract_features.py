r"""Extracts per-token activations of chosen encoder layers, as the original `extract_features.py`.

Each input line is `text_a ||| text_b` or a single text. Each output line is the original's JSON:
`{"linex_index": <line number>, "features": [{"token": ..., "layers": [{"index": <layer>,
"values": [...]}]}]}` (the key `linex_index` is the original's spelling), values rounded to 6
decimals, one entry per real token including `[CLS]` and `[SEP]`.

Example:
  python extract_features.py --input_file=input.txt --output_file=output.jsonl \
      --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
      --init_checkpoint=$BERT_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128
"""

import json
import re

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from base import atomic_files
from base import cli
from base import errors
from base import progress
from data import sequence_pairs
from data import text_files
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import encoder as encoder_lib
from modeling import sentence_pooling
from training import model_inputs

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Text file, one `text_a ||| text_b` or text per line.")
flags.DEFINE_string("output_file", None, "JSON-lines output file.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indices (-1 = last).")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model.")
flags.DEFINE_integer("max_seq_length", 128, "Word pieces per input after packing; longer inputs "
                     "are truncated as the original.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint of the encoder (original layout).")
flags.DEFINE_string("vocab_file", None, "vocab.txt of the model.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_integer("batch_size", 32, "Inputs per forward pass.")
flags.DEFINE_enum("pooling", "none", ("none",) + sentence_pooling.POOLING_METHODS,
                  "none: the original per-token output. cls / mean / pooled: one vector per "
                  "line instead (the [CLS] vector, the mean over real tokens, or the pooler "
                  "output) of the --layers concatenated; an --output_file ending in .npy gets a "
                  "[num_lines, dim] float32 array, otherwise JSON lines "
                  '{"linex_index": ..., "embedding": [...]}.')
flags.DEFINE_bool("use_tpu", False, "Original flag; TPU inference is not supported here.")
flags.DEFINE_string("master", None, "Original TPU flag; unused.")
flags.DEFINE_integer("num_tpu_cores", 8, "Original TPU flag; unused.")
flags.DEFINE_bool("use_one_hot_embeddings", False,
                  "Original TPU flag; embeddings are always gathered here.")
flags.mark_flags_as_required(
    ["input_file", "output_file", "bert_config_file", "init_checkpoint", "vocab_file"])

_PAIR_PATTERN = re.compile(r"^(.*) \|\|\| (.*)$")


def read_examples(path):
  """Yields `(line_index, text_a, text_b or None)` per line, stripped, as the original."""
  for index, line in enumerate(text_files.read_lines(path)):
    line = line.strip()
    match = _PAIR_PATTERN.match(line)
    yield (index, match.group(1), match.group(2)) if match else (index, line, None)


def parse_layers(layers, num_hidden_layers):
  """`"-1,-2"` -> [-1, -2], checked against the number of layers."""
  try:
    indices = [int(x) for x in layers.split(",")]
  except ValueError:
    raise errors.UsageError(f"--layers={layers!r}: expected comma-separated integers") from None
  for index in indices:
    if not -num_hidden_layers <= index < num_hidden_layers:
      raise errors.UsageError(f"--layers: {index} is out of range for {num_hidden_layers} layers")
  return indices


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


def scan_input(path):
  """Returns `(number of lines, 1-based number of the first ' ||| ' pair line or None)`."""
  num_lines, first_pair = 0, None
  for index, _, text_b in read_examples(path):
    num_lines += 1
    if first_pair is None and text_b is not None:
      first_pair = index + 1
  return num_lines, first_pair


def check_flags(config):
  """Raises `errors.UsageError` for flags the model or the input cannot take; returns the number of
  input lines."""
  if FLAGS.use_tpu:
    raise errors.UsageError("--use_tpu: extract_features.py runs on CPU or GPU only")
  if FLAGS.batch_size <= 0:
    raise errors.UsageError(f"--batch_size must be positive, got {FLAGS.batch_size}")
  model_inputs.check_max_seq_length(FLAGS.max_seq_length, config, FLAGS.bert_config_file)
  model_inputs.check_vocab(FLAGS.vocab_file, config, FLAGS.bert_config_file)
  if not tf.io.gfile.exists(FLAGS.input_file) or tf.io.gfile.isdir(FLAGS.input_file):
    raise errors.UsageError(f"--input_file={FLAGS.input_file}: no such file")
  num_lines, first_pair = scan_input(FLAGS.input_file)
  if not num_lines:
    raise errors.UsageError(f"--input_file={FLAGS.input_file}: the file is empty")
  if first_pair is not None:
    model_inputs.check_segments(2, config, FLAGS.bert_config_file,
                                f"--input_file={FLAGS.input_file}: line {first_pair} is a text "
                                "pair ('A ||| B')")
  model_inputs.check_init_checkpoint(FLAGS.init_checkpoint, config, FLAGS.bert_config_file)
  return num_lines


def main(argv):
  del argv
  config = bert_config_lib.BertConfig.from_json_file(FLAGS.bert_config_file)
  total = check_flags(config)
  layer_indices = parse_layers(FLAGS.layers, config.num_hidden_layers)
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)

  encoder = encoder_lib.BertEncoder(config)
  report = checkpoint_io.assign_from_checkpoint(encoder.name_to_variable(),
                                                FLAGS.init_checkpoint)
  logging.info("loaded %d variables from %s", len(report["loaded"]), FLAGS.init_checkpoint)

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3)
  def encode(input_ids, input_mask, segment_ids):
    outputs = encoder({"input_ids": input_ids, "input_mask": input_mask,
                       "segment_ids": segment_ids}, training=False)
    if FLAGS.pooling != "none":
      return [sentence_pooling.pool(outputs, input_mask, FLAGS.pooling, layer_indices)]
    return [outputs["encoder_outputs"][index] for index in layer_indices]

  as_npy = FLAGS.pooling != "none" and FLAGS.output_file.endswith(".npy")
  bar = progress.Progress(total=total, unit="lines")
  embeddings = []
  with atomic_files.open_for_writing(FLAGS.output_file, "wb" if as_npy else "w") as writer:
    for batch in batches(read_examples(FLAGS.input_file), tokenizer, FLAGS.max_seq_length,
                         FLAGS.batch_size):
      # Padding to the longest input of the batch instead of max_seq_length: padded positions
      # are masked out of attention, so the real tokens' vectors are unchanged.
      length = max(len(packed.tokens) for _, packed in batch)
      arrays = [np.array([getattr(packed, name)[:length] for _, packed in batch], np.int32)
                for name in ("input_ids", "input_mask", "segment_ids")]
      outputs = [output.numpy() for output in encode(*arrays)]
      if as_npy:
        embeddings.append(outputs[0])
      for row, (line_index, packed) in enumerate(batch):
        if FLAGS.pooling == "none":
          writer.write(to_json_line(line_index, packed.tokens,
                                    [output[row] for output in outputs], layer_indices))
        elif not as_npy:
          writer.write(json.dumps({"linex_index": line_index, "embedding": [
              round(float(x), 6) for x in outputs[0][row]]}) + "\n")
      bar.update(len(batch))
    if as_npy:
      np.save(writer, np.concatenate(embeddings).astype(np.float32))
  bar.close()
  logging.info("wrote %s", FLAGS.output_file)


if __name__ == "__main__":
  cli.run(main)
