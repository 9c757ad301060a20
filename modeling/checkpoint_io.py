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

import tensorflow as tf

from data import atomic_files

DATA_SUFFIX = ".data-00000-of-00001"
INDEX_SUFFIX = ".index"


class CheckpointError(ValueError):
  """A checkpoint is missing, unreadable, or does not fit the model it is loaded into."""


def write_checkpoint(prefix, named_tensors):
  """Writes `{name: tensor}` as a name-based checkpoint at `prefix`, atomically.

  The bundle is written under a temporary prefix and renamed, data first and index last, so a
  reader never sees an index pointing at missing or partial data.

  Args:
    prefix: checkpoint prefix, e.g. `output_dir/model.ckpt-1000`.
    named_tensors: dict of original variable name -> tensor, variable or array of any shape.

  Returns:
    `prefix`.
  """
  if not named_tensors:
    raise CheckpointError(f"refusing to write an empty checkpoint at {prefix}")
  directory = os.path.dirname(prefix)
  if directory:
    tf.io.gfile.makedirs(directory)
  temp_prefix = atomic_files.temporary_name(prefix)
  names = sorted(named_tensors)
  tensors = [tf.convert_to_tensor(named_tensors[name]) for name in names]
  tf.raw_ops.SaveV2(
      prefix=temp_prefix,
      tensor_names=names,
      shape_and_slices=[""] * len(names),
      tensors=tensors)
  tf.io.gfile.rename(temp_prefix + DATA_SUFFIX, prefix + DATA_SUFFIX, overwrite=True)
  tf.io.gfile.rename(temp_prefix + INDEX_SUFFIX, prefix + INDEX_SUFFIX, overwrite=True)
  return prefix


def resolve_checkpoint(path):
  """Returns the checkpoint prefix for `path`: a prefix, or a directory's latest checkpoint."""
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise CheckpointError(f"{path}: directory holds no checkpoint (no 'checkpoint' state file)")
    return latest
  if not tf.io.gfile.exists(path + INDEX_SUFFIX):
    raise CheckpointError(f"{path}: no such checkpoint ({path}{INDEX_SUFFIX} does not exist)")
  return path


def _reader(prefix):
  """The checkpoint reader of a resolved `prefix`. (`tf.train.load_checkpoint` first asks whether
  the prefix is a directory, which file systems that match names by prefix, as `ram://`, answer
  wrongly.)"""
  return tf.compat.v1.train.NewCheckpointReader(prefix)


def read_checkpoint(path):
  """Reads every tensor of a checkpoint.

  Args:
    path: a checkpoint prefix or a directory with a `checkpoint` state file.

  Returns:
    dict of variable name -> numpy array.
  """
  prefix = resolve_checkpoint(path)
  try:
    reader = _reader(prefix)
  except (tf.errors.OpError, ValueError) as error:
    raise CheckpointError(f"{prefix}: unreadable checkpoint: {error}") from None
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def list_checkpoint_variables(path):
  """Returns a sorted list of (name, shape) pairs, like `tf.train.list_variables`."""
  reader = _reader(resolve_checkpoint(path))
  return sorted(reader.get_variable_to_shape_map().items())


def assign_from_checkpoint(name_to_variable, path, required_prefixes=("bert/",),
                           ignored_suffixes=("/adam_m", "/adam_v")):
  """Assigns checkpoint tensors to variables with the same original name.

  As the original's `get_assignment_map_from_checkpoint`, variables are matched by identical
  name; optimizer slots and `global_step` in the checkpoint are ignored.

  Args:
    name_to_variable: dict of original name -> variable of the model being initialised.
    path: checkpoint prefix or directory.
    required_prefixes: a model variable whose name starts with one of these must be found in the
      checkpoint (by default the whole encoder), else the load fails naming what is missing.
    ignored_suffixes: checkpoint names ending in one of these are never reported as unexpected.

  Returns:
    dict with sorted lists `loaded`, `missing` (model variables not in the checkpoint) and
    `unexpected` (checkpoint tensors no model variable takes).

  Raises:
    CheckpointError: a shape mismatch, or a required variable missing.
  """
  prefix = resolve_checkpoint(path)
  reader = _reader(prefix)
  shapes = reader.get_variable_to_shape_map()
  loaded, missing, mismatched = [], [], []
  for name, variable in sorted(name_to_variable.items()):
    if name not in shapes:
      missing.append(name)
      continue
    if list(shapes[name]) != list(variable.shape):
      mismatched.append(f"{name}: checkpoint {list(shapes[name])} vs model {list(variable.shape)}")
      continue
    loaded.append(name)
  if mismatched:
    raise CheckpointError(f"{prefix}: shape mismatch: " + "; ".join(mismatched))
  missing_required = [n for n in missing if n.startswith(tuple(required_prefixes))]
  if missing_required:
    raise CheckpointError(
        f"{prefix}: cannot initialise the encoder, {len(missing_required)} variable(s) missing: "
        + ", ".join(missing_required[:10]) + (" ..." if len(missing_required) > 10 else ""))
  for name in loaded:
    name_to_variable[name].assign(reader.get_tensor(name))
  unexpected = sorted(
      n for n in shapes
      if n not in name_to_variable and n != "global_step" and not n.endswith(tuple(ignored_suffixes)))
  return {"loaded": loaded, "missing": missing, "unexpected": unexpected}
