"""Writes SavedModels the way TensorFlow Serving reads them: `<export_dir>/<version>/`.

The SavedModel is written to a temporary directory beside the final one and renamed when
complete, so a server watching a local `export_dir` never loads a half-written version. On other
file systems (`gs://`, ...) a directory has no atomic rename: the files are moved one by one,
`saved_model.pb` last.
"""

import os
import time

from absl import logging
import tensorflow as tf

from base import atomic_files
from base import errors


class ExportError(errors.UserError, ValueError):
  """The export directory or version cannot be used."""


def check_version(export_dir, version):
  """Raises `ExportError` unless `export_dir/<version>` can be written (a positive integer, not
  there yet); None means the Unix time at export. Called before training, so that a bad
  --export_version stops the run before hours of work, and again by `export`."""
  if version is None:
    return
  if not isinstance(version, int) or version <= 0:
    raise ExportError(f"--export_version must be a positive integer, got {version!r}")
  path = os.path.join(export_dir, str(version))
  if tf.io.gfile.exists(path):
    raise ExportError(f"{path} exists already; TF Serving versions are immutable, choose another "
                      "--export_version")


def export(module, export_dir, signatures, version=None):
  """Saves `module` as `export_dir/<version>`.

  Args:
    module: a `tf.Module` holding the model, its assets and the signature functions.
    export_dir: the model's base directory (created if needed).
    signatures: dict signature name -> concrete function.
    version: positive integer version; default the current Unix time in seconds.

  Returns:
    the path of the written version.

  Raises:
    ExportError: the version exists already or is not a positive integer.
  """
  version = int(time.time()) if version is None else version
  check_version(export_dir, version)
  path = os.path.join(export_dir, str(version))
  created = not tf.io.gfile.isdir(export_dir)
  tf.io.gfile.makedirs(export_dir)
  # Not a number, so TF Serving ignores it; left by a killed export, the next export removes it.
  atomic_files.remove_stale_temporaries(export_dir)
  temp_path = atomic_files.temporary_name(path)
  try:
    with atomic_files.no_space_is_one_line(path):
      tf.saved_model.save(module, temp_path, signatures=signatures)
      _move_directory(temp_path, path)
  finally:
    if tf.io.gfile.exists(temp_path):
      tf.io.gfile.rmtree(temp_path)
    # A failed export leaves no empty directory that it made.
    if created and tf.io.gfile.isdir(export_dir) and not tf.io.gfile.listdir(export_dir):
      tf.io.gfile.rmtree(export_dir)
  logging.info("exported %s (signatures: %s)", path, ", ".join(sorted(signatures)))
  return path


def _move_directory(source, target):
  """Renames the directory `source` to `target`: at once on a local disk, else file by file with
  `saved_model.pb` (what a server looks for) last."""
  if "://" not in source:
    tf.io.gfile.rename(source, target)
    return
  files = [os.path.join(directory, name)
           for directory, _, names in tf.io.gfile.walk(source) for name in names]
  files.sort(key=lambda name: os.path.basename(name) == "saved_model.pb")
  for name in files:
    destination = os.path.join(target, os.path.relpath(name, source))
    tf.io.gfile.makedirs(os.path.dirname(destination))
    tf.io.gfile.rename(name, destination)
