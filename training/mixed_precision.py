"""Mixed precision: the Keras dtype policy and dynamic loss scaling for float16.

The loss scale is a small module rather than `keras.mixed_precision.LossScaleOptimizer`, because the
optimizers here are not Keras optimizers. Its semantics are Keras's: start at 2**15, halve the scale
and skip the update when a gradient is not finite, double it after 2000 finite steps in a row.
"""

import keras
import tensorflow as tf

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


def set_policy(name):
  """Sets the global Keras dtype policy before the model is built; returns `name`."""
  if name not in POLICIES:
    raise ValueError(f"--mixed_precision must be one of {POLICIES}, got {name!r}")
  keras.mixed_precision.set_global_policy(name)
  return name


class DynamicLossScale(tf.Module):
  """Dynamic loss scaling; build it inside the strategy scope, use it inside `strategy.run`.

  Args:
    initial_scale: first loss scale.
    growth_steps: finite steps in a row after which the scale doubles.

  Example:
    >>> import tensorflow as tf
    >>> from training import mixed_precision
    >>> loss_scale = mixed_precision.DynamicLossScale()  # under the strategy's scope if distributed
    >>> weight = tf.Variable(3.0)
    >>> with tf.GradientTape() as tape:
    ...   scaled_loss = loss_scale.scale_loss(weight * weight)
    >>> # (when distributed, the scaled gradients are all-reduced before unscaling)
    >>> grads = loss_scale.unscale(tape.gradient(scaled_loss, [weight]))
    >>> float(grads[0])
    6.0
    >>> bool(loss_scale.update(grads))  # apply the update only if the gradients are finite
    True
  """

  def __init__(self, initial_scale=2.0 ** 15, growth_steps=2000, name=None):
    super().__init__(name=name)
    self.growth_steps = growth_steps
    # ONLY_FIRST_REPLICA: every replica computes the same new value (from all-reduced gradients),
    # so an assignment in replica context is well defined.
    self.scale = tf.Variable(initial_scale, dtype=tf.float32, trainable=False, name="loss_scale",
                             aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.finite_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="loss_scale_steps",
                                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

  def scale_loss(self, loss):
    """Returns `loss * scale` (float32 scalar)."""
    return loss * self.scale

  def unscale(self, gradients):
    """Returns the gradients divided by the scale (list of tensors, None kept)."""
    inverse = 1.0 / self.scale
    return [None if g is None else g * inverse for g in gradients]

  def update(self, gradients):
    """Updates the scale from the (all-reduced) gradients; returns whether they are all finite."""
    finite = tf.reduce_all(
        [tf.reduce_all(tf.math.is_finite(g)) for g in gradients if g is not None])
    grow = tf.logical_and(finite, self.finite_steps + 1 >= self.growth_steps)
    new_scale = tf.where(finite, tf.where(grow, self.scale * 2.0, self.scale),
                         tf.maximum(self.scale / 2.0, 1.0))
    new_steps = tf.where(tf.logical_and(finite, tf.logical_not(grow)),
                         self.finite_steps + 1, tf.zeros_like(self.finite_steps))
    self.scale.assign(new_scale)
    self.finite_steps.assign(new_steps)
    return finite
