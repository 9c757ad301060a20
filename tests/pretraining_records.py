"""Small pretraining records for tests and benchmarks of the training side."""

import numpy as np
import tensorflow as tf

from data import schemas


def write_records(path, num_records=64, seq_length=32, num_predictions=5, max_id=100, seed=0):
  """Records in the pretraining schema whose masked ids are the ids at the masked positions."""
  rng = np.random.default_rng(seed)
  with tf.io.TFRecordWriter(str(path)) as writer:
    for index in range(num_records):
      length = int(rng.integers(8, seq_length + 1))
      ids = np.zeros(seq_length, np.int64)
      ids[:length] = rng.integers(5, max_id, length)
      positions = np.zeros(num_predictions, np.int64)
      positions[:3] = np.sort(rng.choice(np.arange(1, length - 1), 3, replace=False))
      masked_ids = np.where(np.arange(num_predictions) < 3, ids[positions], 0)
      weights = (np.arange(num_predictions) < 3).astype(np.float32)
      real = np.arange(seq_length) < length
      feature = {
          "input_ids": schemas.int64_feature(ids),
          "input_mask": schemas.int64_feature(real.astype(np.int64)),
          "segment_ids": schemas.int64_feature((real & (np.arange(seq_length) >= length // 2))
                                               .astype(np.int64)),
          "masked_lm_positions": schemas.int64_feature(positions),
          "masked_lm_ids": schemas.int64_feature(masked_ids),
          "masked_lm_weights": schemas.float_feature(weights),
          "next_sentence_labels": schemas.int64_feature([index % 2]),
      }
      writer.write(tf.train.Example(
          features=tf.train.Features(feature=feature)).SerializeToString())
  return path
