"""Output files that appear only when complete: written under a temporary name beside the target,
renamed over it on success, removed on any error (so a failed run leaves nothing half-written)."""

import contextlib
import os

import tensorflow as tf


@contextlib.contextmanager
def temporary_path(path):
  """Yields the name to write `path`'s content to; renames it to `path` when the block succeeds.

  Example:
    >>> with temporary_path("out/train.tf_record") as temp_path:
    ...   write_everything(temp_path)
  """
  temp_path = f"{path}.tmp-{os.getpid()}"
  try:
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
    >>> with open_for_writing("out/eval_results.txt") as f:
    ...   f.write("eval_accuracy = 0.9\n")
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
