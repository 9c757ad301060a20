"""Serialized `tf.train.Example`s with the original's seven pretraining features, from arrays."""

import tensorflow as tf


def serialize(batch):
  """One serialized example per row of an `instance_batches.InstanceBatch`.

  Args:
    batch: an `InstanceBatch` with `N` rows.

  Returns:
    list of `N` bytes, each a `tf.train.Example` with sorted map keys (deterministic bytes).
  """
  max_seq_length = batch.input_ids.shape[1]
  max_predictions = batch.masked_lm_positions.shape[1]
  # `input_mask`, `masked_lm_weights` and `next_sentence_labels` take few distinct values: each is
  # built once and copied in.
  masks = [tf.train.Int64List(value=[1] * length + [0] * (max_seq_length - length))
           for length in range(max_seq_length + 1)]
  weights = [tf.train.FloatList(value=[1.0] * count + [0.0] * (max_predictions - count))
             for count in range(max_predictions + 1)]
  labels = [tf.train.Int64List(value=[label]) for label in (0, 1)]
  # One message reused for every row, its lists refilled: cheaper than seven new Feature
  # messages per example.
  example = tf.train.Example()
  feature = example.features.feature
  arrays = {name: getattr(batch, name)
            for name in ("input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids")}
  columns = [(feature[name].int64_list.value, array) for name, array in arrays.items()]
  mask, weight, label = (feature["input_mask"].int64_list,
                         feature["masked_lm_weights"].float_list,
                         feature["next_sentence_labels"].int64_list)
  serialized = []
  for row, (length, count, is_random_next) in enumerate(zip(
      batch.lengths.tolist(), batch.num_predictions.tolist(), batch.is_random_next.tolist())):
    for values, array in columns:
      # Row by row: measured faster than converting the whole arrays first (0.35 against
      # 0.54 s for 13,409 examples), which also keeps millions of Python ints alive at once.
      values[:] = array[row].tolist()
    mask.CopyFrom(masks[length])
    weight.CopyFrom(weights[count])
    label.CopyFrom(labels[is_random_next])
    serialized.append(example.SerializeToString(deterministic=True))
  return serialized
