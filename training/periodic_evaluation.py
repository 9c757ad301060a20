"""Evaluation while training: the dev metrics every N steps, a history of them, the best
checkpoint kept, early stopping. All of it lives in the output directory and survives a kill.

Files (written by the chief, each atomically):
  `eval_history.jsonl`: one JSON line per evaluation, `{"step", "metrics", "seconds"}`.
  `best/model.ckpt-<step>` (+ its `checkpoint` state file): the checkpoint with the best value of
    the chosen metric so far, in the original layout; `--keep_checkpoint_max` never deletes it.
  `best/best.json`: `{"step", "metric", "mode", "value", "checkpoint"}` of that checkpoint.

A run resumed from `model.ckpt-S` keeps the evaluations up to step S and drops any later ones
(they are evaluated again); the best checkpoint, even one of a step after S, is kept and replaced
only by a better one.
"""

import dataclasses
import json
import math
import os

from absl import logging
import tensorflow as tf

from base import atomic_files
from modeling import checkpoint_io
from training import checkpointing

HISTORY_FILENAME = "eval_history.jsonl"
BEST_DIRNAME = "best"
BEST_STATE_FILENAME = "best.json"
MODES = ("max", "min")


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
  """What to evaluate while training and what to do with the results.

  Attributes:
    every_steps: evaluate after every multiple of this many steps, and after the last step.
    metric: the name of the metric the best checkpoint is chosen by; None keeps no best
      checkpoint (the evaluations are still logged and recorded).
    mode: "max" (higher is better) or "min".
    patience: stop training after this many evaluations in a row without a better `metric`;
      None never stops early.
  """
  every_steps: int
  metric: str = None
  mode: str = "max"
  patience: int = None


def recorded_best_prefix(output_dir, latest_step=None):
  """The best checkpoint an earlier run kept in `output_dir`, or None; also None when training
  went on past the last evaluation (`latest_step`, the latest checkpoint's step, beyond it): the
  best was chosen among fewer steps than the run has."""
  state = _read_best_state(output_dir)
  if state is None:
    return None
  prefix = os.path.join(output_dir, BEST_DIRNAME, state["checkpoint"])
  if latest_step is not None:
    last_evaluated = max((entry["step"] for entry in _read_history(output_dir)), default=0)
    if latest_step > last_evaluated:
      logging.warning("%s was chosen by evaluations up to step %d, but training went on to step "
                      "%d without them: using the latest checkpoint", prefix, last_evaluated,
                      latest_step)
      return None
  return prefix


def _read_best_state(output_dir):
  """`best/best.json` of `output_dir` when the checkpoint it names exists, else None."""
  state_path = os.path.join(output_dir, BEST_DIRNAME, BEST_STATE_FILENAME)
  if not tf.io.gfile.exists(state_path):
    return None
  with tf.io.gfile.GFile(state_path, "rb") as f:
    state = json.loads(f.read().decode("utf-8"))
  name = state.get("checkpoint", "")
  index = os.path.join(output_dir, BEST_DIRNAME, name) + checkpoint_io.INDEX_SUFFIX
  return state if name and tf.io.gfile.exists(index) else None


def _read_history(output_dir):
  """The entries of `output_dir`'s evaluation history, oldest first ([] without one)."""
  history_path = os.path.join(output_dir, HISTORY_FILENAME)
  if not tf.io.gfile.exists(history_path):
    return []
  with tf.io.gfile.GFile(history_path, "rb") as f:
    return [json.loads(line) for line in f.read().decode("utf-8").splitlines() if line.strip()]


def default_mode(metric):
  """"min" for a loss, "max" for anything else (accuracy, F1, correlations)."""
  return "min" if metric and "loss" in metric else "max"


class PeriodicEvaluation:
  """The history, best checkpoint and early-stopping state of one output directory.

  Args:
    output_dir: the run's --output_dir.
    name_to_variable: what a checkpoint holds (as `checkpointing.CheckpointManager`'s).
    config: an `EvaluationConfig`.
    is_chief: only the chief writes files; the others keep the same state in memory.

  Example:
    >>> import tensorflow as tf
    >>> from training import periodic_evaluation
    >>> evaluation = periodic_evaluation.PeriodicEvaluation(
    ...     "output", {"w": tf.Variable(1.0)},
    ...     periodic_evaluation.EvaluationConfig(every_steps=10, metric="f1"))
    >>> evaluation.resume(step=0)
    >>> evaluation.record(10, {"f1": 0.5}, seconds=1.0)
    True
    >>> evaluation.record(20, {"f1": 0.4}, seconds=1.0)
    False
    >>> evaluation.best_step, evaluation.best_prefix()
    (10, 'output/best/model.ckpt-10')
  """

  def __init__(self, output_dir, name_to_variable, config, is_chief=True):
    self.output_dir = output_dir
    self.best_dir = os.path.join(output_dir, BEST_DIRNAME)
    self.name_to_variable = name_to_variable
    self.config = config
    self.is_chief = is_chief
    self.history = []
    self.best_step = None
    self.best_value = None

  def resume(self, step):
    """Loads the history up to global step `step` (later entries are dropped: the run goes on
    from `step` and evaluates them again) and the best checkpoint's state."""
    self.history = [entry for entry in _read_history(self.output_dir) if entry["step"] <= step]
    state = _read_best_state(self.output_dir)
    if (state is not None and state["metric"] == self.config.metric
        and state["mode"] == self.config.mode):
      self.best_step, self.best_value = state["step"], state["value"]
    if self.history:
      logging.info("Resumed %d evaluation(s) from %s%s", len(self.history),
                   os.path.join(self.output_dir, HISTORY_FILENAME),
                   f"; best {self.config.metric} = {self.best_value} at step {self.best_step}"
                   if self.best_step is not None else "")

  def _is_better(self, value):
    if self.best_value is None:
      return True
    return value > self.best_value if self.config.mode == "max" else value < self.best_value

  def record(self, step, metrics, seconds):
    """Appends an evaluation to the history; keeps its checkpoint as the best if `metrics` has a
    better value of the chosen metric than any before.

    Returns:
      whether this evaluation is the new best (False without a chosen metric).
    """
    metrics = {name: float(value) for name, value in metrics.items()}
    self.history.append({"step": step, "metrics": metrics, "seconds": round(seconds, 3)})
    if self.is_chief:
      tf.io.gfile.makedirs(self.output_dir)
      with atomic_files.open_for_writing(os.path.join(self.output_dir, HISTORY_FILENAME)) as f:
        f.write("".join(json.dumps(entry, sort_keys=True) + "\n" for entry in self.history))
    metric = self.config.metric
    if metric is None:
      return False
    value = metrics[metric]
    if math.isnan(value) or not self._is_better(value):
      return False
    previous = self.best_prefix()
    self.best_step, self.best_value = step, value
    if self.is_chief:
      prefix = os.path.join(self.best_dir, f"{checkpointing.CHECKPOINT_BASENAME}-{step}")
      tf.io.gfile.makedirs(self.best_dir)
      checkpoint_io.write_checkpoint(prefix, self.name_to_variable)
      checkpointing.write_state_file(self.best_dir, [prefix])
      with atomic_files.open_for_writing(os.path.join(self.best_dir, BEST_STATE_FILENAME)) as f:
        f.write(json.dumps({"step": step, "metric": metric, "mode": self.config.mode,
                            "value": value, "checkpoint": os.path.basename(prefix)},
                           sort_keys=True) + "\n")
      if previous and previous != prefix:
        checkpointing.delete_checkpoint(previous)
      logging.info("New best %s = %s at step %d: kept as %s", metric, value, step, prefix)
    return True

  def best_prefix(self):
    """The best checkpoint's prefix, or None before any."""
    if self.best_step is None:
      return None
    return os.path.join(self.best_dir, f"{checkpointing.CHECKPOINT_BASENAME}-{self.best_step}")

  def stop_reason(self):
    """Why training should stop early (the patience ran out), or None."""
    patience = self.config.patience
    if not patience or self.best_step is None:
      return None
    since_best = sum(1 for entry in self.history if entry["step"] > self.best_step)
    if since_best < patience:
      return None
    return (f"early stopping: {since_best} evaluation(s) since the best {self.config.metric} = "
            f"{self.best_value} at step {self.best_step} (--early_stopping_patience={patience})")
