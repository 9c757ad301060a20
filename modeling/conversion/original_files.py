"""The original release's model directory, the hub every conversion goes through.

A directory in the original layout holds `bert_config.json`, a name-based checkpoint
`bert_model.ckpt.*` (or a `checkpoint` state file naming the latest, as `run_pretraining.py`
writes) and `vocab.txt`: what every runner takes as `--bert_config_file`, `--init_checkpoint` and
`--vocab_file`. Converters read another format completely and check every tensor against the
config (`check_weights_fit`: presence, shape, a floating-point dtype, finite values) before
writing, and write all their outputs or none (`write_outputs`), so that bad input, or a failure
while writing, leaves nothing under a final name.
"""

import json
import os
import re

import numpy as np
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


def read_config(path):
  """A `BertConfig` from `path`, with config errors as `ConversionError`s."""
  try:
    return bert_config_lib.BertConfig.from_json_file(path)
  except bert_config_lib.ConfigError as error:
    raise ConversionError(str(error)) from None


def _dense(scope, fan_in, fan_out):
  """The shapes of a dense layer's `kernel [fan_in, fan_out]` and `bias [fan_out]`."""
  return {f"{scope}/kernel": [fan_in, fan_out], f"{scope}/bias": [fan_out]}


def _layer_norm(scope, width):
  """The shapes of a LayerNorm's `gamma` and `beta` `[width]`."""
  return {f"{scope}/gamma": [width], f"{scope}/beta": [width]}


def encoder_shapes(config):
  """{original name: shape} of every variable of a `BertEncoder` of `config` (a `BertConfig`):
  the embedding tables and their LayerNorm, each layer's attention and feed-forward, the pooler."""
  hidden, intermediate = config.hidden_size, config.intermediate_size
  shapes = {"bert/embeddings/word_embeddings": [config.vocab_size, hidden],
            "bert/embeddings/token_type_embeddings": [config.type_vocab_size, hidden],
            "bert/embeddings/position_embeddings": [config.max_position_embeddings, hidden],
            **_layer_norm("bert/embeddings/LayerNorm", hidden),
            **_dense("bert/pooler/dense", hidden, hidden)}
  for index in range(config.num_hidden_layers):
    scope = f"bert/encoder/layer_{index}"
    for projection in ("self/query", "self/key", "self/value", "output/dense"):
      shapes.update(_dense(f"{scope}/attention/{projection}", hidden, hidden))
    shapes.update(_layer_norm(f"{scope}/attention/output/LayerNorm", hidden))
    shapes.update(_dense(f"{scope}/intermediate/dense", hidden, intermediate))
    shapes.update(_dense(f"{scope}/output/dense", intermediate, hidden))
    shapes.update(_layer_norm(f"{scope}/output/LayerNorm", hidden))
  return shapes


# Output projections of the task heads with a fixed number of outputs (the classifier's, at the
# root scope, has one per label).
_HEAD_OUTPUTS = {"cls/seq_relationship": 2, "cls/squad": 2, "cls/multiple_choice": 1}


def head_shapes(shapes, config):
  """The shapes `config` implies for the head variables among `shapes`.

  Args:
    shapes: dict original name -> shape found (list of ints).
    config: the `BertConfig`.

  Returns:
    dict name -> expected shape, for the masked LM's variables (`cls/predictions/*`) and the
    `output_weights [outputs, hidden_size]` / `output_bias [outputs]` of the other heads (at
    the root scope, the classifier's, as many outputs as its `output_bias` has).
  """
  hidden = config.hidden_size
  masked_lm = {**_dense("cls/predictions/transform/dense", hidden, hidden),
               **_layer_norm("cls/predictions/transform/LayerNorm", hidden),
               "cls/predictions/output_bias": [config.vocab_size]}
  expected = {name: shape for name, shape in masked_lm.items() if name in shapes}
  root_outputs = (shapes.get("output_bias") or shapes.get("output_weights") or [0])[0]
  for name in shapes:
    scope, _, leaf = name.rpartition("/")
    if leaf in ("output_weights", "output_bias") and (not scope or scope in _HEAD_OUTPUTS):
      outputs = _HEAD_OUTPUTS.get(scope, root_outputs)
      expected[name] = [outputs, hidden] if leaf == "output_weights" else [outputs]
  return expected


def _problems(original_weights, config, config_name, source_name):
  """`(name, problem)` pairs, sorted by original name, of the tensors that do not fit `config`:
  an encoder tensor missing, an encoder or head tensor of another shape, an encoder tensor the
  encoder does not have, a tensor that is not floating point or holds NaN or Inf. Training state
  is skipped (it is never converted). Names and shapes are given as `source_name` maps them."""
  weights = {name: np.asarray(value) for name, value in original_weights.items()
             if not is_training_state(name)}
  expected = encoder_shapes(config)
  expected.update(head_shapes({name: list(value.shape) for name, value in weights.items()},
                              config))
  found = [(name, "is missing") for name in expected if name not in weights]
  for name, value in weights.items():
    if name in expected and list(value.shape) != expected[name]:
      order = -1 if source_name(name)[1] else 1
      found.append((name, f"has shape {list(value.shape)[::order]}, {config_name} gives "
                          f"{expected[name][::order]}"))
    elif name not in expected and name.startswith("bert/"):
      found.append((name, f"is not a variable of the encoder {config_name} describes"))
    elif not (np.issubdtype(value.dtype, np.floating) or value.dtype.name == "bfloat16"):
      found.append((name, f"has dtype {value.dtype.name}, not a floating-point type"))
    elif not (finite := np.isfinite(value)).all():
      found.append((name, f"holds {finite.size - np.count_nonzero(finite)} NaN or infinite "
                          "value(s)"))
  return [(source_name(name)[0], problem) for name, problem in sorted(found)]


def check_weights_fit(original_weights, config, source, config_name,
                      source_name=lambda name: (name, False)):
  """Raises `ConversionError` unless the weights are what `config` describes, so that what is
  written with it loads in every tool: another depth, width, vocabulary, position or segment
  table first (as `checkpoint_io.encoder_mismatches` phrases them), then the first tensor
  missing, of another shape, not floating point or not finite, with the number of others.

  Args:
    original_weights: dict original variable name -> array.
    config: the `BertConfig`.
    source: the path named in the error.
    config_name: where the config comes from, named in the error.
    source_name: maps an original name to `(its name in source, whether source stores it
      transposed)`, to name a tensor and its shape as the source has them (default: as the
      original).
  """
  found = checkpoint_io.encoder_mismatches(
      {name: list(value.shape) for name, value in original_weights.items()}, config)
  if found:
    raise ConversionError(f"{source}: the weights do not fit its {config_name}: "
                          + "; ".join(found))
  problems = _problems(original_weights, config, config_name, source_name)
  if problems:
    name, problem = problems[0]
    others = f"; {len(problems) - 1} other tensor(s) do not fit" if len(problems) > 1 else ""
    raise ConversionError(f"{source}: tensor {name} {problem}{others}")


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
    prefix = checkpoint_io.resolve_checkpoint(input_dir)
  weights = checkpoint_io.read_checkpoint(prefix)
  check_weights_fit(weights, config, prefix, BERT_CONFIG)
  return config, weights, vocab


def write_original(output_dir, config, weights, vocab):
  """Writes `bert_config.json`, `bert_model.ckpt.*` and `vocab.txt` into `output_dir`, all or
  nothing (`write_outputs`).

  Args:
    output_dir: created if needed.
    config: the `BertConfig`.
    weights: dict original variable name -> array.
    vocab: the vocabulary file's bytes.
  """
  write_outputs(output_dir, {VOCAB: vocab, BERT_CONFIG: config.to_json_string().encode("utf-8")},
                {BERT_CHECKPOINT: lambda prefix: checkpoint_io.save_bundle(prefix, weights)})


def write_outputs(output_dir, files, bundles=None):
  """Writes a conversion's files and checkpoints into `output_dir`, all or nothing.

  Each is written under its temporary name (`atomic_files.temporary_name`) and only when all are
  complete are they renamed to their final names, so that a failure while writing (no space
  left) leaves no file under a final name, none half-written and no temporary.

  Args:
    output_dir: created if needed.
    files: dict path relative to `output_dir` -> bytes.
    bundles: dict checkpoint prefix relative to `output_dir` -> `write(prefix)`, which writes
      a checkpoint bundle (`.index` and one `.data-00000-of-00001` file) at the prefix given;
      written before the files.
  """
  tf.io.gfile.makedirs(output_dir)
  created = []  # directories made here, removed again on failure
  written = []  # (temporary, final, is a bundle)
  try:
    for name, write in (bundles or {}).items():
      written.append(_temporary(output_dir, name, True, created))
      write(written[-1][0])
    for name, contents in files.items():
      written.append(_temporary(output_dir, name, False, created))
      with tf.io.gfile.GFile(written[-1][0], "wb") as writer:
        writer.write(contents)
  except BaseException:
    _remove_temporaries(written, created)
    raise
  for temporary, final, is_bundle in written:
    if is_bundle:
      checkpoint_io.publish_bundle(temporary, final)
    else:
      tf.io.gfile.rename(temporary, final, overwrite=True)


def _temporary(output_dir, name, is_bundle, created):
  """`(temporary path, final path, is_bundle)` of output `name`, its directory made (and added
  to `created`, the highest new one, if it did not exist)."""
  final = os.path.join(output_dir, name)
  directory = os.path.dirname(final)
  if not tf.io.gfile.isdir(directory):
    highest = directory
    while not tf.io.gfile.isdir(os.path.dirname(highest)):
      highest = os.path.dirname(highest)
    tf.io.gfile.makedirs(directory)
    created.append(highest)
  return atomic_files.temporary_name(final), final, is_bundle


def _remove_temporaries(written, created):
  """Removes every file or directory whose name starts with one of the temporary names of
  `written` (a bundle's files and TensorFlow's own partial ones), then the directories
  `created`."""
  for temporary, _, _ in written:
    directory, base = os.path.split(temporary)
    for name in tf.io.gfile.listdir(directory):
      path = os.path.join(directory, name.rstrip("/"))
      if not name.startswith(base):
        continue
      if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
      else:
        tf.io.gfile.remove(path)
  for directory in reversed(created):
    tf.io.gfile.rmtree(directory)
