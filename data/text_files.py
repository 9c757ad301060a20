"""Reading the original release's plain-text inputs: lines and undecodable bytes.

Undecodable bytes are not fatal: a line that is not valid UTF-8 is decoded with U+FFFD in place of
the bad bytes (which tokenization then drops, exactly as the original's `decode("utf-8", "ignore")`
did) and counted, so a run reports how much of its input was damaged.
"""

import dataclasses

import tensorflow as tf


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
