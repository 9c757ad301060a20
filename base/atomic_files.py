"""Output files that appear only when complete: written under a temporary name beside the target,
renamed over it on success, removed on any error (so a failed run leaves nothing half-written).

A temporary name is `<target>.tmp-<pid>`: a process killed with SIGKILL cannot remove its own, so
the next run removes those of processes that no longer exist (`remove_stale_temporaries`).
"""

import contextlib
import errno
import os
import re

from absl import logging
import tensorflow as tf

from base import errors

_TEMPORARY_NAME = re.compile(r"\.tmp-(\d+)(\.|$)")


class NoSpaceError(errors.UserError, OSError):
  """The file system of an output is full (or the quota is reached)."""


def is_no_space(error):
  """True for the errors of a full file system or exceeded quota: `OSError` ENOSPC / EDQUOT, or
  TensorFlow's `ResourceExhaustedError` of a file write."""
  if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
    return True
  return isinstance(error, tf.errors.ResourceExhaustedError) and (
      "No space left" in str(error) or "quota" in str(error).lower())


def no_space_message(error, path=None):
  """The one line of a full-disk `error`: the file it names (or `path`) and what happened."""
  if path is None:
    named = re.search(r"(\S+?)(?:\.tmp-\d+\S*)?; No space left", str(error))
    path = named.group(1) if named else getattr(error, "filename", None) or "an output"
  return (f"{path}: no space left on the device (or quota exceeded) while writing it; nothing "
          "was left under its name")


@contextlib.contextmanager
def no_space_is_one_line(path):
  """Raises `NoSpaceError` naming `path` for a full file system under the block."""
  try:
    yield
  except (OSError, tf.errors.OpError) as error:
    if not is_no_space(error):
      raise
    raise NoSpaceError(no_space_message(error, path)) from None


def temporary_name(path):
  """The name `path` is written under until it is complete: `<path>.tmp-<this process's id>`."""
  return f"{path}.tmp-{os.getpid()}"


def process_exists(pid):
  """True if a process `pid` runs on this machine."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def remove_stale_temporaries(directory, prefix=""):
  """Removes the temporaries (files or directories) in `directory` whose names start with
  `prefix` and whose writing process no longer runs on this machine.

  On a non-local file system the writer's machine is unknown, so only call it there for a
  directory this run owns (a locked `--output_dir`): every temporary in it is then stale.

  Returns:
    the paths removed.
  """
  if not tf.io.gfile.isdir(directory):
    return []
  local = "://" not in directory
  removed = []
  for name in tf.io.gfile.listdir(directory):
    name = name.rstrip("/")
    match = _TEMPORARY_NAME.search(name)
    if not name.startswith(prefix) or not match:
      continue
    pid = int(match.group(1))
    if pid == os.getpid() or (local and process_exists(pid)):
      continue
    path = os.path.join(directory, name)
    if tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
      tf.io.gfile.remove(path)
    removed.append(path)
  if removed:
    logging.info("removed %d temporary file(s) of killed runs from %s, e.g. %s", len(removed),
                 directory, removed[0])
  return removed


@contextlib.contextmanager
def temporary_path(path):
  """Yields the name to write `path`'s content to; renames it to `path` when the block succeeds.

  Example:
    >>> import tensorflow as tf
    >>> from base import atomic_files
    >>> with atomic_files.temporary_path("train.tf_record") as temp_path:
    ...   with tf.io.TFRecordWriter(temp_path) as writer:
    ...     writer.write(b"record")
    >>> tf.io.gfile.exists("train.tf_record")
    True
  """
  temp_path = temporary_name(path)
  try:
    with no_space_is_one_line(path):
      yield temp_path
      tf.io.gfile.rename(temp_path, path, overwrite=True)
  finally:
    if tf.io.gfile.exists(temp_path):
      tf.io.gfile.remove(temp_path)


@contextlib.contextmanager
def open_for_writing(path, mode="w"):
  """Yields a file (text, UTF-8, or bytes with `mode="wb"`) that becomes `path` when the block
  succeeds; on any error neither it nor `path` is left changed.

  Example:
    >>> from base import atomic_files
    >>> with atomic_files.open_for_writing("eval_results.txt") as f:
    ...   _ = f.write("eval_accuracy = 0.9\\n")
    >>> open("eval_results.txt").read()
    'eval_accuracy = 0.9\\n'
  """
  with temporary_path(path) as temp_path, tf.io.gfile.GFile(temp_path, mode) as f:
    yield f


def write_tf_examples(path, tf_examples):
  """Writes `tf.train.Example`s to the TFRecord file `path`, atomically.

  Args:
    path: the output file.
    tf_examples: iterable of `tf.train.Example` (consumed once; may be a generator).

  Returns:
    the number of records written.
  """
  count = 0
  with temporary_path(path) as temp_path, tf.io.TFRecordWriter(temp_path) as writer:
    for tf_example in tf_examples:
      writer.write(tf_example.SerializeToString())
      count += 1
  return count
