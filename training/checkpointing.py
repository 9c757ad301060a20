"""Training checkpoints in the original layout: `model.ckpt-<step>` bundles and a `checkpoint` file.

Each checkpoint holds the model's variables under their original names, the optimizer slots
(`<name>/adam_m`, `<name>/adam_v`) and `global_step`, like the Estimator checkpoints of the original
release, so `tf.train.latest_checkpoint`, HuggingFace's `load_tf_weights_in_bert` and this project's
`--init_checkpoint` all read them. The bundle and then the state file are each replaced
atomically, so a run killed at any moment leaves the previous checkpoint usable.
"""

import json
import os
import re
import shutil
import tempfile

from absl import logging
import tensorflow as tf

from base import atomic_files
from modeling import checkpoint_io

STATE_FILENAME = "checkpoint"
CHECKPOINT_BASENAME = "model.ckpt"
# The model config of the run, written beside its checkpoints (which makes the directory a model
# directory for convert_checkpoint.py) and compared when a run resumes.
CONFIG_FILENAME = "bert_config.json"


def checkpoint_step(prefix):
  """Returns the step of `.../<name>.ckpt-<step>`, or None for other names (temporaries such as
  `model.ckpt-5.tmp-123` included)."""
  match = re.fullmatch(r"[^/]*\.ckpt-(\d+)", os.path.basename(prefix))
  return int(match.group(1)) if match else None


def write_state_file(directory, prefixes):
  """Atomically writes the `checkpoint` state proto listing `prefixes` (oldest first)."""
  # Relative paths keep the directory movable; latest_checkpoint joins them with the directory.
  names = [os.path.basename(p) for p in prefixes]
  # Written directly: generate_checkpoint_state_proto rewrites names relative to a relative
  # directory ("../../model.ckpt-N"), which latest_checkpoint then cannot find.
  state = "".join([f"model_checkpoint_path: {json.dumps(names[-1])}\n"]
                  + [f"all_model_checkpoint_paths: {json.dumps(name)}\n" for name in names])
  with atomic_files.open_for_writing(os.path.join(directory, STATE_FILENAME)) as f:
    f.write(state)


def delete_checkpoint(prefix):
  """Removes the files of checkpoint `prefix`, its index first: a kill part-way leaves data
  without an index, which no reader takes for a checkpoint and `remove_orphan_data` removes, never
  an index without its data."""
  paths = tf.io.gfile.glob(prefix + ".*")
  for path in sorted(paths, key=lambda path: not path.endswith(checkpoint_io.INDEX_SUFFIX)):
    tf.io.gfile.remove(path)


def remove_orphan_data(directory):
  """Removes the data files of `model.ckpt-<step>` checkpoints in `directory` that have no index
  (left by a run killed while deleting or publishing a checkpoint). Returns the paths removed."""
  removed = []
  for path in tf.io.gfile.glob(os.path.join(directory, f"{CHECKPOINT_BASENAME}-*.data-*")):
    prefix = path[:path.rindex(".data-")]
    if (checkpoint_step(prefix) is not None
        and not tf.io.gfile.exists(prefix + checkpoint_io.INDEX_SUFFIX)):
      tf.io.gfile.remove(path)
      removed.append(path)
  if removed:
    logging.info("Removed %d checkpoint data file(s) without an index from %s, e.g. %s",
                 len(removed), directory, removed[0])
  return removed


class CheckpointManager:
  """Saves, lists, prunes and restores the checkpoints of one output directory.

  Args:
    directory: the run's `output_dir`.
    name_to_variable: dict original name -> variable, everything a checkpoint holds (model
      variables, optimizer slots and `global_step`).
    keep_checkpoint_max: number of checkpoints kept (0 or None keeps all).
    is_chief: only the chief writes into `directory`; other workers write the same bundle into a
      temporary directory and delete it, as TensorFlow recommends for multi-worker training.
    model_config: the model's `bert_config.json` as a dict, recorded as `CONFIG_FILENAME` with
      the first checkpoint; resuming with another config is refused (shapes alone do not show,
      e.g., another `hidden_act`). None records nothing.

  Example:
    >>> import tensorflow as tf
    >>> from training import checkpointing
    >>> manager = checkpointing.CheckpointManager("output", {"bert/weight": tf.Variable([1.0])},
    ...                                           keep_checkpoint_max=5)
    >>> manager.restore_latest() is None  # nothing to resume from yet
    True
    >>> manager.save(step=1000)
    'output/model.ckpt-1000'
    >>> manager.restore_latest()  # the step restored
    1000
  """

  def __init__(self, directory, name_to_variable, keep_checkpoint_max=5, is_chief=True,
               model_config=None):
    self.directory = directory
    self.name_to_variable = dict(name_to_variable)
    self.keep_checkpoint_max = keep_checkpoint_max
    self.is_chief = is_chief
    self.model_config = model_config

  def latest(self):
    """Returns the latest checkpoint prefix of the directory, or None."""
    return tf.train.latest_checkpoint(self.directory)

  def _existing(self):
    """The complete checkpoints in the directory (index present, so data too), oldest first.
    Read from the directory, not the state file: a run killed between writing the state file
    and deleting old checkpoints leaves some that only the directory lists."""
    prefixes = []
    for index in tf.io.gfile.glob(os.path.join(self.directory, f"{CHECKPOINT_BASENAME}-*"
                                               + checkpoint_io.INDEX_SUFFIX)):
      prefix = index[:-len(checkpoint_io.INDEX_SUFFIX)]
      if checkpoint_step(prefix) is not None:
        prefixes.append(prefix)
    return sorted(prefixes, key=checkpoint_step)

  def save(self, step):
    """Writes `model.ckpt-<step>`, updates the state file, deletes checkpoints beyond the limit.

    Returns:
      the prefix written (in a temporary directory on non-chief workers, already deleted).
    """
    if not self.is_chief:
      temp_dir = tempfile.mkdtemp(prefix="worker-ckpt-")
      prefix = checkpoint_io.write_checkpoint(
          os.path.join(temp_dir, f"{CHECKPOINT_BASENAME}-{step}"), self.name_to_variable)
      shutil.rmtree(temp_dir, ignore_errors=True)
      return prefix
    prefix = os.path.join(self.directory, f"{CHECKPOINT_BASENAME}-{step}")
    checkpoint_io.write_checkpoint(prefix, self.name_to_variable)
    config_path = os.path.join(self.directory, CONFIG_FILENAME)
    if self.model_config is not None and not tf.io.gfile.exists(config_path):
      with atomic_files.open_for_writing(config_path) as f:
        f.write(json.dumps(self.model_config, indent=2, sort_keys=True) + "\n")
    prefixes = [p for p in self._existing() if p != prefix] + [prefix]
    kept = prefixes[-self.keep_checkpoint_max:] if self.keep_checkpoint_max else prefixes
    write_state_file(self.directory, kept)
    for old in prefixes[:len(prefixes) - len(kept)]:
      delete_checkpoint(old)
    logging.info("Saved checkpoint %s", prefix)
    return prefix

  def restore(self, prefix):
    """Assigns every variable from `prefix`: the checkpoint and the variables must match both
    ways (names and shapes; optimizer slots excepted when this run has none), and the recorded
    model config must be this run's.

    Returns:
      the checkpoint's step (from its name).

    Raises:
      checkpoint_io.CheckpointError: the checkpoint or its recorded config does not match.
    """
    self._check_recorded_config()
    checkpoint_io.assign_from_checkpoint(self.name_to_variable, prefix, required_prefixes=("",),
                                         strict_prefixes=("",))
    logging.info("Resumed from %s", prefix)
    return checkpoint_step(prefix)

  def _check_recorded_config(self):
    config_path = os.path.join(self.directory, CONFIG_FILENAME)
    if self.model_config is None or not tf.io.gfile.exists(config_path):
      return
    with tf.io.gfile.GFile(config_path, "rb") as f:
      recorded = json.loads(f.read().decode("utf-8"))
    differing = [f"{key} {recorded.get(key)!r} there, {self.model_config.get(key)!r} now"
                 for key in sorted(set(recorded) | set(self.model_config))
                 if recorded.get(key) != self.model_config.get(key)]
    if differing:
      raise checkpoint_io.CheckpointError(
          f"{config_path}, the config of the run whose checkpoints are in {self.directory}, "
          f"differs from this run's: {'; '.join(differing)}. Resume with that config, or start "
          "in another directory")

  def restore_latest(self):
    """Restores the directory's latest checkpoint; returns its step, or None if there is none.
    The chief first removes the data files a killed run left without an index."""
    if self.is_chief:
      remove_orphan_data(self.directory)
    prefix = self.latest()
    return None if prefix is None else self.restore(prefix)
