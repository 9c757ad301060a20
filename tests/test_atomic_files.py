"""Output files appear only when complete."""

import pytest
import tensorflow as tf

from base import atomic_files


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


def test_text_file_appears_complete_or_not_at_all(tmp_path):
  path = tmp_path / "eval_results.txt"
  with atomic_files.open_for_writing(str(path)) as f:
    f.write("eval_accuracy = 0.5\n")
    # Until the block ends, the target does not exist; only the temporary does.
    assert [p.name for p in tmp_path.iterdir()] != ["eval_results.txt"]
  assert path.read_text(encoding="utf-8") == "eval_accuracy = 0.5\n"

  with pytest.raises(RuntimeError, match="interrupted"):
    with atomic_files.open_for_writing(str(path)) as f:
      f.write("eval_accuracy = 0.9\n")
      raise RuntimeError("interrupted")
  assert [p.name for p in tmp_path.iterdir()] == ["eval_results.txt"]
  assert path.read_text(encoding="utf-8") == "eval_accuracy = 0.5\n"
