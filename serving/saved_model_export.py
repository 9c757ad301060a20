"""Writes SavedModels the way TensorFlow Serving reads them: `<export_dir>/<version>/`.

The SavedModel is written to a temporary directory beside the final one and renamed when
complete, so a server watching `export_dir` never loads a half-written version.
"""

import os
import shutil
import time

from absl import logging
import tensorflow as tf


class ExportError(ValueError):
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
  if os.path.exists(path):
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
  os.makedirs(export_dir, exist_ok=True)
  temp_path = os.path.join(export_dir, f".tmp-{version}-{os.getpid()}")
  try:
    tf.saved_model.save(module, temp_path, signatures=signatures)
    os.replace(temp_path, path)
  finally:
    shutil.rmtree(temp_path, ignore_errors=True)
  logging.info("exported %s (signatures: %s)", path, ", ".join(sorted(signatures)))
  return path
