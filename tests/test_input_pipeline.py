"""Input pipeline: globbing, first-record validation, parsing, batching, sharding."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.data.ops import multi_device_iterator_ops

from data import file_patterns
from data import schemas
from training import input_pipeline

SPEC = {
    "input_ids": tf.io.FixedLenFeature([3], tf.int64),
    "weights": tf.io.FixedLenFeature([2], tf.float32),
    "label_ids": tf.io.FixedLenFeature([], tf.int64),
}


def _write_records(path, first_id, count, options=None, input_ids_length=3, drop=None):
  with tf.io.TFRecordWriter(str(path), options=options) as writer:
    for record_id in range(first_id, first_id + count):
      features = {
          "input_ids": schemas.int64_feature([record_id] * input_ids_length),
          "weights": schemas.float_feature([0.5, 1.0]),
          "label_ids": schemas.int64_feature([record_id % 2]),
      }
      if drop:
        del features[drop]
      example = tf.train.Example(features=tf.train.Features(feature=features))
      writer.write(example.SerializeToString())
  return str(path)


def _ids(dataset):
  return [int(i) for batch in dataset for i in batch["input_ids"][:, 0].numpy()]


def test_globs_are_expanded_and_empty_globs_named(tmp_path):
  for i in range(2):
    _write_records(tmp_path / f"part-{i}.tfrecord", 0, 1)
  pattern = str(tmp_path / "part-*.tfrecord")
  assert file_patterns.expand_globs(f"{pattern},{tmp_path}/part-0.tfrecord") == [
      str(tmp_path / "part-0.tfrecord"), str(tmp_path / "part-1.tfrecord")]
  with pytest.raises(file_patterns.InputError, match=r"--input_file: '.*nope-\*' matches no file"):
    file_patterns.expand_globs(f"{pattern},{tmp_path}/nope-*")
  with pytest.raises(file_patterns.InputError, match="--train_file is empty"):
    file_patterns.expand_globs(" , ", flag_name="train_file")


def test_parses_casts_and_batches_with_drop_remainder(tmp_path):
  path = _write_records(tmp_path / "a.tfrecord", 0, 10)
  dataset = input_pipeline.make_dataset([path], SPEC, batch_size=4, is_training=False)
  batches = list(dataset)
  assert len(batches) == 2
  assert batches[0]["input_ids"].dtype == tf.int32 and batches[0]["input_ids"].shape == [4, 3]
  assert batches[0]["weights"].dtype == tf.float32 and batches[0]["label_ids"].shape == [4]
  assert _ids(dataset) == list(range(8))


def test_training_pipeline_shuffles_and_repeats(tmp_path):
  path = _write_records(tmp_path / "a.tfrecord", 0, 10)
  dataset = input_pipeline.make_dataset([path], SPEC, batch_size=5, is_training=True, seed=3)
  ids = _ids(dataset.take(4))
  assert len(ids) == 20 and set(ids) <= set(range(10))
  assert ids[:10] != list(range(10))


def test_shards_by_files_when_there_are_enough(tmp_path):
  paths = [_write_records(tmp_path / f"f{i}.tfrecord", 100 * i, 4) for i in range(4)]
  shards = [_ids(input_pipeline.make_dataset(
      paths, SPEC, batch_size=1, is_training=False,
      input_context=tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i)))
            for i in range(2)]
  all_ids = sorted(r for i in range(4) for r in range(100 * i, 100 * i + 4))
  assert sorted(shards[0] + shards[1]) == all_ids
  assert not set(shards[0]) & set(shards[1])
  # Whole files per pipeline: each file's records all land in one shard.
  assert {r // 100 for r in shards[0]} == {0, 2}


def test_shards_by_records_when_files_are_few(tmp_path):
  path = _write_records(tmp_path / "only.tfrecord", 0, 12)
  shards = [_ids(input_pipeline.make_dataset(
      [path], SPEC, batch_size=2, is_training=True, repeat=False, seed=1,
      input_context=tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=i)))
            for i in range(3)]
  assert sorted(shards[0] + shards[1] + shards[2]) == list(range(12))


def test_gzip_input(tmp_path):
  path = _write_records(tmp_path / "a.tfrecord.gz", 0, 4, options="GZIP")
  input_fn, files = input_pipeline.input_fn_from_flags(path, SPEC, 2, False, compression="gzip")
  assert files == [path]
  dataset = input_fn(tf.distribute.InputContext(num_replicas_in_sync=2))
  assert _ids(dataset) == [0, 1, 2, 3]
  with pytest.raises(file_patterns.InputError, match="needs --input_compression=gzip"):
    input_pipeline.input_fn_from_flags(path, SPEC, 2, False)


def test_first_record_mismatch_names_file_feature_and_lengths(tmp_path):
  wrong_length = _write_records(tmp_path / "len.tfrecord", 0, 1, input_ids_length=5)
  with pytest.raises(file_patterns.InputError,
                     match=r"len\.tfrecord: feature 'input_ids' has length 5, expected 3"):
    input_pipeline.validate_first_records([wrong_length], SPEC)
  missing = _write_records(tmp_path / "missing.tfrecord", 0, 1, drop="label_ids")
  with pytest.raises(file_patterns.InputError,
                     match=r"missing\.tfrecord: first record has no feature 'label_ids' "
                           r"\(expected int64_list of length 1\)"):
    input_pipeline.validate_first_records([missing], SPEC)
  wrong_type = dict(SPEC, label_ids=tf.io.FixedLenFeature([], tf.float32))
  ok = _write_records(tmp_path / "ok.tfrecord", 0, 1)
  with pytest.raises(file_patterns.InputError,
                     match="feature 'label_ids' is a int64_list, expected float_list"):
    input_pipeline.validate_first_records([ok], wrong_type)
  empty = tmp_path / "empty.tfrecord"
  empty.write_bytes(b"")
  with pytest.raises(file_patterns.InputError, match="empty.tfrecord: holds no record"):
    input_pipeline.validate_first_records([str(empty)], SPEC)
  input_pipeline.validate_first_records([ok], SPEC)
  # Every file is checked, not only the first; an empty shard among others is accepted.
  input_pipeline.validate_first_records([ok, str(empty)], SPEC)
  with pytest.raises(file_patterns.InputError, match=r"len\.tfrecord: feature 'input_ids'"):
    input_pipeline.validate_first_records([ok, str(empty), wrong_length], SPEC)
  stats = tmp_path / "ok.tfrecord.json"
  stats.write_text('{"instances": 1}')
  with pytest.raises(file_patterns.InputError, match=r"ok\.tfrecord\.json: not a readable TFRecord"):
    input_pipeline.validate_first_records([ok, str(stats)], SPEC)


def test_distributed_input_fn_gives_per_replica_batches(tmp_path):
  path = _write_records(tmp_path / "a.tfrecord", 0, 8)
  input_fn = input_pipeline.make_input_fn([path], SPEC, global_batch_size=4, is_training=False)
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  batches = list(input_pipeline.distribute_input_fn(strategy, input_fn))
  assert len(batches) == 2
  np.testing.assert_array_equal(batches[1]["input_ids"].numpy()[:, 0], [4, 5, 6, 7])


def _reachable(value, kind, depth=5):
  """The objects of type `kind` reachable from `value` through attributes, lists and tuples."""
  if isinstance(value, kind):
    yield value
  if depth == 0:
    return
  children = value if isinstance(value, (list, tuple)) else getattr(value, "__dict__", {})
  for child in (children.values() if isinstance(children, dict) else children):
    if isinstance(child, (list, tuple)) or hasattr(child, "__dict__"):
      yield from _reachable(child, kind, depth - 1)


@pytest.mark.parametrize("distribute", ["input_fn", "dataset"])
@pytest.mark.parametrize("strategy_name", ["mirrored", "one_device"])
def test_a_host_cpu_replica_reads_its_dataset_without_autotuning_or_multi_device_iterator(
    tmp_path, strategy_name, distribute):
  # Deleting an autotuned iterator at the end of a training run can wait up to 60 s, and a
  # MultiDeviceIterator autotunes its per-device iterators whatever the dataset's options.
  path = _write_records(tmp_path / "a.tfrecord", 0, 8)
  input_fn = input_pipeline.make_input_fn([path], SPEC, global_batch_size=4, is_training=False)
  strategy = (tf.distribute.MirroredStrategy(["/cpu:0"]) if strategy_name == "mirrored"
              else tf.distribute.OneDeviceStrategy("/cpu:0"))
  if distribute == "input_fn":
    distributed = input_pipeline.distribute_input_fn(strategy, input_fn)
    tensorflows_own = strategy.distribute_datasets_from_function(input_fn)
  else:
    dataset = input_fn(tf.distribute.InputContext())
    distributed = input_pipeline.distribute_dataset(strategy, dataset)
    tensorflows_own = strategy.experimental_distribute_dataset(dataset)
  iterator = iter(distributed)
  first_ids = [next(iterator)["input_ids"].numpy()[:, 0].tolist() for _ in range(2)]
  assert first_ids == [[0, 1, 2, 3], [4, 5, 6, 7]]
  datasets = list(_reachable(distributed, tf.data.Dataset))
  assert datasets and not any(dataset.options().autotune.enabled for dataset in datasets)
  assert not list(_reachable(iterator, multi_device_iterator_ops.OwnedMultiDeviceIterator))
  # TensorFlow's own path holds one.
  assert list(_reachable(iter(tensorflows_own), multi_device_iterator_ops.OwnedMultiDeviceIterator))


def test_dynamic_padding_cuts_several_sequences_per_example_to_their_longest(tmp_path):
  # Multiple-choice records: 3 sequences of max length 40 per example, stored flat.
  lengths = [[5, 9, 2], [20, 3, 3], [1, 1, 1]]
  path = tmp_path / "choices.tfrecord"
  with tf.io.TFRecordWriter(str(path)) as writer:
    for example_id, example_lengths in enumerate(lengths):
      mask = [[1] * n + [0] * (40 - n) for n in example_lengths]
      ids = [[example_id + 1] * n + [0] * (40 - n) for n in example_lengths]
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          "input_ids": schemas.int64_feature(np.ravel(ids)),
          "input_mask": schemas.int64_feature(np.ravel(mask)),
          "label_ids": schemas.int64_feature([example_id])})).SerializeToString())
  spec = {"input_ids": tf.io.FixedLenFeature([3, 40], tf.int64),
          "input_mask": tf.io.FixedLenFeature([3, 40], tf.int64),
          "label_ids": tf.io.FixedLenFeature([], tf.int64)}
  features = ("input_ids", "input_mask")
  batches = list(input_pipeline.make_dataset([str(path)], spec, 2, is_training=False,
                                             drop_remainder=False, dynamic_padding=True,
                                             sequence_features=features))
  # Evaluation batches: padded to the longest sequence of the batch, choices kept apart.
  assert [batch["input_ids"].shape for batch in batches] == [[2, 3, 20], [1, 3, 1]]
  np.testing.assert_array_equal(batches[0]["input_mask"].numpy().sum(-1), lengths[:2])
  np.testing.assert_array_equal(batches[0]["input_ids"][1, 0].numpy(), [2] * 20)
  # Training batches: the bucket of the longest sequence (16-token steps), any order.
  training = input_pipeline.make_dataset([str(path)], spec, 1, is_training=True,
                                         dynamic_padding=True, sequence_features=features,
                                         shuffle_buffer_size=0)
  shapes = {tuple(batch["input_ids"].shape) for batch in training.take(6)}
  assert shapes == {(1, 3, 16), (1, 3, 32)}
