"""TFRecord files of examples padded to whole batches with rows that weigh nothing, so that every
example is evaluated and predicted, in input order, at static batch shapes."""

from base import atomic_files
from base import progress


def write_padded_records(path, examples, to_tf_example, padding_tf_example, batch_size=1):
  """Writes `to_tf_example(e)` of each example, then copies of `padding_tf_example` up to a
  multiple of `batch_size` rows, to a TFRecord file that appears only when complete.

  Args:
    path: the output file.
    examples: list of examples of any type.
    to_tf_example: callable example -> `tf.train.Example` (may raise `InputError`).
    padding_tf_example: the `tf.train.Example` of a padding row (`is_real_example = 0`).
    batch_size: pad the record count to a multiple of this (1: no padding, for training).

  Returns:
    `(num_real, num_padding)` rows written.
  """
  num_padding = -len(examples) % batch_size
  bar = progress.Progress(total=len(examples), unit="examples", log_seconds=30.0)

  def tf_examples():
    for example in examples:
      yield to_tf_example(example)
      bar.update()
    for _ in range(num_padding):
      yield padding_tf_example

  try:
    atomic_files.write_tf_examples(path, tf_examples())
  finally:
    bar.close()
  return len(examples), num_padding
