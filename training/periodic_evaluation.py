"""Evaluation while training: the dev metrics every N steps, a history of them, the best
checkpoint kept, early stopping. All of it lives in the output directory and survives a kill.

Files (written by the chief, each atomically):
  `eval_history.jsonl`: one JSON line per evaluation, `{"step", "metrics", "seconds"}`.
  `best/model.ckpt-<step>` (+ its `checkpoint` state file): the checkpoint with the best value of
    the chosen metric so far, in the original layout; `--keep_checkpoint_max` never deletes it.
  `best/best.json`: `{"step", "metric", "mode", "value", "checkpoint"}` of that checkpoint.

Crash consistency: a new best is written first (its checkpoint, then `best.json`, which makes it
the best, then the previous best is deleted, index before data), the history after it. A kill
therefore leaves either the old best with a history without the new evaluation, or the new best
with a history that lacks it; the training checkpoint of every evaluated step is saved before the
evaluation, so a resumed run starts at that step and evaluates it again at once (`pending_step`).
`resume` also removes what a kill left in `best/` (temporaries, a half-deleted previous best) and
re-keeps the history's best from the training checkpoints when `best.json` names a worse one.

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
from base import errors
from base import json_files
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


class EvaluationStateError(errors.UserError, ValueError):
  """`best.json` or the evaluation history of an output directory cannot be read."""


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


def _read_json_lines(path):
  """The JSON objects of `path`, one a line (blank lines skipped), or [] when it does not exist.

  Raises:
    EvaluationStateError: naming the file and line, for bytes that are not UTF-8 JSON objects.
  """
  if not tf.io.gfile.exists(path):
    return []
  with tf.io.gfile.GFile(path, "rb") as f:
    content = f.read()
  try:
    lines = content.decode("utf-8").splitlines()
  except UnicodeDecodeError as error:
    line = content.count(b"\n", 0, error.start) + 1
    raise EvaluationStateError(f"{path}:{line}: not UTF-8 ({error.reason} at byte "
                               f"{error.start}); delete it to start the record again") from None
  entries = []
  for number, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    try:
      entry = json_files.loads(line)
    except json_files.MalformedJson as error:
      raise EvaluationStateError(f"{path}:{number}: not JSON ({error}); delete the file to "
                                 "start the record again") from None
    entries.append((number, entry))
  return entries


def _checked(path, number, entry, fields):
  """`entry` if it is an object with every field of `fields` (name -> type), else raises
  `EvaluationStateError` naming the file and line."""
  where = f"{path}:{number}" if number else path
  if not isinstance(entry, dict):
    raise EvaluationStateError(f"{where}: expected a JSON object, got {type(entry).__name__}")
  for name, kind in fields.items():
    value = entry.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
      raise EvaluationStateError(
          f"{where}: '{name}' must be {_KIND_NAMES[kind]}, got {json.dumps(value)}; delete the "
          "file to start the record again")
  return entry


_NUMBER = (int, float)
_KIND_NAMES = {int: "an integer", str: "a string", dict: "an object", _NUMBER: "a number"}
_BEST_FIELDS = {"step": int, "metric": str, "mode": str, "value": _NUMBER, "checkpoint": str}
_HISTORY_FIELDS = {"step": int, "metrics": dict}


def _best_state_path(output_dir):
  return os.path.join(output_dir, BEST_DIRNAME, BEST_STATE_FILENAME)


def _read_best_state(output_dir):
  """`best/best.json` of `output_dir` when the checkpoint it names exists, else None.

  Raises:
    EvaluationStateError: naming the file, when it is not such a JSON object.
  """
  path = _best_state_path(output_dir)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, "rb") as f:
    content = f.read()
  try:
    state = json_files.loads(content.decode("utf-8"))
  except ValueError as error:  # UnicodeDecodeError and json_files.MalformedJson
    raise EvaluationStateError(f"{path}: not a JSON object ({error}); delete it to start the "
                               "record again") from None
  state = _checked(path, None, state, _BEST_FIELDS)
  index = os.path.join(output_dir, BEST_DIRNAME, state["checkpoint"]) + checkpoint_io.INDEX_SUFFIX
  return state if tf.io.gfile.exists(index) else None


def _read_history(output_dir):
  """The entries of `output_dir`'s evaluation history, oldest first ([] without one)."""
  path = os.path.join(output_dir, HISTORY_FILENAME)
  history = []
  for number, entry in _read_json_lines(path):
    entry = _checked(path, number, entry, _HISTORY_FIELDS)
    for name, value in entry["metrics"].items():
      _checked(path, number, {name: value}, {name: _NUMBER})
    history.append(entry)
  return history


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
    self._unrecorded_best_step = None

  def resume(self, step):
    """Loads the history up to global step `step` (later entries are dropped: the run goes on
    from `step` and evaluates them again) and the best checkpoint's state, and makes `best/`
    agree with them (see the module docstring)."""
    self.history = [entry for entry in _read_history(self.output_dir) if entry["step"] <= step]
    state = _read_best_state(self.output_dir)
    if self.is_chief:
      self._remove_dead_files(state)
    if (state is not None and state["metric"] == self.config.metric
        and state["mode"] == self.config.mode):
      self.best_step, self.best_value = state["step"], state["value"]
      if self.best_step == step and not self._evaluated(step):
        self._unrecorded_best_step = step
    if self.config.metric is not None:
      self._keep_history_best()
    if self.history:
      logging.info("Resumed %d evaluation(s) from %s%s", len(self.history),
                   os.path.join(self.output_dir, HISTORY_FILENAME),
                   f"; best {self.config.metric} = {self.best_value} at step {self.best_step}"
                   if self.best_step is not None else "")

  def _remove_dead_files(self, state):
    """Removes from `best/` every file but `best.json`, the state file and the files of the
    checkpoint `best.json` (read as `state`) names: temporaries and the pieces of a previous best
    of a killed run."""
    if not tf.io.gfile.isdir(self.best_dir):
      return
    kept = {BEST_STATE_FILENAME, checkpointing.STATE_FILENAME}
    if state is not None:
      kept.update(state["checkpoint"] + suffix
                  for suffix in (checkpoint_io.INDEX_SUFFIX, checkpoint_io.DATA_SUFFIX))
    dead = [name for name in tf.io.gfile.listdir(self.best_dir) if name.rstrip("/") not in kept]
    for name in dead:
      path = os.path.join(self.best_dir, name)
      if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
      else:
        tf.io.gfile.remove(path)
    if dead:
      logging.info("Removed %d file(s) a killed run left in %s: %s", len(dead), self.best_dir,
                   ", ".join(sorted(dead)))

  def _keep_history_best(self):
    """Keeps the best evaluation of the history as the best checkpoint when `best.json` names a
    worse one (a directory written otherwise than by this class), from the training checkpoint
    of its step when that still exists."""
    metric = self.config.metric
    scored = [entry for entry in self.history
              if metric in entry["metrics"] and not math.isnan(entry["metrics"][metric])]
    if not scored:
      return
    pick = max if self.config.mode == "max" else min
    best = pick(scored, key=lambda entry: entry["metrics"][metric])
    if best["step"] == self.best_step or not self._is_better(best["metrics"][metric]):
      return
    training_checkpoint = os.path.join(self.output_dir,
                                       f"{checkpointing.CHECKPOINT_BASENAME}-{best['step']}")
    if not tf.io.gfile.exists(training_checkpoint + checkpoint_io.INDEX_SUFFIX):
      logging.warning("%s names step %s as the best %s, but the history has a better evaluation "
                      "at step %d whose checkpoint is gone: keeping step %s",
                      _best_state_path(self.output_dir), self.best_step, metric, best["step"],
                      self.best_step)
      return
    logging.warning("The history has a better %s at step %d than %s: keeping %s as the best",
                    metric, best["step"], _best_state_path(self.output_dir), training_checkpoint)
    self._keep_best(best["step"], best["metrics"][metric],
                    checkpoint_io.read_checkpoint(training_checkpoint))

  def pending_step(self, step, num_train_steps):
    """`step` if the run resumes at an evaluation step that the history lacks (a run killed
    during or just after that evaluation), else None."""
    due = step % self.config.every_steps == 0 or step >= num_train_steps
    return step if step > 0 and due and not self._evaluated(step) else None

  def _evaluated(self, step):
    return any(entry["step"] == step for entry in self.history)

  def _is_better(self, value):
    if self.best_value is None:
      return True
    return value > self.best_value if self.config.mode == "max" else value < self.best_value

  def record(self, step, metrics, seconds):
    """Keeps the checkpoint as the best if `metrics` has a better value of the chosen metric than
    any before, then appends the evaluation to the history (this order: see the module
    docstring). The evaluation of a best step that a killed run kept but did not record (the
    same weights, evaluated again on resume) sets the best value.

    Returns:
      whether this evaluation is the new best (False without a chosen metric).
    """
    metrics = {name: float(value) for name, value in metrics.items()}
    is_best = False
    metric = self.config.metric
    if metric is not None:
      value = metrics[metric]
      if step == self._unrecorded_best_step:
        self._keep_best(step, value, named_tensors=None)
      elif not math.isnan(value) and self._is_better(value):
        is_best = True
        self._keep_best(step, value, self.name_to_variable)
    self._unrecorded_best_step = None
    self.history.append({"step": step, "metrics": metrics, "seconds": round(seconds, 3)})
    if self.is_chief:
      tf.io.gfile.makedirs(self.output_dir)
      with atomic_files.open_for_writing(os.path.join(self.output_dir, HISTORY_FILENAME)) as f:
        f.write("".join(json.dumps(entry, sort_keys=True) + "\n" for entry in self.history))
    return is_best

  def _keep_best(self, step, value, named_tensors):
    """Writes `named_tensors` as the best checkpoint of `step` with `value`: the checkpoint, its
    state file, `best.json` (from here on it is the best), then the previous best is deleted.
    With `named_tensors` None, only `best.json` is written (the checkpoint is there)."""
    previous = self.best_prefix()
    self.best_step, self.best_value = step, value
    if not self.is_chief:
      return
    prefix = self.best_prefix()
    if named_tensors is not None:
      tf.io.gfile.makedirs(self.best_dir)
      checkpoint_io.write_checkpoint(prefix, named_tensors)
      checkpointing.write_state_file(self.best_dir, [prefix])
    with atomic_files.open_for_writing(_best_state_path(self.output_dir)) as f:
      f.write(json.dumps({"step": step, "metric": self.config.metric, "mode": self.config.mode,
                          "value": value, "checkpoint": os.path.basename(prefix)},
                         sort_keys=True) + "\n")
    if previous and previous != prefix:
      checkpointing.delete_checkpoint(previous)
    logging.info("New best %s = %s at step %d: kept as %s", self.config.metric, value, step,
                 prefix)

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
