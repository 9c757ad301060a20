"""Checkpoint files in the original release's layout: TF1 name-based bundles.

A checkpoint here is a TensorFlow V2 bundle (`<prefix>.index` + `<prefix>.data-00000-of-00001`)
whose tensor keys are the original variable names (`bert/embeddings/word_embeddings`,
`bert/encoder/layer_0/attention/self/query/kernel`, ..., `global_step`), so that the released
`bert_model.ckpt` files load here and checkpoints written here load in tools that expect the
original layout (HuggingFace `load_tf_weights_in_bert`, Model Garden's converter).

`tf.train.Checkpoint` cannot write such names (it writes object-graph paths ending in
`/.ATTRIBUTES/VARIABLE_VALUE`), so the bundle is written with the `SaveV2` op directly and read with
a checkpoint reader.
"""

import os
import re

import numpy as np
import tensorflow as tf

from base import atomic_files
from base import errors

DATA_SUFFIX = ".data-00000-of-00001"
INDEX_SUFFIX = ".index"


class CheckpointError(errors.UserError, ValueError):
  """A checkpoint is missing, unreadable, or does not fit the model it is loaded into."""


def write_checkpoint(prefix, named_tensors):
  """Writes `{name: tensor}` as a name-based checkpoint at `prefix`, atomically.

  The bundle is written under a temporary prefix (`save_bundle`) and renamed (`publish_bundle`).

  Args:
    prefix: checkpoint prefix, e.g. `output_dir/model.ckpt-1000`.
    named_tensors: dict of original variable name -> tensor, variable or array of any shape.

  Returns:
    `prefix`.
  """
  directory = os.path.dirname(prefix)
  if directory:
    tf.io.gfile.makedirs(directory)
  temp_prefix = atomic_files.temporary_name(prefix)
  try:
    with atomic_files.no_space_is_one_line(prefix):
      save_bundle(temp_prefix, named_tensors)
      return publish_bundle(temp_prefix, prefix)
  except BaseException:
    # SaveV2's own partial files (`<temp_prefix>.data-...tempstate<n>`) included.
    for path in tf.io.gfile.glob(temp_prefix + "*"):
      tf.io.gfile.remove(path)
    raise


def save_bundle(prefix, named_tensors):
  """Writes `{name: tensor}` as a name-based bundle at `prefix` as it is (not atomically: callers
  write under a temporary prefix and `publish_bundle` it)."""
  if not named_tensors:
    raise CheckpointError(f"refusing to write an empty checkpoint at {prefix}")
  names = sorted(named_tensors)
  tensors = [tf.convert_to_tensor(named_tensors[name]) for name in names]
  tf.raw_ops.SaveV2(
      prefix=prefix,
      tensor_names=names,
      shape_and_slices=[""] * len(names),
      tensors=tensors)


def publish_bundle(temp_prefix, prefix):
  """Renames a complete single-shard bundle from `temp_prefix` to `prefix`, data first and index
  last, so a reader never sees an index pointing at missing or partial data. Returns `prefix`."""
  tf.io.gfile.rename(temp_prefix + DATA_SUFFIX, prefix + DATA_SUFFIX, overwrite=True)
  tf.io.gfile.rename(temp_prefix + INDEX_SUFFIX, prefix + INDEX_SUFFIX, overwrite=True)
  return prefix


def resolve_checkpoint(path):
  """Returns the checkpoint prefix for `path`: a prefix, or a directory's latest checkpoint. (The
  prefix test comes first: file systems that match names by prefix, as `ram://`, call a prefix
  with files under it a directory.)"""
  if tf.io.gfile.exists(path + INDEX_SUFFIX):
    return path
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise CheckpointError(f"{path}: directory holds no checkpoint (no 'checkpoint' state file)")
    return latest
  raise CheckpointError(f"{path}: no such checkpoint ({path}{INDEX_SUFFIX} does not exist)")


# A data file's name: `<prefix>.data-<shard>-of-<number of shards>`, numbers of 5 digits.
_DATA_FILE = re.compile(r"\.data-\d{5}-of-\d{5}")


class CheckpointReader:
  """Reads the tensors of a resolved checkpoint prefix, as TensorFlow's checkpoint reader (with
  the same methods), but every failure to read is one `CheckpointError` line naming the prefix:
  `<prefix>: damaged or incomplete checkpoint (<what TensorFlow says>)`.

  A data file shorter than the tensors its index lists (a copy or download cut short) is refused
  on opening, from the index alone, so that the checks before a run's work find it; other damage
  (a flipped byte) is found by the checksums when a tensor is read.

  Args:
    prefix: a checkpoint prefix (see `resolve_checkpoint`).
  """

  def __init__(self, prefix):
    self.prefix = prefix
    # `tf.train.load_checkpoint` first asks whether the prefix is a directory, which file
    # systems that match names by prefix, as `ram://`, answer wrongly.
    self._reader = self._guarded(tf.compat.v1.train.NewCheckpointReader, prefix)
    self._check_data_size()

  def _guarded(self, read, *args):
    """`read(*args)`, with TensorFlow's errors on a damaged bundle as a `CheckpointError` (a
    short data file gives an `IndexError`, a missing one or a checksum mismatch an `OpError`)."""
    try:
      return read(*args)
    except (tf.errors.OpError, IndexError, ValueError) as error:
      detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
      raise CheckpointError(f"{self.prefix}: damaged or incomplete checkpoint ({detail})") from None

  def _check_data_size(self):
    """Raises `CheckpointError` if the data files hold fewer bytes than the numeric tensors of the
    index (each stored whole and uncompressed; strings, of unknown length, are not counted)."""
    dtypes = self._reader.get_variable_to_dtype_map()
    needed = sum(int(np.prod(shape)) * dtypes[name].size
                 for name, shape in self._reader.get_variable_to_shape_map().items()
                 if dtypes[name].is_numpy_compatible and dtypes[name] != tf.string)
    directory, base = os.path.split(self.prefix)
    found = sum(tf.io.gfile.stat(os.path.join(directory, name)).length
                for name in tf.io.gfile.listdir(directory or ".")
                if name.startswith(base) and _DATA_FILE.fullmatch(name[len(base):]))
    if found < needed:
      raise CheckpointError(
          f"{self.prefix}: damaged or incomplete checkpoint (its data files hold {found} bytes, "
          f"its index lists {needed})")

  def get_variable_to_shape_map(self):
    """dict name -> shape (list of ints) of every tensor."""
    return self._reader.get_variable_to_shape_map()

  def has_tensor(self, name):
    return self._reader.has_tensor(name)

  def get_tensor(self, name):
    """The numpy array (bytes for a string scalar) stored under `name`."""
    return self._guarded(self._reader.get_tensor, name)


def read_checkpoint(path):
  """Reads every tensor of a checkpoint.

  Args:
    path: a checkpoint prefix or a directory with a `checkpoint` state file.

  Returns:
    dict of variable name -> numpy array.

  Raises:
    CheckpointError: no such checkpoint, or a damaged one.
  """
  reader = CheckpointReader(resolve_checkpoint(path))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def list_checkpoint_variables(path):
  """Returns a sorted list of (name, shape) pairs, like `tf.train.list_variables`; a
  `CheckpointError` if there is no such checkpoint or its index or data files are damaged."""
  reader = CheckpointReader(resolve_checkpoint(path))
  return sorted(reader.get_variable_to_shape_map().items())


def assign_from_checkpoint(name_to_variable, path, required_prefixes=("bert/",),
                           ignored_suffixes=("/adam_m", "/adam_v"), strict_prefixes=("bert/",),
                           allow_partial=False):
  """Assigns checkpoint tensors to variables with the same original name.

  As the original's `get_assignment_map_from_checkpoint`, variables are matched by identical
  name; optimizer slots and `global_step` in the checkpoint are ignored. Unlike it, the encoder
  must match both ways: a checkpoint of another depth or with other variables is refused instead
  of loading in part, unless `allow_partial`.

  Args:
    name_to_variable: dict of original name -> variable of the model being initialised.
    path: checkpoint prefix or directory.
    required_prefixes: a model variable whose name starts with one of these must be found in the
      checkpoint (by default the whole encoder).
    ignored_suffixes: checkpoint names ending in one of these are never reported as unexpected.
    strict_prefixes: a checkpoint tensor whose name starts with one of these must be taken by a
      model variable (by default any encoder tensor: heads of other tasks are left out).
    allow_partial: report missing required and unexpected strict names instead of failing.

  Returns:
    dict with sorted lists `loaded`, `missing` (model variables not in the checkpoint) and
    `unexpected` (checkpoint tensors no model variable takes).

  Raises:
    CheckpointError: a damaged checkpoint; a shape mismatch; without `allow_partial`, a required
      variable missing or an unexpected strict one, summarised in one line.
  """
  prefix = resolve_checkpoint(path)
  reader = CheckpointReader(prefix)
  shapes = reader.get_variable_to_shape_map()
  loaded, missing, mismatched = [], [], []
  for name, variable in sorted(name_to_variable.items()):
    if name not in shapes:
      missing.append(name)
      continue
    if list(shapes[name]) != list(variable.shape):
      mismatched.append(name)
      continue
    loaded.append(name)
  if mismatched:
    first = mismatched[0]
    raise CheckpointError(
        f"{prefix}: {len(mismatched)} variable(s) of another shape, e.g. {first}: checkpoint "
        f"{list(shapes[first])} vs model {list(name_to_variable[first].shape)}"
        + _depths(shapes, name_to_variable))
  unexpected = sorted(
      n for n in shapes
      if n not in name_to_variable and n != "global_step" and not n.endswith(tuple(ignored_suffixes)))
  missing_required = [n for n in missing if n.startswith(tuple(required_prefixes))]
  unexpected_strict = [n for n in unexpected if n.startswith(tuple(strict_prefixes))]
  if (missing_required or unexpected_strict) and not allow_partial:
    problems = []
    if missing_required:
      problems.append(f"{len(missing_required)} model variable(s) missing from it "
                      f"({summarize_names(missing_required)})")
    if unexpected_strict:
      problems.append(f"{len(unexpected_strict)} of its variable(s) unused by the model "
                      f"({summarize_names(unexpected_strict)})")
    raise CheckpointError(f"{prefix} does not fit the model: {'; '.join(problems)}"
                          + _depths(shapes, name_to_variable))
  for name in loaded:
    name_to_variable[name].assign(reader.get_tensor(name))
  return {"loaded": loaded, "missing": missing, "unexpected": unexpected}


_LAYER = re.compile(r"/layer_(\d+)/")


def summarize_names(names, limit=3):
  """A short description of variable names: layers collapsed into `layer_{2..5}`, at most
  `limit` distinct names shown. E.g. `bert/encoder/layer_{3..5}/* and cls/squad/output_bias`."""
  layers = sorted({int(m.group(1)) for name in names if (m := _LAYER.search(name))})
  others = sorted({_LAYER.sub("/layer_*/", name) for name in names if not _LAYER.search(name)})
  parts = []
  if layers:
    runs, start, previous = [], layers[0], layers[0]
    for current in layers[1:] + [None]:
      if current != previous + 1:
        runs.append(str(start) if start == previous else f"{start}..{previous}")
        start = current
      previous = current
    layer = runs[0] if len(runs) == 1 and ".." not in runs[0] else "{" + ",".join(runs) + "}"
    parts.append(f"bert/encoder/layer_{layer}/*")
  parts.extend(others[:limit])
  if len(others) > limit:
    parts.append(f"{len(others) - limit} more")
  return " and ".join(parts) if len(parts) <= 2 else ", ".join(parts)


def _depths(checkpoint_shapes, name_to_variable):
  """`": the checkpoint has 6 encoder layers, the model 3"` when the depths differ, else ""."""
  def depth(names):
    return len({m.group(1) for name in names if (m := _LAYER.search(name))})
  checkpoint_depth, model_depth = depth(checkpoint_shapes), depth(name_to_variable)
  if checkpoint_depth == model_depth:
    return ""
  return f": the checkpoint has {checkpoint_depth} encoder layers, the model {model_depth}"


def encoder_mismatches(shapes, config, compare_depth=True):
  """How an encoder's tensor shapes contradict a `BertConfig`, as phrases (empty if they agree).

  Args:
    shapes: dict original name -> shape (list of ints) of a checkpoint or converted weights.
    config: the `BertConfig` the tensors are meant for.
    compare_depth: also compare the number of encoder layers.
  """
  found = []
  layers = {name.split("/")[2] for name in shapes if name.startswith("bert/encoder/layer_")}
  if compare_depth and layers and len(layers) != config.num_hidden_layers:
    found.append(f"the checkpoint has {len(layers)} encoder layers, the config "
                 f"{config.num_hidden_layers}")
  expected = {
      "bert/embeddings/word_embeddings": ([config.vocab_size, config.hidden_size],
                                          "[vocab_size, hidden_size]"),
      "bert/embeddings/position_embeddings": (
          [config.max_position_embeddings, config.hidden_size],
          "[max_position_embeddings, hidden_size]"),
      "bert/embeddings/token_type_embeddings": ([config.type_vocab_size, config.hidden_size],
                                                "[type_vocab_size, hidden_size]"),
      "bert/encoder/layer_0/intermediate/dense/kernel": (
          [config.hidden_size, config.intermediate_size], "[hidden_size, intermediate_size]"),
  }
  for name, (shape, meaning) in expected.items():
    if name in shapes and list(shapes[name]) != shape:
      found.append(f"{name} is {list(shapes[name])}, the config's {meaning} {shape}")
  return found
