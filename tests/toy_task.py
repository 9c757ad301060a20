"""A tiny classification task following the model contract (`name_to_variable()`)."""

import keras
import numpy as np
import tensorflow as tf

from data import schemas
from training import task as task_lib

NUM_FEATURES = 4
NUM_CLASSES = 3
FEATURE_SPEC = {
    "x": tf.io.FixedLenFeature([NUM_FEATURES], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


class ToyModel(keras.Model):
  """Dense(tanh) -> LayerNorm -> Dense logits, with original-style names.

  Args:
    hidden_size: width of the hidden layer.
    seed: initializer seed (same seed, same initial weights).

  Example:
    >>> model = ToyModel()
    >>> logits = model({"x": tf.zeros([2, 4])})  # [2, 3]
  """

  def __init__(self, hidden_size=8, seed=0, **kwargs):
    super().__init__(**kwargs)
    self.dense = keras.layers.Dense(
        hidden_size, activation="tanh", name="dense",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.5, seed=seed))
    self.layer_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="LayerNorm")
    self.classifier = keras.layers.Dense(
        NUM_CLASSES, name="output",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.5, seed=seed + 1))
    self.dense.build((None, NUM_FEATURES))
    self.layer_norm.build((None, hidden_size))
    self.classifier.build((None, hidden_size))

  def call(self, features, training=False):
    """Returns logits `[batch_size, NUM_CLASSES]` of `x` `[batch_size, NUM_FEATURES]`."""
    return self.classifier(self.layer_norm(self.dense(features["x"])))

  def name_to_variable(self):
    return {
        "toy/dense/kernel": self.dense.kernel,
        "toy/dense/bias": self.dense.bias,
        "toy/LayerNorm/gamma": self.layer_norm.gamma,
        "toy/LayerNorm/beta": self.layer_norm.beta,
        "toy/output/kernel": self.classifier.kernel,
        "toy/output/bias": self.classifier.bias,
    }


class ToyTask(task_lib.Task):
  """Softmax classification of `x` into `label`; metrics accuracy and cross_entropy."""

  metric_names = ("accuracy", "cross_entropy")

  def __init__(self, seed=0):
    self.seed = seed

  def build_model(self):
    return ToyModel(seed=self.seed)

  def compute_loss(self, features, outputs, training):
    logits = tf.cast(outputs, tf.float32)
    labels = features["label"]
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)
    count = tf.cast(tf.size(labels), tf.float32)
    return tf.reduce_mean(per_example), {
        "accuracy": (tf.reduce_sum(correct), count),
        "cross_entropy": (tf.reduce_sum(per_example), count),
    }


def write_records(path, num_records, seed=0, nan_records=()):
  """Writes `num_records` toy examples (labels from a fixed linear teacher) to a TFRecord file.

  Args:
    path: output file.
    num_records: number of examples.
    seed: data seed.
    nan_records: indices of records whose `x` is NaN.

  Returns:
    `path` as a string.
  """
  rng = np.random.default_rng(seed)
  teacher = np.random.default_rng(1234).normal(size=(NUM_FEATURES, NUM_CLASSES))
  inputs = rng.normal(size=(num_records, NUM_FEATURES)).astype(np.float32)
  labels = np.argmax(inputs @ teacher, axis=-1)
  with tf.io.TFRecordWriter(str(path)) as writer:
    for index, (x, label) in enumerate(zip(inputs, labels)):
      if index in nan_records:
        x = np.full_like(x, np.nan)
      example = tf.train.Example(features=tf.train.Features(feature={
          "x": schemas.float_feature(x), "label": schemas.int64_feature([label])}))
      writer.write(example.SerializeToString())
  return str(path)
