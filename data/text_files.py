"""Reading the original release's plain-text inputs: globs, lines, undecodable bytes.

Undecodable bytes are not fatal: a line that is not valid UTF-8 is decoded with U+FFFD in place of
the bad bytes (which tokenization then drops, exactly as the original's `decode("utf-8", "ignore")`
did) and counted, so a run reports how much of its input was damaged.
"""

import dataclasses

import tensorflow as tf


class InputError(ValueError):
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


@dataclasses.dataclass
class DecodeStats:
  """Counts of what reading text found."""
  lines: int = 0
  undecodable_lines: int = 0


def read_lines(path, stats=None):
  """Yields the lines of a UTF-8 text file without their line ends.

  Args:
    path: file path (any `tf.io.gfile` file system).
    stats: optional `DecodeStats` updated as lines are read.

  Yields:
    str lines; invalid UTF-8 bytes become U+FFFD.
  """
  with tf.io.gfile.GFile(path, "rb") as reader:
    for raw_line in reader:
      try:
        line = raw_line.decode("utf-8")
      except UnicodeDecodeError:
        line = raw_line.decode("utf-8", "replace")
        if stats is not None:
          stats.undecodable_lines += 1
      if stats is not None:
        stats.lines += 1
      yield line.rstrip("\r\n")
