"""Checks of the places a script will write, made before any work: a run that would end in a
file-system error after minutes of data processing or training ends at once instead, with one line
naming the flag.

Paths go through `tf.io.gfile`, so `gs://`, `s3://` (with tensorflow-io) and `hdfs://` outputs are
checked for their kind (file or directory); writability is probed on local paths only, where a
probe leaves nothing behind and costs nothing.
"""

import os
import tempfile

import tensorflow as tf


class OutputLocationError(ValueError):
  """An output flag names a place that cannot be written."""


def is_local(path):
  """True for paths of the local file system (no `scheme://` prefix)."""
  return "://" not in path


def check_output_dir(flag_name, path):
  """Raises `OutputLocationError` unless `path` is a directory that exists or can be created
  (with its missing parents), and, locally, can be written in.

  Args:
    flag_name: the flag that named `path`, for the message.
    path: the directory.
  """
  if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    raise OutputLocationError(f"--{flag_name}={path}: is a file, expected a directory")
  _check_can_create_in(flag_name, path, path)


def check_output_file(flag_name, path):
  """Raises `OutputLocationError` unless `path` can be written as a file: not a directory, and,
  locally, in a directory that exists and can be written in (a temporary file beside the output is
  renamed over it, so the directory must be writable even if the file is)."""
  if tf.io.gfile.isdir(path):
    raise OutputLocationError(f"--{flag_name}={path}: is a directory, expected a file")
  directory = os.path.dirname(path)
  # Object stores (gs://, s3://) have no directories to create: a file can be written under any
  # prefix.
  if is_local(path) and directory and not tf.io.gfile.isdir(directory):
    kind = "is not a directory" if tf.io.gfile.exists(directory) else "does not exist"
    raise OutputLocationError(f"--{flag_name}={path}: directory {directory} {kind}")
  _check_can_create_in(flag_name, path, directory or ".")


def _check_can_create_in(flag_name, path, directory):
  """Checks that the nearest existing ancestor of `directory` (itself included) is a directory
  and, for a local path, that a file can be created in it."""
  ancestor = directory
  while not tf.io.gfile.exists(ancestor):
    parent = os.path.dirname(ancestor.rstrip("/"))
    if not parent or parent == ancestor:
      return
    ancestor = parent
  if not tf.io.gfile.isdir(ancestor):
    raise OutputLocationError(f"--{flag_name}={path}: {ancestor} is a file, not a directory")
  if is_local(ancestor):
    try:
      with tempfile.TemporaryFile(dir=ancestor):
        pass
    except OSError as error:
      raise OutputLocationError(
          f"--{flag_name}={path}: cannot create files in {ancestor} ({error.strerror})") from None
