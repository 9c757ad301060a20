"""Input flags that name files: comma-separated glob patterns, as the original's `--input_file`."""

import tensorflow as tf

from base import errors


class InputError(errors.UserError, ValueError):
  """An input flag names no usable file."""


def expand_globs(patterns, flag_name="input_file"):
  """Expands comma-separated glob patterns into a sorted, de-duplicated list of files.

  Args:
    patterns: a comma-separated string (the original's `--input_file`) or a list of patterns.
    flag_name: the flag the patterns came from, for the error message.

  Returns:
    list of file paths.

  Raises:
    InputError: no pattern given, or a pattern that matches no file.
  """
  if isinstance(patterns, str):
    patterns = patterns.split(",")
  patterns = [pattern.strip() for pattern in patterns if pattern.strip()]
  if not patterns:
    raise InputError(f"--{flag_name} is empty")
  files = []
  for pattern in patterns:
    matches = tf.io.gfile.glob(pattern)
    if not matches:
      raise InputError(f"--{flag_name}: {pattern!r} matches no file")
    files.extend(matches)
  return sorted(set(files))


def check_readable(paths, flag_name="input_file"):
  """Raises InputError naming the first of `paths` (from `--<flag_name>`) that is a directory or
  cannot be opened and read, so that a long run does not fail on it hours in."""
  for path in paths:
    if tf.io.gfile.isdir(path):
      raise InputError(f"--{flag_name}: {path} is a directory, not a file")
    try:
      with tf.io.gfile.GFile(path, "rb") as reader:
        reader.read(1)
    except tf.errors.OpError as error:
      raise InputError(f"--{flag_name}: {path} cannot be read: {error.message}") from None
