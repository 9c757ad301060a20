"""What the writers and readers of TFRecord files (`tf.train.Example` records) share: the feature
helpers `int64_feature` and `float_feature`, and `decode_record`. A fine-tuning family's parse spec
lives beside the writer of its records, in the family's `features.py`.

Integer features are int64 in the files and cast to int32 when parsed, as the original's
`_decode_record`; float features stay float32.
"""

import tensorflow as tf


def decode_record(serialized_example, feature_spec):
  """Parses one serialized `tf.train.Example`, casting int64 features to int32 (TPUs want int32)."""
  example = tf.io.parse_single_example(serialized_example, feature_spec)
  return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
          for name, value in example.items()}


def int64_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def float_feature(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))
