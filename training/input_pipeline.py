"""TFRecord input pipelines shared by every runner, sharded per tf.distribute input pipeline.

The training pipeline follows the original `run_pretraining.input_fn_builder`: file names shuffled,
repeated, read with a parallel interleave, records shuffled (buffer 100), parsed with the
`tf.train.Example` spec (int64 -> int32), batched with `drop_remainder`. Each input pipeline of a
distribution strategy reads its own shard: whole files when there are at least as many files as
pipelines, else every n-th record.
"""

import tensorflow as tf

from data import file_patterns
from data import schemas

COMPRESSION_TYPES = {"none": None, "gzip": "GZIP"}
_MAX_CYCLE_LENGTH = 8
# Features of length max_seq_length that dynamic padding trims to each example's real length.
SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
# Dynamic padding pads training batches up to a multiple of this many tokens, so that a model
# compiled with XLA sees at most max_seq_length / 16 shapes.
_BUCKET_WIDTH = 16


def trim_padding(features, sequence_features=SEQUENCE_FEATURES):
  """Cuts the sequence features of one example to its real length (at least 1 token).

  Args:
    features: dict name -> tensor of one parsed example; `input_mask` `[max_seq_length]`, or
      `[num_sequences, max_seq_length]` for an example of several sequences (multiple choice),
      which are cut to the longest of them.
    sequence_features: names of the features to cut, shaped as `input_mask`.

  Returns:
    the dict with those features `[length]` (or `[num_sequences, length]`); the others unchanged.
  """
  lengths = tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=-1)
  length = tf.maximum(tf.reduce_max(lengths), 1)
  return {name: value[..., :length] if name in sequence_features else value
          for name, value in features.items()}


def bucket_boundaries(max_seq_length):
  """`bucket_by_sequence_length` boundaries that pad lengths up to multiples of 16 (and to
  `max_seq_length` for the longest)."""
  widths = list(range(_BUCKET_WIDTH, max_seq_length, _BUCKET_WIDTH)) + [max_seq_length]
  return [width + 1 for width in widths]


def batch_examples(dataset, batch_size, is_training, drop_remainder, dynamic_padding,
                   max_seq_length=None, sequence_features=SEQUENCE_FEATURES):
  """Batches parsed examples, padded to `max_seq_length` or, with `dynamic_padding`, less.

  With `dynamic_padding`, training batches group examples of similar length
  (`bucket_by_sequence_length`) and are padded to the next multiple of 16; evaluation batches keep
  the input order and are padded to their longest example. Padded positions have `input_mask` 0,
  so the model's outputs for the real tokens are those of full-length padding.

  Args:
    dataset: `tf.data.Dataset` of parsed examples.
    batch_size: examples per batch.
    is_training: bucket by length (order not kept).
    drop_remainder: drop the last partial batch.
    dynamic_padding: trim padding as above; else plain batches of `max_seq_length`.
    max_seq_length: the records' sequence length (for the buckets).
    sequence_features: names of the `[max_seq_length]` (or `[num_sequences, max_seq_length]`)
      features.

  Returns:
    `tf.data.Dataset` of batches.
  """
  if not dynamic_padding:
    return dataset.batch(batch_size, drop_remainder=drop_remainder)
  dataset = dataset.map(lambda features: trim_padding(features, sequence_features),
                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=not is_training)
  if not is_training:
    return dataset.padded_batch(batch_size, drop_remainder=drop_remainder)
  boundaries = bucket_boundaries(max_seq_length)
  return dataset.bucket_by_sequence_length(
      lambda features: tf.shape(features["input_ids"])[-1], boundaries,
      [batch_size] * (len(boundaries) + 1), pad_to_bucket_boundary=True,
      drop_remainder=drop_remainder)


def make_dataset(file_paths, feature_spec, batch_size, is_training, input_context=None,
                 repeat=None, shuffle_buffer_size=100, compression_type=None, seed=None,
                 drop_remainder=True, dynamic_padding=False, sequence_features=SEQUENCE_FEATURES,
                 example_fn=None):
  """Builds the dataset of one input pipeline.

  Args:
    file_paths: list of TFRecord files (see `data.file_patterns.expand_globs`).
    feature_spec: dict name -> `tf.io.FixedLenFeature` (see `data.schemas`).
    batch_size: examples per batch of THIS pipeline (per-replica batch under a strategy).
    is_training: shuffles file order and records, reads files non-deterministically for speed.
    input_context: `tf.distribute.InputContext` of this pipeline, or None for a single pipeline.
    repeat: repeat forever; defaults to `is_training`.
    shuffle_buffer_size: record shuffle buffer when training (100 as the original); 0 keeps the
      file order (with `seed`, runs become reproducible).
    compression_type: None or "GZIP".
    seed: shuffle seed; also makes the interleave deterministic.
    drop_remainder: drop the last partial batch (static batch dimension, as the original).
    dynamic_padding: pad batches to their length, not max_seq_length (see `batch_examples`).
    sequence_features: the `[max_seq_length]` features, for `dynamic_padding`.
    example_fn: None, or a function of one parsed example's dict returning the dict the model
      takes (e.g. `tasks.pretraining.task.as_packed_rows`), applied before batching.

  Returns:
    `tf.data.Dataset` of dicts name -> tensor `[batch_size] + feature shape`, ints as int32.
  """
  repeat = is_training if repeat is None else repeat
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  shard_by_files = num_pipelines > 1 and len(file_paths) >= num_pipelines
  shard_by_records = num_pipelines > 1 and not shard_by_files
  deterministic = not is_training or seed is not None

  files = tf.data.Dataset.from_tensor_slices(tf.constant(file_paths, tf.string))
  if shard_by_files:
    files = files.shard(num_pipelines, pipeline_id)
  # With record sharding, every pipeline must see the records in the same order.
  if is_training and not shard_by_records:
    files = files.shuffle(len(file_paths), seed=seed, reshuffle_each_iteration=True)
  if repeat:
    files = files.repeat()
  records = files.interleave(
      lambda path: tf.data.TFRecordDataset(path, compression_type=compression_type),
      cycle_length=min(len(file_paths), _MAX_CYCLE_LENGTH),
      num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic or shard_by_records)
  if shard_by_records:
    records = records.shard(num_pipelines, pipeline_id)
  if is_training and shuffle_buffer_size > 1:
    records = records.shuffle(shuffle_buffer_size, seed=seed)
  def parse(record):
    example = schemas.decode_record(record, feature_spec)
    return example_fn(example) if example_fn else example

  dataset = records.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
  max_seq_length = feature_spec["input_ids"].shape[-1] if dynamic_padding else None
  dataset = batch_examples(dataset, batch_size, is_training, drop_remainder, dynamic_padding,
                           max_seq_length, sequence_features)
  return dataset.prefetch(tf.data.AUTOTUNE)


def make_input_fn(file_paths, feature_spec, global_batch_size, is_training, **dataset_kwargs):
  """Returns `input_fn(input_context)` for `strategy.distribute_datasets_from_function`.

  Args:
    file_paths: list of TFRecord files.
    feature_spec: dict name -> `tf.io.FixedLenFeature`.
    global_batch_size: examples per step over all replicas; each replica gets
      `global_batch_size / num_replicas_in_sync`.
    is_training: see `make_dataset`.
    **dataset_kwargs: further arguments of `make_dataset`.

  Returns:
    callable `(tf.distribute.InputContext) -> tf.data.Dataset` of per-replica batches.
  """
  def input_fn(input_context):
    per_replica_batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    return make_dataset(file_paths, feature_spec, per_replica_batch_size, is_training,
                        input_context=input_context, **dataset_kwargs)
  return input_fn


def distribute_input_fn(strategy, input_fn):
  """Returns the distributed dataset of `input_fn` (one `input_fn` call per input pipeline).

  A strategy whose one replica is the host CPU reads `input_fn`'s dataset itself, without
  `tf.data`'s autotuning, rather than through a MultiDeviceIterator (which would only copy each
  batch from the CPU to the CPU and autotune its own per-device iterator). Deleting an autotuned
  iterator that has lived a few minutes, as at the end of training, waits in some runs for the
  rest of the autotuning thread's period, up to 60 s: woken by the cancellation, the thread can
  look before the cancellation is marked done and go back to sleep. Without autotuning, a
  parallel map or interleave runs up to one call per core.
  """
  if not _one_host_cpu_replica(strategy):
    return strategy.distribute_datasets_from_function(input_fn)
  if isinstance(strategy, tf.distribute.OneDeviceStrategy):
    # Its `distribute_datasets_from_function` accepts no per-replica input; `strategy.run` takes
    # the dataset's batches as they are.
    return _without_autotuning(input_fn)(tf.distribute.InputContext())
  return strategy.distribute_datasets_from_function(
      _without_autotuning(input_fn), tf.distribute.InputOptions(
          experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
          experimental_fetch_to_device=False))


def distribute_dataset(strategy, dataset):
  """`strategy.experimental_distribute_dataset(dataset)`: its global batches split over the
  replicas; on one host-CPU replica, `dataset` itself as `distribute_input_fn` reads it."""
  if _one_host_cpu_replica(strategy):
    return distribute_input_fn(strategy, lambda input_context: dataset)
  return strategy.experimental_distribute_dataset(dataset)


def _one_host_cpu_replica(strategy):
  """Whether `strategy` (OneDeviceStrategy or MirroredStrategy) has one replica, on the CPU."""
  if not isinstance(strategy, (tf.distribute.OneDeviceStrategy, tf.distribute.MirroredStrategy)):
    return False
  devices = strategy.extended.worker_devices
  return len(devices) == 1 and tf.DeviceSpec.from_string(devices[0]).device_type == "CPU"


def _without_autotuning(input_fn):
  """`input_fn` whose datasets have `tf.data`'s autotuning turned off."""
  def input_fn_without_autotuning(input_context):
    options = tf.data.Options()
    options.autotune.enabled = False
    return input_fn(input_context).with_options(options)
  return input_fn_without_autotuning


def validate_first_records(file_paths, feature_spec, compression_type=None):
  """Checks that the first record of every file fits `feature_spec`, before any training starts:
  a glob that also matched another kind of file, or records of another `max_seq_length`, fail
  here with the file's name instead of inside the training graph.

  Args:
    file_paths: list of TFRecord files; the first record of each is read.
    feature_spec: dict name -> `tf.io.FixedLenFeature`.
    compression_type: None or "GZIP".

  Raises:
    file_patterns.InputError: naming the first bad file, the feature and the expected vs actual
      type or length; or, when no file holds a record, the first file. (An empty file among
      others is accepted: more output shards than instances leave some empty.)
  """
  holding_records = [path for path in file_paths
                     if _validate_first_record(path, feature_spec, compression_type)]
  if not holding_records:
    raise file_patterns.InputError(f"{file_paths[0]}: holds no record" + (
        f" (nor do the other {len(file_paths) - 1} file(s))" if len(file_paths) > 1 else ""))


def read_first_example(path, compression_type=None):
  """The first record of a TFRecord file as a `tf.train.Example`, or None if it holds none.

  Raises:
    file_patterns.InputError: the file is not a readable TFRecord file, or its first record not
      a `tf.train.Example`.
  """
  dataset = tf.data.TFRecordDataset(path, compression_type=compression_type).take(1)
  try:
    serialized = [record.numpy() for record in dataset]
  except tf.errors.OpError as error:
    hint = "" if compression_type else " (a gzip file needs --input_compression=gzip)"
    raise file_patterns.InputError(
        f"{path}: not a readable TFRecord file{hint}: {error.message}") from None
  if not serialized:
    return None
  try:
    return tf.train.Example.FromString(serialized[0])
  except Exception as error:  # protobuf raises its own DecodeError type
    raise file_patterns.InputError(f"{path}: first record is not a tf.train.Example: {error}") from None


def _validate_first_record(path, feature_spec, compression_type):
  """Whether `path` holds a record; raises `InputError` if its first one does not fit."""
  example = read_first_example(path, compression_type)
  if example is None:
    return False
  features = example.features.feature
  for name, spec in sorted(feature_spec.items()):
    expected_kind = "float_list" if spec.dtype == tf.float32 else (
        "bytes_list" if spec.dtype == tf.string else "int64_list")
    expected_length = int(tf.TensorShape(spec.shape).num_elements())
    if name not in features:
      raise file_patterns.InputError(
          f"{path}: first record has no feature {name!r} (expected {expected_kind} of length "
          f"{expected_length}); it has {sorted(features)}")
    kind = features[name].WhichOneof("kind")
    if kind != expected_kind:
      raise file_patterns.InputError(
          f"{path}: feature {name!r} is a {kind}, expected {expected_kind}")
    length = len(getattr(features[name], kind).value)
    if length != expected_length:
      raise file_patterns.InputError(
          f"{path}: feature {name!r} has length {length}, expected {expected_length}")
  return True


def input_fn_from_flags(patterns, feature_spec, global_batch_size, is_training,
                        flag_name="input_file", compression="none", **dataset_kwargs):
  """Expands and validates a file flag, then returns `make_input_fn(...)` over its files.

  Args:
    patterns: the flag's value: comma-separated globs.
    feature_spec: dict name -> `tf.io.FixedLenFeature`.
    global_batch_size: examples per step over all replicas.
    is_training: see `make_dataset`.
    flag_name: named in errors.
    compression: a key of `COMPRESSION_TYPES` ("none" or "gzip").
    **dataset_kwargs: further arguments of `make_dataset`.

  Returns:
    `(input_fn, file_paths)`.

  Raises:
    file_patterns.InputError: no file matches, or a file's first record does not fit
      `feature_spec`.
  """
  if compression not in COMPRESSION_TYPES:
    raise file_patterns.InputError(
        f"--input_compression must be one of {sorted(COMPRESSION_TYPES)}, got {compression!r}")
  compression_type = COMPRESSION_TYPES[compression]
  file_paths = file_patterns.expand_globs(patterns, flag_name)
  validate_first_records(file_paths, feature_spec, compression_type)
  input_fn = make_input_fn(file_paths, feature_spec, global_batch_size, is_training,
                           compression_type=compression_type, **dataset_kwargs)
  return input_fn, file_paths
