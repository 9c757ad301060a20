"""The one training and evaluation loop of every runner (pretraining, classifier, SQuAD, NER,
multiple choice).

`Trainer` builds the task's model, the optimizer (with its slots) and the loss scale inside the
strategy scope, restores the latest checkpoint of `output_dir` (weights, slots, step) or warm-starts
the weights from `init_checkpoint`, then runs up to `steps_per_loop` steps per call of a
`tf.function` in which `strategy.run` executes each replica's step:

  micro-batch loop (gradient accumulation) -> forward/backward (optionally XLA) -> all-reduce of the
  gradients -> [loss-scale check] -> clip + AdamWeightDecay/LAMB update.

Each replica's loss is divided by `num_replicas * gradient_accumulation_steps` before the gradient,
so the summed gradients are those of the mean loss of the global batch and every replica applies the
same update. Checkpoints go to `output_dir/model.ckpt-<step>` under the original variable names.
A log line (step, loss, metrics, learning rate, examples/s, ETA) and the TensorBoard scalars come
every `log_every_steps` steps and at least every `log_every_seconds`, whatever `steps_per_loop` is.
"""

import contextlib
import dataclasses
import math
import os
import shutil
import signal
import tempfile
import time

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from base import atomic_files
from base import errors
from base import frozen_weights
from base import progress
from modeling import checkpoint_io
from modeling import keras_variables
from training import checkpointing
from training import distribution
from training import input_pipeline
from training import mixed_precision
from training import periodic_evaluation
from training import preemption

EVAL_RESULTS_FILENAME = "eval_results.txt"


class NonFiniteLossError(errors.UserError, RuntimeError):
  """The training loss became NaN or infinite; training stopped without saving."""


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """Settings of a run, mostly from the shared flags (see `training.config.EngineConfig.engine_run_config`).

  Attributes:
    output_dir: checkpoints, summaries, eval_results.txt.
    num_train_steps: global step at which training ends.
    train_batch_size: examples per optimizer step over all replicas and micro-batches.
    eval_batch_size: examples per evaluation step over all replicas.
    steps_per_loop: at most this many steps per call of the compiled loop.
    log_every_steps: a log line and the TensorBoard scalars at every multiple of this step.
    log_every_seconds: the longest time between two log lines (see `Trainer.train`).
    save_checkpoints_steps: checkpoint period; a checkpoint is also written at the end.
    keep_checkpoint_max: checkpoints kept (0 keeps all).
    init_checkpoint: warm start (weights only) when output_dir has no checkpoint.
    partial_init_checkpoint: accept an init_checkpoint whose encoder variables differ from the
      model's (missing or left over), loading what matches.
    gradient_accumulation_steps: micro-batches per optimizer step.
    mixed_precision: "float32", "mixed_float16" (dynamic loss scaling) or "mixed_bfloat16".
    jit_compile: compile each replica's forward and backward pass with XLA.
    seed: seeds Python's, NumPy's, TensorFlow's and Keras' random draws before the model is
      built (`keras.utils.set_random_seed`) and makes TensorFlow's ops deterministic
      (`tf.config.experimental.enable_op_determinism`; without it two seeded runs on this CPU
      parted within 125 steps), so a run repeats; None leaves both off.
    preemption_grace_seconds: on SIGTERM, training saves a checkpoint and stops within this
      time (see `training.preemption`).
  """
  output_dir: str
  num_train_steps: int = 0
  train_batch_size: int = 32
  eval_batch_size: int = 8
  steps_per_loop: int = 1000
  log_every_steps: int = 100
  log_every_seconds: float = 60.0
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  init_checkpoint: str = None
  partial_init_checkpoint: bool = False
  gradient_accumulation_steps: int = 1
  mixed_precision: str = "float32"
  jit_compile: bool = False
  seed: int = None
  preemption_grace_seconds: float = 30.0


def write_eval_results(path, results):
  """Writes `key = value` lines sorted by key (the original's eval_results.txt), atomically."""
  with atomic_files.open_for_writing(path) as f:
    for key in sorted(results):
      f.write(f"{key} = {results[key]}\n")


def read_eval_results(output_dir):
  """`{name: int or float}` of `output_dir/eval_results.txt`, or None when there is none."""
  path = os.path.join(output_dir, EVAL_RESULTS_FILENAME)
  if not tf.io.gfile.exists(path):
    return None
  results = {}
  with tf.io.gfile.GFile(path) as f:
    for line in f:
      key, value = (part.strip() for part in line.split("=", 1))
      try:
        results[key] = int(value)
      except ValueError:
        results[key] = float(value)
  return results


class Trainer:
  """Trains and evaluates one `Task` under one strategy.

  Args:
    strategy: a `tf.distribute.Strategy` (see `training.distribution`).
    task: a `training.task.Task`.
    config: a `RunConfig`.
    optimizer_fn: callable returning an unbuilt `modeling.optimization.AdamWeightDecay`/`Lamb`
      (e.g. `lambda: optimization.create_optimizer(lr, steps, warmup, "adamw")`); None for a
      trainer that only evaluates.

  Usage:
    trainer = Trainer(strategy, PretrainingTask(bert_config), config,
                      lambda: optimization.create_optimizer(1e-4, 1000, 100))
    trainer.train(train_input_fn)          # resumes from output_dir if it holds checkpoints
    trainer.evaluate(eval_input_fn, max_eval_steps=100)  # writes eval_results.txt
  """

  def __init__(self, strategy, task, config, optimizer_fn=None):
    self.strategy = strategy
    self.task = task
    self.config = config
    self.num_replicas = strategy.num_replicas_in_sync
    self.is_chief = distribution.is_chief(strategy)
    mixed_precision.set_policy(config.mixed_precision)
    if config.seed is not None:
      keras.utils.set_random_seed(config.seed)
      tf.config.experimental.enable_op_determinism()
    with strategy.scope():
      self.model = task.build_model()
      self.model_variables = {name: keras_variables.as_tf_variable(variable)
                              for name, variable in self.model.name_to_variable().items()}
      if not self.model_variables:
        raise ValueError(f"{type(self.model).__name__}.name_to_variable() is empty")
      self.optimizer = optimizer_fn() if optimizer_fn else None
      if self.optimizer is not None:
        self.optimizer.build(self.model_variables)
        self.global_step = self.optimizer.iterations
      else:
        self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self.loss_scale = (mixed_precision.DynamicLossScale()
                         if config.mixed_precision == "mixed_float16" else None)
    checkpoint_variables = dict(self.model_variables, global_step=self.global_step)
    if self.optimizer is not None:
      checkpoint_variables.update(self.optimizer.slot_name_to_variable())
    model_config = getattr(task, "bert_config", None)
    self.checkpoints = checkpointing.CheckpointManager(
        config.output_dir, checkpoint_variables, config.keep_checkpoint_max, self.is_chief,
        model_config.to_dict() if model_config is not None else None)
    self._initialized = False
    self._forward_backward_fn = None
    self._train_loop = None
    self._eval_step = None
    self._predict_step = None
    self.evaluation = None
    self._termination = None

  def initialize(self):
    """Restores the latest checkpoint of output_dir, else warm-starts from init_checkpoint, once."""
    if self._initialized:
      return
    self._initialized = True
    if self.checkpoints.restore_latest() is not None:
      logging.info("Resuming at global step %d", int(self.global_step.numpy()))
      return
    if self.config.init_checkpoint:
      report = checkpoint_io.assign_from_checkpoint(
          self.model_variables, self.config.init_checkpoint,
          allow_partial=self.config.partial_init_checkpoint)
      logging.info("Initialised %d variable(s) from %s; not in the checkpoint (trained from "
                   "scratch): %s; checkpoint tensors not used: %s", len(report["loaded"]),
                   self.config.init_checkpoint,
                   checkpoint_io.summarize_names(report["missing"]) or "none",
                   checkpoint_io.summarize_names(report["unexpected"]) or "none")

  def _check_metrics(self, metrics):
    if set(metrics) != set(self.task.metric_names):
      raise ValueError(f"{type(self.task).__name__}.compute_loss returned metrics "
                       f"{sorted(metrics)}, but its metric_names are "
                       f"{sorted(self.task.metric_names)}")
    return {name: (tf.cast(s, tf.float32), tf.cast(c, tf.float32))
            for name, (s, c) in metrics.items()}

  # This, `_replica_eval_step` and `predict`'s step run a task's model and loss, written with
  # Python conditions only (a task's contract, training/task.py): AutoGraph's conversion of them
  # and of everything they call would only add tracing time.
  @tf.autograph.experimental.do_not_convert
  def _forward_backward(self, features):
    """Loss, metrics and gradients of one micro-batch on one replica.

    Returns:
      `(loss, metrics, gradients)`: float32 scalar mean loss; dict name -> (sum, count); list of
      dense gradients (None for variables the loss does not depend on) of
      `loss / (num_replicas * accumulation_steps) [* loss_scale]`.
    """
    variables = self.optimizer.trainable_variables
    with tf.GradientTape() as tape:
      outputs = self.task.call_model(self.model, features, training=True)
      loss, metrics = self.task.compute_loss(features, outputs, training=True)
      loss = tf.cast(loss, tf.float32)
      scaled_loss = loss / float(self.num_replicas * self.config.gradient_accumulation_steps)
      if self.loss_scale is not None:
        scaled_loss = self.loss_scale.scale_loss(scaled_loss)
    gradients = tape.gradient(scaled_loss, variables)
    gradients = [None if g is None else tf.convert_to_tensor(g) for g in gradients]
    return loss, self._check_metrics(metrics), gradients

  def _replica_train_step(self, features):
    """One optimizer step on one replica; returns (loss / num_replicas, metric sums/counts)."""
    accumulation_steps = self.config.gradient_accumulation_steps
    forward_backward = self._forward_backward_fn
    variables = self.optimizer.trainable_variables
    if accumulation_steps == 1:
      loss, metrics, gradients = forward_backward(features)
      present = [i for i, g in enumerate(gradients) if g is not None]
      gradients = [gradients[i] for i in present]
    else:
      micro_batches = {
          name: tf.reshape(value, tf.concat([[accumulation_steps, -1], tf.shape(value)[1:]], 0))
          for name, value in features.items()}
      loss, metrics, gradients = forward_backward(
          {name: value[0] for name, value in micro_batches.items()})
      # Variables without a gradient (unused by the loss) stay untouched, as in the original.
      present = [i for i, g in enumerate(gradients) if g is not None]
      gradients = [gradients[i] for i in present]
      for index in tf.range(1, accumulation_steps):
        micro_loss, micro_metrics, micro_gradients = forward_backward(
            {name: value[index] for name, value in micro_batches.items()})
        loss += micro_loss
        metrics = {name: (metrics[name][0] + s, metrics[name][1] + c)
                   for name, (s, c) in micro_metrics.items()}
        gradients = [g + micro_gradients[i] for g, i in zip(gradients, present)]
      loss /= float(accumulation_steps)
    gradients = tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, gradients)
    should_apply = None
    if self.loss_scale is not None:
      gradients = self.loss_scale.unscale(gradients)
      should_apply = self.loss_scale.update(gradients)
    self.optimizer.apply_gradients(zip(gradients, [variables[i] for i in present]),
                                   should_apply=should_apply)
    return loss / float(self.num_replicas), metrics

  @tf.autograph.experimental.do_not_convert
  def _replica_eval_step(self, features):
    """Returns (loss * batch size, batch size, metric sums/counts) of one replica's batch."""
    outputs = self.task.call_model(self.model, features, training=False)
    loss, metrics = self.task.compute_loss(features, outputs, training=False)
    batch_size = tf.cast(tf.shape(tf.nest.flatten(features)[0])[0], tf.float32)
    # An exhausted replica gets an empty batch whose mean loss is NaN; it must weigh nothing.
    weighted_loss = tf.where(batch_size > 0, tf.cast(loss, tf.float32) * batch_size, 0.0)
    return weighted_loss, batch_size, self._check_metrics(metrics)

  def _reduce(self, per_replica):
    return tf.nest.map_structure(
        lambda value: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None),
        per_replica)

  @contextlib.contextmanager
  def _train_loop_grappler_options(self):
    """Grappler options for tracing and calling the train loop, put back afterwards (they are
    process-wide, and later runs in the same process must not inherit them).

    Grappler's arithmetic optimizer turns the gradient sums of the micro-batch loop into temporary
    variables whose names collide across loop iterations on BERT-sized graphs (AlreadyExistsError:
    ".../AddOpsRewrite_add_N/tmp_var", seen when benchmarks/pretraining_step.py trains one Trainer
    twice): the rewrite is off while a gradient-accumulation loop runs.
    """
    if self.config.gradient_accumulation_steps == 1:
      yield
      return
    before = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})
    try:
      yield
    finally:
      # An option never set reads as absent; the arithmetic optimizer is on unless turned off.
      tf.config.optimizer.set_experimental_options(
          {"arithmetic_optimization": before.get("arithmetic_optimization", True)})

  def _build_train_loop(self):
    self._forward_backward_fn = (tf.function(self._forward_backward, jit_compile=True)
                                 if self.config.jit_compile else self._forward_backward)
    zero_metrics = {name: (tf.constant(0.0), tf.constant(0.0)) for name in self.task.metric_names}

    @tf.function
    def train_loop(iterator, num_steps):
      """Runs up to `num_steps` steps; stops after the first non-finite loss.

      Returns:
        `(losses, metrics)`: float32 `[steps_run]` global mean loss per step; dict name ->
        (sum, count) over the steps run.
      """
      losses = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
      metrics = zero_metrics
      loss = tf.constant(0.0)
      for index in tf.range(num_steps):
        if not tf.math.is_finite(loss):
          break
        step_loss, step_metrics = self._reduce(
            self.strategy.run(self._replica_train_step, args=(next(iterator),)))
        loss = step_loss
        losses = losses.write(index, loss)
        metrics = {name: (metrics[name][0] + step_metrics[name][0],
                          metrics[name][1] + step_metrics[name][1]) for name in metrics}
      return losses.stack(), metrics

    return train_loop

  def _check_batch_size(self):
    divisor = self.num_replicas * self.config.gradient_accumulation_steps
    if self.config.train_batch_size % divisor:
      raise errors.ConfigError(
          f"--train_batch_size={self.config.train_batch_size} must be divisible by replicas "
          f"({self.num_replicas}) * --gradient_accumulation_steps "
          f"({self.config.gradient_accumulation_steps})")

  def _summary_writer(self, subdirectory=""):
    """Returns (writer, temp_dir): the chief writes in output_dir, other workers in a temp dir."""
    if self.is_chief:
      return tf.summary.create_file_writer(os.path.join(self.config.output_dir, subdirectory)), None
    temp_dir = tempfile.mkdtemp(prefix="worker-summaries-")
    return tf.summary.create_file_writer(temp_dir), temp_dir

  def train(self, input_fn, evaluation_config=None, evaluate_fn=None):
    """Trains until `num_train_steps`, resuming from output_dir's latest checkpoint.

    A loop of the compiled function runs at most `steps_per_loop` steps and also ends at each
    checkpoint, each multiple of `log_every_steps` and when `log_every_seconds` have passed since
    the last log line (its length then comes from the previous loop's time per step, and is at
    most twice the previous loop's; the first loop runs one step to measure it; with several
    workers, the length replica 0's worker chose). A log line and the TensorBoard scalars follow
    the first loop, every multiple of `log_every_steps`, the last step, and any loop that ends
    `log_every_seconds` or more after the previous line; they cover every step since that line.

    With `evaluation_config`, `evaluate_fn()` (the dev metrics, computed with `predict`) runs
    after every `every_steps` steps and after the last; each evaluation is logged, summarised
    for TensorBoard (`eval/`) and recorded by `periodic_evaluation.PeriodicEvaluation`, which
    keeps the best checkpoint; training stops early when its patience runs out (a checkpoint of
    that step is saved).

    Args:
      input_fn: `(tf.distribute.InputContext) -> tf.data.Dataset` of per-replica batches of
        `train_batch_size / num_replicas` examples, repeating (see `training.input_pipeline`).
      evaluation_config: a `periodic_evaluation.EvaluationConfig`, or None.
      evaluate_fn: `() -> {metric name: float}`, needed with `evaluation_config`.

    Returns:
      dict with `global_step` (int), `loss` (mean over the steps of the last log line),
      `metrics` (dict of the same steps' values) and `history` (list of (step, loss) for every
      step run by this call).

    Raises:
      NonFiniteLossError: naming the step; nothing is saved after the last good checkpoint.
    """
    if self.optimizer is None:
      raise errors.ConfigError("this Trainer was built without an optimizer_fn and cannot train")
    self._check_batch_size()
    frozen_weights.refuse_training("Trainer.train")
    config = self.config
    self.initialize()
    step = int(self.global_step.numpy())
    result = {"global_step": step, "loss": None, "metrics": {}, "history": []}
    self.evaluation = None
    if evaluation_config is not None:
      self.evaluation = periodic_evaluation.PeriodicEvaluation(
          config.output_dir, self.checkpoints.name_to_variable, evaluation_config, self.is_chief)
      self.evaluation.resume(step)
      if self.evaluation.pending_step(step, config.num_train_steps) is not None:
        logging.info("Evaluating step %d again: the run that saved its checkpoint ended before "
                     "recording its evaluation", step)
        self._evaluate_while_training(step, evaluate_fn)
      stop_reason = self.evaluation.stop_reason()
      if stop_reason:
        logging.info("Not training on from step %d: %s", step, stop_reason)
        return result
    if step >= config.num_train_steps:
      logging.info("Global step %d already reaches num_train_steps=%d; nothing to train",
                   step, config.num_train_steps)
      return result
    if self._train_loop is None:
      self._train_loop = self._build_train_loop()
    iterator = iter(input_pipeline.distribute_input_fn(self.strategy, input_fn))
    writer, temp_dir = self._summary_writer()
    window = _LogWindow(self.task.metric_names)
    last_loop = None
    # The ETA's rate leaves out the first loop, whose time includes tracing the loop.
    rate_origin = None
    with preemption.TerminationWatch(config.preemption_grace_seconds) as watch:
      self._termination = watch
      try:
        while step < config.num_train_steps:
          num_steps, terminating = self._same_on_every_worker(
              self._loop_length(step, last_loop, window.seconds(), evaluation_config),
              watch.requested)
          if terminating:
            self._stop_on_signal(step)
          loop_start = time.monotonic()
          with self._train_loop_grappler_options():
            losses, metrics = self._train_loop(iterator, tf.constant(num_steps))
          losses = losses.numpy()
          last_loop = (len(losses), time.monotonic() - loop_start)
          if not np.all(np.isfinite(losses)):
            bad = int(np.argmax(~np.isfinite(losses)))
            raise NonFiniteLossError(
                f"training loss is {losses[bad]} at step {step + bad + 1}; stopped without "
                f"saving, last good checkpoint: {self.checkpoints.latest() or 'none'}")
          result["history"].extend((step + i + 1, float(l)) for i, l in enumerate(losses))
          step = int(self.global_step.numpy())
          window.add(losses, metrics)
          if (rate_origin is None or step % config.log_every_steps == 0
              or step >= config.num_train_steps or window.seconds() >= config.log_every_seconds):
            eta = None
            if rate_origin is not None and step > rate_origin[0]:
              rate = (step - rate_origin[0]) / max(time.monotonic() - rate_origin[1], 1e-9)
              eta = (config.num_train_steps - step) / rate
            loss, metric_values = window.means()
            result.update(global_step=step, loss=loss, metrics=metric_values)
            self._log_and_summarize(writer, step, window, eta, loss, metric_values)
            window = _LogWindow(self.task.metric_names)
          if rate_origin is None:
            rate_origin = (step, time.monotonic())
          evaluates = evaluation_config is not None and (
              step % evaluation_config.every_steps == 0 or step >= config.num_train_steps)
          # The step of an evaluation is saved before it: a run killed during the evaluation
          # resumes at that step and evaluates it again, and the best checkpoint's step is never
          # one that a resumed run trains again.
          if (evaluates or step % config.save_checkpoints_steps == 0
              or step >= config.num_train_steps):
            self.checkpoints.save(step)
          if evaluates:
            stop_reason = self._evaluate_while_training(step, evaluate_fn)
            if stop_reason:
              logging.info("Stopping at step %d of %d: %s", step, config.num_train_steps,
                           stop_reason)
              result["global_step"] = step
              break
        if self._same_on_every_worker(0, watch.requested)[1]:
          # The signal came during the last loop or evaluation: the run stops here rather than
          # go on to its predictions and exports.
          self._stop_on_signal(step)
      finally:
        self._termination = None
        writer.close()
        if temp_dir:
          shutil.rmtree(temp_dir, ignore_errors=True)
    return result

  def _stop_on_signal(self, step):
    """Saves a checkpoint of `step` (unless the latest is that step's) and raises
    `errors.StoppedBySignal`."""
    latest = self.checkpoints.latest()
    if latest is None or checkpointing.checkpoint_step(latest) != step:
      latest = self.checkpoints.save(step)
    watch = self._termination
    name = signal.Signals(watch.signal_number).name
    logging.info("Stopped by %s at step %d, %.1f s of the %g s grace period left", name, step,
                 watch.seconds_left(), watch.grace_seconds)
    raise errors.StoppedBySignal(
        f"stopped by {name} at step {step} of {self.config.num_train_steps}: saved {latest}; "
        "the same command resumes the run", watch.signal_number)

  def _loop_length(self, step, last_loop, seconds_since_log, evaluation_config=None):
    """Steps of the next loop from global step `step` (see `train`).

    Args:
      step: the global step the loop starts from.
      last_loop: (steps, seconds) of the previous loop, or None before the first.
      seconds_since_log: time since the last log line (or the start).
      evaluation_config: the loop also ends at each evaluation step.
    """
    config = self.config
    if last_loop is None:
      return 1
    num_steps = min(config.steps_per_loop,
                    _steps_to_next_multiple(step, config.save_checkpoints_steps),
                    _steps_to_next_multiple(step, config.log_every_steps),
                    config.num_train_steps - step)
    if evaluation_config is not None:
      num_steps = min(num_steps, _steps_to_next_multiple(step, evaluation_config.every_steps))
    last_steps, last_seconds = last_loop
    seconds_per_step = max(last_seconds, 1e-9) / last_steps
    seconds_left = max(config.log_every_seconds - seconds_since_log, 0.0)
    steps_until_due = math.ceil(seconds_left / seconds_per_step)
    # A loop must end within a share of the grace period of a termination signal.
    steps_within_grace = math.floor(
        preemption.LOOP_SHARE_OF_GRACE * config.preemption_grace_seconds / seconds_per_step)
    # At most twice the last loop: one fast loop (e.g. on prefetched batches) must not plan a
    # loop that runs far past the log line it is due.
    return max(1, min(num_steps, steps_until_due, steps_within_grace, 2 * last_steps))

  def _is_multi_worker(self):
    return isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)

  def _same_on_every_worker(self, num_steps, terminating):
    """`(num_steps, terminating)` agreed by every worker of a multi-worker strategy: replica 0's
    `num_steps`, and whether any worker got a termination signal; the arguments elsewhere.

    Each worker sizes its loops by its own clock, but all must run the same steps per call of
    the loop (their all-reduces pair up step by step) and all must stop at the same step.
    """
    if not self._is_multi_worker():
      return num_steps, terminating

    def replica_value():
      is_first = tf.distribute.get_replica_context().replica_id_in_sync_group == 0
      return tf.stack([tf.where(is_first, num_steps, 0), int(terminating)])

    agreed = self.strategy.reduce(tf.distribute.ReduceOp.SUM, self.strategy.run(replica_value),
                                  axis=None).numpy()
    return int(agreed[0]), bool(agreed[1])

  def _log_and_summarize(self, writer, step, window, eta, loss, metric_values):
    """One log line and the TensorBoard scalars of the steps in `window`."""
    seconds = max(window.seconds(), 1e-9)
    steps_per_second = window.num_steps / seconds
    examples_per_second = steps_per_second * self.config.train_batch_size
    # The rate of the last step taken, as the original's schedule evaluates it.
    learning_rate = float(self.optimizer.current_learning_rate(self.global_step - 1).numpy())
    metric_text = "".join(f", {name} = {value:.6g}" for name, value in metric_values.items())
    eta_text = f", ETA {progress.format_duration(eta)}" if eta is not None else ""
    logging.info("step %d/%d: loss = %.6g%s, lr = %.4g, steps/s = %.3g, examples/s = %.4g%s",
                 step, self.config.num_train_steps, loss, metric_text, learning_rate,
                 steps_per_second, examples_per_second, eta_text)
    with writer.as_default(step=step):
      tf.summary.scalar("loss", loss)
      tf.summary.scalar("learning_rate", learning_rate)
      tf.summary.scalar("examples_per_second", examples_per_second)
      tf.summary.scalar("global_step/sec", steps_per_second)
      for name, value in metric_values.items():
        tf.summary.scalar(name, value)
      if self.loss_scale is not None:
        tf.summary.scalar("loss_scale", self.loss_scale.scale.read_value())
    writer.flush()

  def evaluate(self, input_fn, max_eval_steps=None):
    """`compute_eval_metrics`, then `record_eval_results`: the figures below, written to
    `output_dir/eval_results.txt` and to summaries in `output_dir/eval`."""
    return self.record_eval_results(self.compute_eval_metrics(input_fn, max_eval_steps))

  def compute_eval_metrics(self, input_fn, max_eval_steps=None):
    """Evaluates the current weights (restored from output_dir or init_checkpoint if not trained).

    Args:
      input_fn: `(tf.distribute.InputContext) -> tf.data.Dataset` of per-replica batches of
        `eval_batch_size / num_replicas` examples.
      max_eval_steps: stop after this many batches (None: until the data ends).

    Returns:
      dict: each task metric as sum/count over all batches and replicas, and `loss` (mean
      per-example loss; the mean of batch losses when batches are full, as the original's
      Estimator).
    """
    self.initialize()
    if self._eval_step is None:
      @tf.function(reduce_retracing=True)
      def eval_step(features):
        return self._reduce(self.strategy.run(self._replica_eval_step, args=(features,)))
      self._eval_step = eval_step
    loss_sum, example_count = 0.0, 0.0
    sums = {name: 0.0 for name in self.task.metric_names}
    counts = dict(sums)
    num_batches = 0
    bar = progress.Progress(total=max_eval_steps, unit="batches evaluated")
    for features in input_pipeline.distribute_input_fn(self.strategy, input_fn):
      if max_eval_steps is not None and num_batches >= max_eval_steps:
        break
      weighted_loss, batch_size, metrics = self._eval_step(features)
      loss_sum += float(weighted_loss)
      example_count += float(batch_size)
      for name, (s, c) in metrics.items():
        sums[name] += float(s)
        counts[name] += float(c)
      num_batches += 1
      bar.update()
    bar.close()
    if not num_batches:
      raise errors.ConfigError("the evaluation input holds no complete batch")
    results = {name: sums[name] / counts[name] if counts[name] else float("nan") for name in sums}
    results["loss"] = loss_sum / example_count
    logging.info("Evaluated %d batch(es)", num_batches)
    return results

  def _evaluate_while_training(self, step, evaluate_fn):
    """Runs one evaluation during training; returns why training should stop, or None."""
    start = time.monotonic()
    metrics = evaluate_fn()
    seconds = time.monotonic() - start
    logging.info("Evaluation at step %d (%.1f s): %s", step, seconds,
                 ", ".join(f"{k} = {v}" for k, v in sorted(metrics.items())))
    self._summarize_eval(step, metrics)
    self.evaluation.record(step, metrics, seconds)
    return self.evaluation.stop_reason()

  def best_checkpoint(self):
    """The best checkpoint kept in output_dir by evaluation while training, or None."""
    if self.evaluation is not None:
      return self.evaluation.best_prefix()
    latest = self.checkpoints.latest()
    return periodic_evaluation.recorded_best_prefix(
        self.config.output_dir, checkpointing.checkpoint_step(latest) if latest else None)

  def restore_best(self):
    """Restores the best checkpoint (weights and global step), if there is one; returns its
    prefix or None."""
    prefix = self.best_checkpoint()
    if prefix is None:
      return None
    self.initialize()
    self.checkpoints.restore(prefix)
    logging.info("Using the best checkpoint %s (step %d) from here on", prefix,
                 int(self.global_step.numpy()))
    return prefix

  def _summarize_eval(self, step, results):
    """Writes `results` as TensorBoard scalars of the `eval` run at `step`."""
    writer, temp_dir = self._summary_writer("eval")
    with writer.as_default(step=step):
      for name, value in results.items():
        if name != "global_step":
          tf.summary.scalar(name, value)
    writer.close()
    if temp_dir:
      shutil.rmtree(temp_dir, ignore_errors=True)

  def record_eval_results(self, results):
    """Logs `results`, writes them to the `eval` summaries and `output_dir/eval_results.txt`.

    Args:
      results: dict name -> float (a runner's metrics computed from `predict`, or `evaluate`'s).

    Returns:
      `results` with `global_step` added.
    """
    results = dict(results, global_step=int(self.global_step.numpy()))
    logging.info("Eval results: %s", ", ".join(f"{k} = {v}" for k, v in sorted(results.items())))
    self._summarize_eval(results["global_step"], results)
    if self.is_chief:
      write_eval_results(os.path.join(self.config.output_dir, EVAL_RESULTS_FILENAME), results)
    return results

  def predict(self, dataset, keep_features=(), num_examples=None):
    """Runs the model over `dataset` and returns its outputs in the dataset's order.

    Every worker runs the whole dataset (no auto-sharding), its global batches split across the
    local replicas in order, so each host gets every prediction.

    Args:
      dataset: `tf.data.Dataset` of global batches (dicts name -> `[batch_size, ...]`), finite.
      keep_features: names of features returned beside the outputs (e.g. labels), which must have
        the same shape in every batch apart from the batch dimension.
      num_examples: the dataset's size if known, for the progress report's ETA.

    Returns:
      `(outputs, features)`: `outputs` the structure of `task.prediction_outputs` with numpy
      arrays concatenated over all examples; `features` dict name -> numpy array.
    """
    self.initialize()
    if self._predict_step is None:
      @tf.autograph.experimental.do_not_convert  # as `_forward_backward`
      def replica_step(features):
        outputs = self.task.call_model(self.model, features, training=False)
        return (self.task.prediction_outputs(features, outputs),
                {name: features[name] for name in keep_features})
      self._predict_step = tf.function(
          lambda features: self.strategy.run(replica_step, args=(features,)),
          reduce_retracing=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    batches = []
    bar = progress.Progress(total=num_examples, unit="examples predicted")
    for features in input_pipeline.distribute_dataset(self.strategy,
                                                         dataset.with_options(options)):
      # An evaluation while training stops on a signal: its step's checkpoint is saved, and the
      # resumed run evaluates that step again.
      if self._termination is not None and self._termination.requested and (
          not self._is_multi_worker()):
        self._stop_on_signal(int(self.global_step.numpy()))
      per_replica = self._predict_step(features)
      for local in _local_results(self.strategy, per_replica):
        batches.append(tf.nest.map_structure(lambda value: value.numpy(), local))
        bar.update(len(tf.nest.flatten(batches[-1])[0]))
    bar.close()
    if not batches:
      raise errors.ConfigError("the prediction input holds no example")
    return tf.nest.map_structure(lambda *arrays: np.concatenate(arrays, axis=0), *batches)


def _steps_to_next_multiple(step, period):
  return (step // period + 1) * period - step


class _LogWindow:
  """The losses and metric sums of the training steps since the last log line, and their time."""

  def __init__(self, metric_names):
    self.start = time.monotonic()
    self.num_steps = 0
    self.loss_sum = 0.0
    self.metric_sums = {name: [0.0, 0.0] for name in metric_names}

  def seconds(self):
    return time.monotonic() - self.start

  def add(self, losses, metrics):
    """Adds a loop's `[steps]` losses and its dict name -> (sum, count) tensors."""
    self.num_steps += len(losses)
    self.loss_sum += float(np.sum(losses))
    for name, (total, count) in metrics.items():
      self.metric_sums[name][0] += float(total)
      self.metric_sums[name][1] += float(count)

  def means(self):
    """Returns (mean loss per step, dict name -> metric value) of the window."""
    return self.loss_sum / max(self.num_steps, 1), {
        name: total / count if count else float("nan")
        for name, (total, count) in self.metric_sums.items()}


def _local_results(strategy, per_replica_structure):
  """The structure of each local replica, in replica order."""
  flat = [strategy.experimental_local_results(value)
          for value in tf.nest.flatten(per_replica_structure)]
  return [tf.nest.pack_sequence_as(per_replica_structure, [values[i] for values in flat])
          for i in range(len(flat[0]))]
