"""The original release's model directory, the hub every conversion goes through.

A directory in the original layout holds `bert_config.json`, a name-based checkpoint
`bert_model.ckpt.*` (or a `checkpoint` state file naming the latest, as `run_pretraining.py`
writes) and `vocab.txt`: what every runner takes as `--bert_config_file`, `--init_checkpoint` and
`--vocab_file`. Converters read another format completely and check it before calling
`write_original`, so that bad input leaves nothing written.
"""

import json
import os
import re

import tensorflow as tf

from base import atomic_files
from base import errors
from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io

BERT_CONFIG = "bert_config.json"
BERT_CHECKPOINT = "bert_model.ckpt"
VOCAB = "vocab.txt"

_TRAINING_STATE = re.compile(r"(^global_step$|/adam_[mv]$)")


class ConversionError(errors.UserError, ValueError):
  """A model directory, checkpoint or SavedModel that cannot be converted."""


def is_training_state(name):
  """True for a checkpoint's optimizer slots (`.../adam_m`, `.../adam_v`) and `global_step`:
  stored beside the weights, never converted."""
  return bool(_TRAINING_STATE.search(name))


def read_json(path):
  """Reads a JSON file as a dict, with one-line `ConversionError`s naming `path`."""
  try:
    with tf.io.gfile.GFile(path, "rb") as reader:
      return json.loads(reader.read().decode("utf-8"))
  except tf.errors.NotFoundError:
    raise ConversionError(f"{path}: cannot read: no such file") from None
  except (tf.errors.OpError, UnicodeDecodeError) as error:
    raise ConversionError(f"{path}: cannot read: {error}") from None
  except json.JSONDecodeError as error:
    raise ConversionError(f"{path}: malformed JSON at line {error.lineno}: {error.msg}") from None


def read_bytes(path):
  """The contents of `path`; a `ConversionError` naming it if it does not exist."""
  if not tf.io.gfile.exists(path):
    raise ConversionError(f"{path}: no such file")
  with tf.io.gfile.GFile(path, "rb") as reader:
    return reader.read()


def write_bytes(path, contents):
  """Writes `contents` to `path` atomically."""
  with atomic_files.open_for_writing(path, "wb") as writer:
    writer.write(contents)


def read_config(path):
  """A `BertConfig` from `path`, with config errors as `ConversionError`s."""
  try:
    return bert_config_lib.BertConfig.from_json_file(path)
  except bert_config_lib.ConfigError as error:
    raise ConversionError(str(error)) from None


def check_weights_fit(original_weights, config, source, config_name):
  """Raises `ConversionError` if the weights contradict the config that would be written with
  them (another depth, width, vocabulary, position or segment table).

  Args:
    original_weights: dict original variable name -> array.
    config: the `BertConfig`.
    source: the path named in the error.
    config_name: where the config comes from, named in the error.
  """
  found = checkpoint_io.encoder_mismatches(
      {name: list(value.shape) for name, value in original_weights.items()}, config)
  if found:
    raise ConversionError(f"{source}: the weights do not fit its {config_name}: "
                          + "; ".join(found))


def read_original(input_dir, vocab_file=None):
  """Reads a directory in the original layout.

  Args:
    input_dir: holds `bert_config.json`, `vocab.txt` and `bert_model.ckpt.*` or a `checkpoint`
      state file (a run's `--output_dir`, which has no `vocab.txt`, with `vocab_file`).
    vocab_file: the vocabulary, if not `input_dir`'s `vocab.txt`.

  Returns:
    `(config, weights, vocab)`: the `BertConfig`, dict original name -> numpy array (optimizer
    slots and `global_step` included, as stored) and the vocabulary file's bytes.
  """
  config = read_config(os.path.join(input_dir, BERT_CONFIG))
  vocab = read_bytes(vocab_file or os.path.join(input_dir, VOCAB))
  prefix = os.path.join(input_dir, BERT_CHECKPOINT)
  if not tf.io.gfile.exists(prefix + checkpoint_io.INDEX_SUFFIX):
    prefix = input_dir
  weights = checkpoint_io.read_checkpoint(prefix)
  check_weights_fit(weights, config, input_dir, BERT_CONFIG)
  return config, weights, vocab


def write_original(output_dir, config, weights, vocab):
  """Writes `bert_config.json`, `bert_model.ckpt.*` and `vocab.txt` into `output_dir`.

  Args:
    output_dir: created if needed.
    config: the `BertConfig`.
    weights: dict original variable name -> array.
    vocab: the vocabulary file's bytes.
  """
  tf.io.gfile.makedirs(output_dir)
  write_bytes(os.path.join(output_dir, VOCAB), vocab)
  checkpoint_io.write_checkpoint(os.path.join(output_dir, BERT_CHECKPOINT), weights)
  config.to_json_file(os.path.join(output_dir, BERT_CONFIG))
