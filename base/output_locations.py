"""Checks of the places a script will write, made before any work: a run that would end in a
file-system error after minutes of data processing or training ends at once instead, with one line
naming the flag.

Paths go through `tf.io.gfile`, so `gs://`, `s3://` (with tensorflow-io) and `hdfs://` outputs are
checked for their kind (file or directory); writability is probed on local paths only, where a
probe leaves nothing behind and costs nothing.
"""

import atexit
import contextlib
import functools
import json
import os
import socket
import tempfile
import time

from absl import logging
import tensorflow as tf

from base import atomic_files
from base import errors

LOCK_FILENAME = ".lock"


class OutputLocationError(errors.UserError, ValueError):
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


def claim_output_dir(flag_name, path):
  """Makes `path` this run's own until the process ends: refuses a directory that a running
  process uses (its lock file names it), takes over the lock of a killed run, and removes the
  temporaries killed runs left in it.

  Two runs on one directory would overwrite each other's record files and delete each other's
  checkpoints. The lock is `<path>/.lock` (host, process id, start time); it is removed when the
  process exits, with the directory if the claim created it and the run wrote nothing there. A lock of another machine cannot be checked: the message says to delete it when
  that run is over.

  Returns:
    a function that releases the claim now (otherwise it is released when the process exits).

  Raises:
    OutputLocationError: another process holds the directory.
  """
  created = not tf.io.gfile.isdir(path)
  tf.io.gfile.makedirs(path)
  lock_path = os.path.join(path, LOCK_FILENAME)
  host, pid = socket.gethostname(), os.getpid()
  holder = _read_lock(lock_path)
  if holder and holder.get("pid") != pid:
    if holder.get("host") != host:
      raise OutputLocationError(
          f"--{flag_name}={path} is in use by process {holder.get('pid')} on "
          f"{holder.get('host')}; choose another --{flag_name}, or delete {lock_path} if that "
          "run is over")
    if atomic_files.process_exists(holder.get("pid", -1)):
      raise OutputLocationError(
          f"--{flag_name}={path} is in use by process {holder['pid']} (started "
          f"{holder.get('started', '?')}); wait for it to end or choose another --{flag_name}")
    logging.info("taking over %s from process %s, which no longer runs", lock_path,
                 holder.get("pid"))
  lock = {"host": host, "pid": pid, "started": time.strftime("%Y-%m-%d %H:%M:%S")}
  with atomic_files.open_for_writing(lock_path) as f:
    f.write(json.dumps(lock) + "\n")
  release = functools.partial(_release_lock, lock_path, pid, path if created else None)
  atexit.register(release)
  atomic_files.remove_stale_temporaries(path)

  def release_now():
    atexit.unregister(release)
    release()
  return release_now


@contextlib.contextmanager
def claimed_output_dir(flag_name, path, claim=True):
  """`claim_output_dir` for the duration of a `with` block (a run in a process that goes on, as
  a notebook's): the lock is released when the block ends. With `claim` False (a worker that
  is not the chief), nothing is claimed."""
  if not claim:
    yield
    return
  release = claim_output_dir(flag_name, path)
  try:
    yield
  finally:
    release()


def _read_lock(lock_path):
  try:
    with tf.io.gfile.GFile(lock_path, "rb") as f:
      return json.loads(f.read().decode("utf-8"))
  except tf.errors.NotFoundError:
    return None
  except (tf.errors.OpError, ValueError):
    return {}


def _release_lock(lock_path, pid, created_directory):
  """Removes this process's lock, and the directory the claim created if nothing else was
  written in it (a run that failed before any work leaves nothing)."""
  if (_read_lock(lock_path) or {}).get("pid") == pid:
    tf.io.gfile.remove(lock_path)
  if created_directory and not tf.io.gfile.listdir(created_directory):
    tf.io.gfile.rmtree(created_directory)
