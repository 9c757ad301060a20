"""The original release's optimizers and learning-rate schedule, for TF2 distribution strategies.

`AdamWeightDecay` is the original `AdamWeightDecayOptimizer`: Adam WITHOUT bias correction,
decoupled weight decay added to the update (not to the loss), applied to every variable whose
original name matches none of `exclude_from_weight_decay` (`re.search`), gradients clipped to a
global norm of 1.0 first. `Lamb` is LAMB as written in the later google-research release
(ALBERT's `lamb_optimizer.py`): the same update scaled per variable by the trust ratio
||w|| / ||update||, also without bias correction. Both keep their moments in slots named
`<name>/adam_m` and `<name>/adam_v` (the original names, which ALBERT's LAMB also uses), so
checkpoints load in tools that expect them.

The optimizers are small `tf.Module`s rather than Keras optimizers: Keras 3's Adam always applies
bias correction, and its slots are named by Keras paths, while here every variable is addressed by
its original name. `apply_gradients` follows the tf.distribute protocol (called in replica context,
switches to cross-replica context with `merge_call`, updates each mirrored copy with
`strategy.extended.update`), so it runs inside `strategy.run` under One-device, Mirrored,
MultiWorkerMirrored and TPU strategies, in `tf.function`, and under XLA.
"""

import functools
import re

import keras
import tensorflow as tf

from modeling import keras_variables
from modeling import tracking

EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
OPTIMIZER_TYPES = ("adamw", "lamb")


class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
  """The original's learning rate: linear warmup, then polynomial decay computed from step 0.

  While `step < warmup_steps`: `lr = initial_learning_rate * step / warmup_steps`. Afterwards:
  `lr = (initial_learning_rate - end_learning_rate) * (1 - min(step, decay_steps) / decay_steps)
  ** power + end_learning_rate`. The decay is not re-based after warmup, so the rate drops from
  about `initial_learning_rate` to `initial_learning_rate * (1 - warmup_steps / decay_steps)` at the
  warmup boundary, exactly as the original's `create_optimizer`.

  Args:
    initial_learning_rate: peak learning rate (`--learning_rate`).
    decay_steps: step at which the rate reaches `end_learning_rate` (`--num_train_steps`).
    warmup_steps: number of linear warmup steps (`--num_warmup_steps`); 0 disables warmup.
    end_learning_rate: final learning rate (0.0 in the original).
    power: polynomial power (1.0 = linear decay).

  Example:
    >>> from modeling import optimization
    >>> schedule = optimization.WarmupPolynomialDecay(1e-4, decay_steps=100, warmup_steps=10)
    >>> round(float(schedule(5)), 9)   # mid-warmup: 1e-4 * 5 / 10
    5e-05
    >>> round(float(schedule(10)), 9)  # first step after warmup: 1e-4 * (1 - 10 / 100)
    9e-05
  """

  def __init__(self, initial_learning_rate, decay_steps, warmup_steps=0, end_learning_rate=0.0,
               power=1.0):
    if decay_steps <= 0:
      raise ValueError(f"decay_steps (num_train_steps) must be positive, got {decay_steps}")
    if warmup_steps < 0:
      raise ValueError(f"warmup_steps (num_warmup_steps) must be >= 0, got {warmup_steps}")
    self.initial_learning_rate = float(initial_learning_rate)
    self.decay_steps = int(decay_steps)
    self.warmup_steps = int(warmup_steps)
    self.end_learning_rate = float(end_learning_rate)
    self.power = float(power)

  def __call__(self, step):
    """Returns the float32 scalar learning rate for the integer scalar `step` (0-based)."""
    step = tf.cast(step, tf.int64)
    step_float = tf.cast(step, tf.float32)
    decay_progress = tf.minimum(step_float, float(self.decay_steps)) / float(self.decay_steps)
    learning_rate = ((self.initial_learning_rate - self.end_learning_rate)
                     * tf.pow(1.0 - decay_progress, self.power) + self.end_learning_rate)
    if self.warmup_steps:
      warmup_learning_rate = self.initial_learning_rate * step_float / float(self.warmup_steps)
      learning_rate = tf.where(step < self.warmup_steps, warmup_learning_rate, learning_rate)
    return learning_rate

  def get_config(self):
    return {
        "initial_learning_rate": self.initial_learning_rate,
        "decay_steps": self.decay_steps,
        "warmup_steps": self.warmup_steps,
        "end_learning_rate": self.end_learning_rate,
        "power": self.power,
    }


class AdamWeightDecay(tf.Module):
  """Adam without bias correction and with decoupled weight decay, as the original BERT release.

  For each trainable variable `param` with gradient `grad` (after global-norm clipping):
    m = beta_1 * m + (1 - beta_1) * grad
    v = beta_2 * v + (1 - beta_2) * grad ** 2
    update = m / (sqrt(v) + epsilon) [+ weight_decay_rate * param unless the name is excluded]
    param = param - learning_rate(step) * update
  and the step counter (`global_step` in checkpoints) is incremented once per call.

  Call `build(name_to_variable)` inside the strategy scope before the first step, so the slots
  exist (and are mirrored) before any `tf.function` traces; then call `apply_gradients` inside
  `strategy.run` with gradients already summed over replicas.

  Args:
    learning_rate: float or `keras.optimizers.schedules.LearningRateSchedule` of the step.
    weight_decay_rate: decoupled weight decay (0.01 in the original).
    beta_1, beta_2, epsilon: Adam constants (0.9, 0.999, 1e-6 in the original).
    exclude_from_weight_decay: regexes; a variable whose original name matches one (`re.search`)
      gets no weight decay.
    clip_norm: gradients are clipped jointly to this global norm first; None disables clipping.
    name: module name.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import optimization
    >>> schedule = optimization.WarmupPolynomialDecay(1e-4, decay_steps=1000, warmup_steps=100)
    >>> optimizer = optimization.AdamWeightDecay(schedule)
    >>> weight = tf.Variable([1.0, 2.0])
    >>> optimizer.build({"bert/weight": weight})  # under the strategy's scope when distributed
    >>> _ = optimizer.apply_gradients([(tf.constant([0.5, -0.5]), weight)])
    >>> int(optimizer.iterations)
    1
  """

  def __init__(self, learning_rate, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
               epsilon=1e-6, exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY, clip_norm=1.0,
               name=None):
    super().__init__(name=name or type(self).__name__)
    self.learning_rate = learning_rate
    self.weight_decay_rate = weight_decay_rate
    self.beta_1 = beta_1
    self.beta_2 = beta_2
    self.epsilon = epsilon
    self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
    self.clip_norm = clip_norm
    tracking.set_untracked(self, "_compiled_next_values", {})
    self._built = False

  @property
  def built(self):
    return self._built

  def build(self, name_to_variable):
    """Creates the step counter and the `adam_m`/`adam_v` slots of every trainable variable.

    Args:
      name_to_variable: dict of original name -> variable (`tf.Variable` or Keras variable) of
        the model; non-trainable variables get no slots.
    """
    if self._built:
      raise ValueError(f"{self.name} is already built")
    strategy = tf.distribute.get_strategy()
    self.iterations = tf.Variable(
        0, dtype=tf.int64, trainable=False, name="global_step",
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self._names = []
    self._variables = []
    self._slots = {}
    self._name_by_ref = {}
    for name in sorted(name_to_variable):
      variable = keras_variables.as_tf_variable(name_to_variable[name])
      if not variable.trainable:
        continue
      with strategy.extended.colocate_vars_with(variable):
        self._slots[name] = tuple(
            tf.Variable(tf.zeros(variable.shape, tf.float32), trainable=False,
                        name=f"{name}/{slot}")
            for slot in ("adam_m", "adam_v"))
      self._names.append(name)
      self._variables.append(variable)
      self._name_by_ref[variable.ref()] = name
    self._built = True

  @property
  def trainable_variables(self):
    """The variables this optimizer updates, in the order of `variable_names` (sorted names)."""
    return list(self._variables)

  @property
  def variable_names(self):
    return list(self._names)

  def slot_name_to_variable(self):
    """Returns dict `<name>/adam_m` and `<name>/adam_v` -> slot variable, for checkpoints."""
    slots = {}
    for name, (m, v) in self._slots.items():
      slots[f"{name}/adam_m"] = m
      slots[f"{name}/adam_v"] = v
    return slots

  def current_learning_rate(self, step=None):
    """Returns the float32 learning rate at `step` (default: the current step counter)."""
    step = self.iterations if step is None else step
    if isinstance(self.learning_rate, keras.optimizers.schedules.LearningRateSchedule):
      return tf.cast(self.learning_rate(step), tf.float32)
    return tf.constant(self.learning_rate, tf.float32)

  def use_weight_decay(self, name):
    """Whether the variable with original name `name` gets weight decay."""
    return bool(self.weight_decay_rate) and not any(
        re.search(pattern, name) for pattern in self.exclude_from_weight_decay)

  # Python conditions only, here and in everything it calls: AutoGraph's conversion (when a
  # training step calls this inside `tf.function`) would only add tracing time.
  @tf.autograph.experimental.do_not_convert
  def apply_gradients(self, grads_and_vars, should_apply=None):
    """Clips the gradients to the global norm and applies one update to every variable.

    Args:
      grads_and_vars: iterable of (gradient, variable) with variables from
        `trainable_variables`; gradients of the variables' shapes, already aggregated over
        replicas (identical on every replica). A None gradient leaves its variable unchanged.
      should_apply: optional boolean scalar tensor; when False the variables and slots keep their
        values (used to skip steps with non-finite gradients under dynamic loss scaling), the step
        counter still advances (as the original's global_step).

    Returns:
      the global norm of the gradients before clipping, float32 scalar.
    """
    if not self._built:
      raise ValueError(
          f"{self.name}.build(name_to_variable) must be called before applying gradients")
    grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
    unknown = [v.name for _, v in grads_and_vars if v.ref() not in self._name_by_ref]
    if unknown:
      raise ValueError(f"{self.name} was not built with variable(s) {unknown}")
    gradients = [g for g, _ in grads_and_vars]
    variables = [v for _, v in grads_and_vars]
    global_norm = tf.linalg.global_norm(gradients)
    # `tf.clip_by_global_norm`'s factor (NaN when the norm is not finite), applied by the update
    # kernel rather than by a pass of its own over every gradient.
    gradient_scale = tf.constant(1.0) if self.clip_norm is None else (
        self.clip_norm * tf.minimum(1.0 / global_norm, 1.0 / self.clip_norm)
        + (global_norm - global_norm))
    # The rate of the step being taken: the original reads global_step before incrementing it.
    learning_rate = self.current_learning_rate()
    apply_fn = functools.partial(self._distributed_apply, variables=variables)
    replica_context = tf.distribute.get_replica_context()
    args = (gradients, gradient_scale, learning_rate, should_apply)
    if replica_context is None:
      apply_fn(tf.distribute.get_strategy(), *args)
    else:
      replica_context.merge_call(apply_fn, args=args)
    return global_norm

  def _distributed_apply(self, strategy, gradients, gradient_scale, learning_rate, should_apply,
                         variables):
    """Cross-replica part of `apply_gradients`: updates every copy of every variable."""
    for gradient, variable in zip(gradients, variables):
      name = self._name_by_ref[variable.ref()]
      m, v = self._slots[name]
      update_fn = functools.partial(
          self._update_variable, use_weight_decay=self.use_weight_decay(name),
          use_layer_adaptation=self.use_layer_adaptation(name))
      strategy.extended.update(
          variable, update_fn, args=(gradient, m, v, gradient_scale, learning_rate, should_apply),
          group=False)
    strategy.extended.update(
        self.iterations, lambda step: step.assign_add(1), group=False)

  def use_layer_adaptation(self, name):
    """Whether the update of `name` is scaled by a trust ratio (never for AdamWeightDecay)."""
    del name
    return False

  def _scale_update(self, param, update, use_layer_adaptation):
    """Returns the update to multiply by the learning rate; identity for AdamWeightDecay."""
    del param, use_layer_adaptation
    return update

  def _update_variable(self, param, gradient, m, v, gradient_scale, learning_rate, should_apply,
                       use_weight_decay, use_layer_adaptation):
    """Updates one (per-device) variable and its slots; all tensors have `param`'s shape."""
    next_values = self._compiled(use_weight_decay, use_layer_adaptation, should_apply is not None)
    inputs = [tf.convert_to_tensor(t) for t in (param, gradient, m, v)]
    inputs += [gradient_scale, learning_rate] + ([should_apply] if should_apply is not None else [])
    next_param, next_m, next_v = next_values(*inputs)
    return tf.group(param.assign(next_param), m.assign(next_m), v.assign(next_v))

  def _compiled(self, use_weight_decay, use_layer_adaptation, with_should_apply):
    """`_next_values` for these options as one XLA kernel: a dozen elementwise passes over the
    variable, its slots and its gradient become one (docs/benchmarks.md). One trace serves every
    shape (XLA compiles each shape as it comes)."""
    options = (use_weight_decay, use_layer_adaptation, with_should_apply)
    if options not in self._compiled_next_values:
      any_shape, scalar = tf.TensorSpec(None, tf.float32), tf.TensorSpec([], tf.float32)
      signature = [any_shape] * 4 + [scalar] * 2 + [tf.TensorSpec([], tf.bool)] * with_should_apply
      self._compiled_next_values[options] = tf.function(
          functools.partial(self._next_values, use_weight_decay=use_weight_decay,
                            use_layer_adaptation=use_layer_adaptation),
          input_signature=signature, jit_compile=True, autograph=False)
    return self._compiled_next_values[options]

  def _next_values(self, param, gradient, m, v, gradient_scale, learning_rate, should_apply=None,
                   *, use_weight_decay, use_layer_adaptation):
    """The variable's and its slots' next values, `param`'s shape each; `gradient` is scaled by
    the scalar `gradient_scale` (clipping) first, and with `should_apply` False all three keep
    their values."""
    gradient = gradient * gradient_scale
    next_m = self.beta_1 * m + (1.0 - self.beta_1) * gradient
    next_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(gradient)
    update = next_m / (tf.sqrt(next_v) + self.epsilon)
    if use_weight_decay:
      update += self.weight_decay_rate * param
    update = self._scale_update(param, update, use_layer_adaptation)
    next_param = param - learning_rate * update
    if should_apply is not None:
      next_param = tf.where(should_apply, next_param, param)
      next_m = tf.where(should_apply, next_m, m)
      next_v = tf.where(should_apply, next_v, v)
    return next_param, next_m, next_v


class Lamb(AdamWeightDecay):
  """LAMB (You et al. 2019) as in the google-research ALBERT release: no bias correction.

  The AdamWeightDecay update (weight decay included) is multiplied, per variable, by the trust
  ratio `||param|| / ||update||` (1.0 when either norm is 0) before the learning rate. Variables
  matching `exclude_from_layer_adaptation` (by default the weight-decay exclusions: LayerNorm and
  biases) take the plain update.

  Args:
    learning_rate, weight_decay_rate, beta_1, beta_2, epsilon, exclude_from_weight_decay,
      clip_norm, name: as `AdamWeightDecay`.
    exclude_from_layer_adaptation: regexes on original names; None means
      `exclude_from_weight_decay`.

  Example:
    >>> from modeling import optimization
    >>> schedule = optimization.WarmupPolynomialDecay(1e-3, decay_steps=1000, warmup_steps=100)
    >>> optimizer = optimization.Lamb(schedule)
  """

  def __init__(self, learning_rate, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
               epsilon=1e-6, exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
               exclude_from_layer_adaptation=None, clip_norm=1.0, name=None):
    super().__init__(learning_rate, weight_decay_rate=weight_decay_rate, beta_1=beta_1,
                     beta_2=beta_2, epsilon=epsilon,
                     exclude_from_weight_decay=exclude_from_weight_decay, clip_norm=clip_norm,
                     name=name)
    self.exclude_from_layer_adaptation = tuple(
        self.exclude_from_weight_decay if exclude_from_layer_adaptation is None
        else exclude_from_layer_adaptation)

  def use_layer_adaptation(self, name):
    return not any(re.search(pattern, name) for pattern in self.exclude_from_layer_adaptation)

  def _scale_update(self, param, update, use_layer_adaptation):
    if not use_layer_adaptation:
      return update
    param_norm = tf.norm(param)
    update_norm = tf.norm(update)
    trust_ratio = tf.where(
        param_norm > 0.0,
        tf.where(update_norm > 0.0, param_norm / update_norm, 1.0),
        1.0)
    return trust_ratio * update


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer_type="adamw"):
  """Returns the original's optimizer (`optimization.create_optimizer`) as an unbuilt module.

  Args:
    init_lr: peak learning rate.
    num_train_steps: steps of the run; the rate decays linearly to 0 there.
    num_warmup_steps: linear warmup steps.
    optimizer_type: "adamw" (the original's AdamWeightDecayOptimizer) or "lamb".

  Returns:
    an `AdamWeightDecay` or `Lamb` with weight decay 0.01, the original exclusions and global-norm
    clipping at 1.0.
  """
  schedule = WarmupPolynomialDecay(init_lr, decay_steps=num_train_steps,
                                   warmup_steps=num_warmup_steps)
  if optimizer_type == "adamw":
    return AdamWeightDecay(schedule)
  if optimizer_type == "lamb":
    return Lamb(schedule)
  raise ValueError(f"--optimizer must be one of {OPTIMIZER_TYPES}, got {optimizer_type!r}")
