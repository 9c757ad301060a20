"""The original's pretraining losses and their evaluation metrics (`run_pretraining.py`)."""

import tensorflow as tf

# Added to the weight sum of the masked-LM loss by the original, so a batch without predictions
# gives 0 instead of NaN.
MASKED_LM_DENOMINATOR_EPSILON = 1e-5


def masked_lm_per_position_loss(masked_lm_logits, masked_lm_ids):
  """Negative log-likelihood of the true id at each prediction slot.

  Args:
    masked_lm_logits: float `[batch_size, num_predictions, vocab_size]`.
    masked_lm_ids: int `[batch_size, num_predictions]`.

  Returns:
    float32 `[batch_size, num_predictions]`.
  """
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(masked_lm_ids, tf.int32), logits=tf.cast(masked_lm_logits, tf.float32))


def masked_lm_loss(masked_lm_logits, masked_lm_ids, masked_lm_weights):
  """`sum(weights * nll) / (sum(weights) + 1e-5)`, the original's masked-LM loss.

  Args:
    masked_lm_logits: float `[batch_size, num_predictions, vocab_size]`.
    masked_lm_ids: int `[batch_size, num_predictions]`.
    masked_lm_weights: float `[batch_size, num_predictions]`, 1.0 for real predictions, 0.0 for
      padding slots.

  Returns:
    float32 scalar.
  """
  weights = tf.cast(masked_lm_weights, tf.float32)
  per_position = masked_lm_per_position_loss(masked_lm_logits, masked_lm_ids)
  return tf.reduce_sum(weights * per_position) / (
      tf.reduce_sum(weights) + MASKED_LM_DENOMINATOR_EPSILON)


def next_sentence_per_example_loss(next_sentence_logits, next_sentence_labels):
  """Cross-entropy of the next-sentence prediction.

  Args:
    next_sentence_logits: float `[batch_size, 2]`, or `[batch_size, num_sequences, 2]` for
      packed rows.
    next_sentence_labels: int `[batch_size]` or `[batch_size, 1]`, or `[batch_size,
      num_sequences]`; 1 = B is a random sentence.

  Returns:
    float32 `[batch_size * num_sequences]`.
  """
  labels = tf.reshape(tf.cast(next_sentence_labels, tf.int32), [-1])
  logits = tf.reshape(tf.cast(next_sentence_logits, tf.float32), [-1, 2])
  return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def next_sentence_weights(features):
  """float32 `[batch_size * num_sequences]`: `next_sentence_weights` of packed rows (0 for an
  empty slot of a pack), else 1 per example."""
  if "next_sentence_weights" in features:
    return tf.reshape(tf.cast(features["next_sentence_weights"], tf.float32), [-1])
  return tf.ones(tf.shape(tf.reshape(features["next_sentence_labels"], [-1])), tf.float32)


def next_sentence_loss(next_sentence_logits, next_sentence_labels, weights=None):
  """Mean next-sentence cross-entropy over the instances (float32 scalar).

  Args:
    next_sentence_logits, next_sentence_labels: see `next_sentence_per_example_loss`.
    weights: None, the original's plain mean over examples; or float `[batch_size *
      num_sequences]`, 1.0 per instance and 0.0 per empty slot of a packed row: the mean over the
      instances, as the unpacked rows holding them would give.
  """
  per_example = next_sentence_per_example_loss(next_sentence_logits, next_sentence_labels)
  if weights is None:
    return tf.reduce_mean(per_example)
  return tf.reduce_sum(weights * per_example) / tf.reduce_sum(weights)


def pretraining_loss(outputs, features):
  """`masked_lm_loss + next_sentence_loss`, the original's `total_loss`.

  Packed rows (with `next_sentence_weights`) give each instance the weight it has unpacked: the
  masked-LM loss is a mean over the real masked positions either way, the next-sentence loss a
  mean over instances.

  Args:
    outputs: dict with `masked_lm_logits` and `next_sentence_logits` (`BertPretrainingModel`).
    features: dict with `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels` (and
      `next_sentence_weights` for packed rows).

  Returns:
    `(total_loss, masked_lm_loss, next_sentence_loss)`, float32 scalars.
  """
  mlm = masked_lm_loss(outputs["masked_lm_logits"], features["masked_lm_ids"],
                       features["masked_lm_weights"])
  weights = (next_sentence_weights(features) if "next_sentence_weights" in features else None)
  nsp = next_sentence_loss(outputs["next_sentence_logits"], features["next_sentence_labels"],
                           weights)
  return mlm + nsp, mlm, nsp


def pretraining_metrics(outputs, features):
  """The original's eval metrics as `(sum, count)` pairs, exact across batches and replicas.

  `masked_lm_accuracy` and `masked_lm_loss` are means weighted by `masked_lm_weights` (the
  original's `tf.metrics.accuracy/mean(weights=...)`, without the 1e-5); the next-sentence ones are
  means over instances (examples, or the instances of packed rows).

  Returns:
    dict name -> (float32 sum, float32 count).
  """
  weights = tf.cast(features["masked_lm_weights"], tf.float32)
  logits = outputs["masked_lm_logits"]
  mlm_correct = tf.cast(
      tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
               tf.cast(features["masked_lm_ids"], tf.int32)), tf.float32)
  mlm_nll = masked_lm_per_position_loss(logits, features["masked_lm_ids"])
  labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
  nsp_logits = tf.reshape(outputs["next_sentence_logits"], [-1, 2])
  nsp_weights = next_sentence_weights(features)
  nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), labels),
                        tf.float32)
  nsp_nll = next_sentence_per_example_loss(nsp_logits, labels)
  weight_sum = tf.reduce_sum(weights)
  num_instances = tf.reduce_sum(nsp_weights)
  return {
      "masked_lm_accuracy": (tf.reduce_sum(mlm_correct * weights), weight_sum),
      "masked_lm_loss": (tf.reduce_sum(mlm_nll * weights), weight_sum),
      "next_sentence_accuracy": (tf.reduce_sum(nsp_correct * nsp_weights), num_instances),
      "next_sentence_loss": (tf.reduce_sum(nsp_nll * nsp_weights), num_instances),
  }
