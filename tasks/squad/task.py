"""The fine-tuning task of `run_squad.py`: predict the answer's first and last word piece."""

import tensorflow as tf

from modeling import span_model
from training import task as task_lib


def span_loss(outputs, features):
  """The original's loss: the mean of the start and the end softmax cross-entropies.

  Args:
    outputs: dict of float `start_logits`, `end_logits` `[batch_size, seq_length]`.
    features: dict with int `start_positions`, `end_positions` `[batch_size]`.

  Returns:
    float32 `[batch_size]` per-window losses.
  """
  losses = [tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(features[f"{side}_positions"], tf.int32),
      logits=tf.cast(outputs[f"{side}_logits"], tf.float32)) for side in ("start", "end")]
  return (losses[0] + losses[1]) / 2.0


class SquadTask(task_lib.Task):
  """Fine-tunes `BertSpanModel` on answer spans (the `[CLS]` position for no answer).

  Args:
    bert_config: a `BertConfig`.
    max_seq_length: length of `predict`'s logits (batches with dynamic padding are shorter; the
      rest is filled with -10000, a logit no span is chosen from).

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import optimization
    >>> from tasks.squad import task as squad_task
    >>> from training import engine
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> run_config = engine.RunConfig(output_dir="output", num_train_steps=10)
    >>> trainer = engine.Trainer(tf.distribute.get_strategy(), squad_task.SquadTask(config, 8),
    ...                          run_config, lambda: optimization.create_optimizer(1e-4, 10, 1))
  """

  metric_names = ("start_accuracy", "end_accuracy")

  def __init__(self, bert_config, max_seq_length):
    self.bert_config = bert_config
    self.max_seq_length = max_seq_length

  def build_model(self):
    return span_model.BertSpanModel(self.bert_config)

  def compute_loss(self, features, outputs, training):
    losses = span_loss(outputs, features)
    count = tf.cast(tf.shape(losses)[0], tf.float32)
    metrics = {}
    for side in ("start", "end"):
      predicted = tf.argmax(outputs[f"{side}_logits"], axis=-1, output_type=tf.int32)
      correct = tf.equal(predicted, tf.cast(features[f"{side}_positions"], tf.int32))
      metrics[f"{side}_accuracy"] = (tf.reduce_sum(tf.cast(correct, tf.float32)), count)
    return tf.reduce_mean(losses), metrics

  def prediction_outputs(self, features, outputs):
    """`start_logits` and `end_logits` float32 `[batch_size, max_seq_length]`."""
    def pad(logits):
      logits = tf.cast(logits, tf.float32)
      padding = self.max_seq_length - tf.shape(logits)[1]
      return tf.pad(logits, [[0, 0], [0, padding]], constant_values=-10000.0)
    return {name: pad(outputs[name]) for name in ("start_logits", "end_logits")}
