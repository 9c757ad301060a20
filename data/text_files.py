"""Reading the original release's plain-text inputs: lines and undecodable bytes.

Undecodable bytes are not fatal: a line that is not valid UTF-8 is decoded with U+FFFD in place of
the bad bytes (which tokenization then drops, exactly as the original's `decode("utf-8", "ignore")`
did) and counted, so a run reports how much of its input was damaged.
"""

import codecs
import dataclasses
import io

import tensorflow as tf

_BLOCK_BYTES = 1 << 20


@dataclasses.dataclass
class DecodeStats:
  """Counts of what reading text found."""
  lines: int = 0
  undecodable_lines: int = 0
  # Bytes of the file the lines read so far cover, line ends included (a progress total in file
  # bytes: the decoded text is longer where U+FFFD replaced a byte, shorter without "\r").
  bytes: int = 0


def is_file(path):
  """True if `path` (any `tf.io.gfile` file system) is an existing file, not a directory."""
  return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


def open_text(path, encoding="utf-8-sig", newline=None):
  """Opens a text file for reading on any `tf.io.gfile` file system (the built-in `open` reads
  local files only), with `open`'s `encoding` and `newline` arguments; a byte-order mark is
  skipped by default."""
  return io.TextIOWrapper(io.BufferedReader(_GFileRaw(tf.io.gfile.GFile(path, "rb")),
                                            _BLOCK_BYTES), encoding=encoding, newline=newline)


class _GFileRaw(io.RawIOBase):
  """A `tf.io.gfile.GFile` as the raw stream `io.BufferedReader` reads from."""

  def __init__(self, gfile):
    super().__init__()
    self._gfile = gfile

  def readable(self):
    return True

  def readinto(self, buffer):
    data = self._gfile.read(len(buffer))
    buffer[:len(data)] = data
    return len(data)

  def close(self):
    self._gfile.close()
    super().close()


def undecodable_problem(path):
  """Where a file is not UTF-8, for a message: `not UTF-8 text at line 3 (invalid continuation
  byte at byte 57)`, the byte counted from the start of the file (a `UnicodeDecodeError` raised
  while reading through `open_text` counts from the block being decoded). "not UTF-8 text" when
  the file decodes after all."""
  decoder = codecs.getincrementaldecoder("utf-8")()
  # Lines and bytes of the blocks decoded so far, the decoder's pending bytes (an incomplete
  # multi-byte sequence, never a newline) included.
  line, consumed = 1, 0
  with tf.io.gfile.GFile(path, "rb") as reader:
    while True:
      block = reader.read(_BLOCK_BYTES)
      pending = decoder.getstate()[0]
      try:
        decoder.decode(block, final=not block)
      except UnicodeDecodeError as error:
        data = pending + block
        line += data.count(b"\n", 0, error.start)
        return (f"not UTF-8 text at line {line} ({error.reason} at byte "
                f"{consumed - len(pending) + error.start})")
      if not block:
        return "not UTF-8 text"
      line += block.count(b"\n")
      consumed += len(block)


def read_lines(path, stats=None):
  """Yields the lines of a UTF-8 text file without their line ends.

  Args:
    path: file path (any `tf.io.gfile` file system).
    stats: optional `DecodeStats` updated as lines are read.

  Yields:
    str lines; invalid UTF-8 bytes become U+FFFD.
  """
  start_bytes = None if stats is None else stats.bytes
  for raw_line in _raw_lines(path):
    if stats is not None:
      stats.bytes += len(raw_line) + 1
    try:
      line = raw_line.decode("utf-8")
    except UnicodeDecodeError:
      line = raw_line.decode("utf-8", "replace")
      if stats is not None:
        stats.undecodable_lines += 1
    if stats is not None:
      stats.lines += 1
    yield line.rstrip("\r\n")
  if stats is not None:
    # The last line may have no "\n".
    stats.bytes = min(stats.bytes, start_bytes + tf.io.gfile.stat(path).length)


def _raw_lines(path):
  """Yields a file's lines as bytes without their "\\n", read in blocks of `_BLOCK_BYTES`: the
  file API's line iteration costs more per line (docs/benchmarks.md)."""
  with tf.io.gfile.GFile(path, "rb") as reader:
    partial = b""
    while block := reader.read(_BLOCK_BYTES):
      lines = (partial + block).split(b"\n")
      partial = lines.pop()
      yield from lines
  if partial:
    yield partial
