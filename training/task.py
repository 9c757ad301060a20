"""The interface between the training engine and a runner (pretraining, classifier, SQuAD, NER)."""

import abc


class Task(abc.ABC):
  """What a runner supplies to `engine.Trainer`: a model, its loss and its metrics.

  The engine builds the model inside the distribution strategy scope, runs `call_model` and
  `compute_loss` on each replica's batch, and aggregates what `compute_loss` returns. It traces
  them (and `prediction_outputs`) without AutoGraph: a condition on a tensor must be a
  TensorFlow op (`tf.where`, `tf.cond`), not a Python `if`.

  Attributes:
    metric_names: names of the metrics `compute_loss` returns (the engine sums them over steps,
      replicas and micro-batches and reports `sum / count`).

  Example:
    >>> import keras
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import classifier_model
    >>> from training import task as task_lib
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> class ClassifierTask(task_lib.Task):
    ...   metric_names = ("eval_accuracy", "eval_loss")
    ...   def build_model(self):
    ...     return classifier_model.BertClassifier(config, num_outputs=2)
    ...   def compute_loss(self, features, outputs, training):
    ...     per_example = keras.losses.sparse_categorical_crossentropy(
    ...         features["label_ids"], outputs, from_logits=True)
    ...     weights = tf.cast(features["is_real_example"], tf.float32)
    ...     correct = tf.cast(tf.argmax(outputs, -1, output_type=tf.int32) == features["label_ids"],
    ...                       tf.float32)
    ...     return tf.reduce_mean(per_example), {
    ...         "eval_accuracy": (tf.reduce_sum(correct * weights), tf.reduce_sum(weights)),
    ...         "eval_loss": (tf.reduce_sum(per_example * weights), tf.reduce_sum(weights))}
    >>> task = ClassifierTask()
    >>> ids = tf.constant([[2, 5, 6, 7, 8, 3, 7, 3]] * 2)  # [batch_size, seq_length]
    >>> features = {"input_ids": ids, "input_mask": tf.ones_like(ids),
    ...             "segment_ids": tf.zeros_like(ids), "label_ids": tf.constant([0, 1]),
    ...             "is_real_example": tf.constant([1, 1])}
    >>> loss, metrics = task.compute_loss(features, task.build_model()(features), training=False)
    >>> sorted(metrics)
    ['eval_accuracy', 'eval_loss']
  """

  metric_names = ()

  @abc.abstractmethod
  def build_model(self):
    """Returns a built Keras model with `name_to_variable()` -> {original name: variable}."""

  def call_model(self, model, features, training):
    """Returns the model's outputs for `features` (dict name -> `[batch_size, ...]` tensor)."""
    return model(features, training=training)

  def prediction_outputs(self, features, outputs):
    """What `engine.Trainer.predict` returns per example (default: the model's outputs); every
    array must have the same shape in each batch apart from the batch dimension."""
    del features
    return outputs

  @abc.abstractmethod
  def compute_loss(self, features, outputs, training):
    """Returns the loss of one replica's batch and its metrics.

    Args:
      features: dict name -> `[batch_size, ...]` tensor, as parsed by the input pipeline.
      outputs: what `call_model` returned.
      training: True in the training loop, False in evaluation.

    Returns:
      `(loss, metrics)`: `loss` a float scalar, the MEAN over this batch (the engine averages it
      over replicas and micro-batches, so with a per-example mean it equals the loss of the global
      batch; a ratio such as the masked-LM loss becomes the mean of per-replica ratios, as the
      original's CrossShardOptimizer on TPU); `metrics` a dict with exactly the keys of
      `metric_names`, each a `(sum, count)` pair of float scalars over this batch, so that
      aggregates are exact across replicas and uneven final batches.
    """
