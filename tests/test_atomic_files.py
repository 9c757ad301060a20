"""Output files appear only when complete."""

import pytest
import tensorflow as tf

from data import atomic_files


def tf_example(value):
  return tf.train.Example(features=tf.train.Features(feature={
      "value": tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))}))


def test_records_are_written_and_counted(tmp_path):
  path = tmp_path / "out.tf_record"
  count = atomic_files.write_tf_examples(str(path), (tf_example(i) for i in range(3)))
  assert count == 3
  values = [tf.train.Example.FromString(record.numpy()).features.feature["value"].int64_list
            .value[0] for record in tf.data.TFRecordDataset(str(path))]
  assert values == [0, 1, 2]
  assert [p.name for p in tmp_path.iterdir()] == ["out.tf_record"]


def test_a_failure_midway_leaves_neither_the_file_nor_a_temporary(tmp_path):
  path = tmp_path / "out.tf_record"
  path.write_text("previous complete file")

  def failing():
    yield tf_example(0)
    raise ValueError("bad example")

  with pytest.raises(ValueError, match="bad example"):
    atomic_files.write_tf_examples(str(path), failing())
  # The previous complete file is untouched and no temporary is left beside it.
  assert [p.name for p in tmp_path.iterdir()] == ["out.tf_record"]
  assert path.read_text() == "previous complete file"
