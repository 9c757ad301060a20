"""A runner for the toy task on the shared engine and its config; the multi-process tests start it.

Writes a JSON file (--result_file) with the training history and evaluation results.
"""

import dataclasses
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from base import cli
from base import cluster
from base import config
from base import output_locations
from modeling import optimization
from tests import toy_task
from training import checkpointing
from training import config as training_config
from training import engine
from training import input_pipeline
from training import periodic_evaluation



@dataclasses.dataclass(kw_only=True)
class ToyConfig(training_config.InputCompressionConfig, training_config.EngineConfig):
  """The engine's fields plus the toy run's own (and the test hooks)."""
  REQUIRED = ("input_file", "output_dir", "result_file")

  input_file: str | None = config.flag("string", None, "Toy TFRecords.")
  train_batch_size: int = config.flag("integer", 8, "Examples per step.")
  eval_batch_size: int = config.flag("integer", 8, "Examples per eval step.")
  num_train_steps: int = config.flag("integer", 10, "Training steps.")
  num_warmup_steps: int = config.flag("integer", 2, "Warmup steps.")
  learning_rate: float = config.flag("float", 0.05, "Peak learning rate.")
  max_eval_steps: int | None = config.flag("integer", None, "Eval batches.")
  shuffle_buffer_size: int = config.flag("integer", 0,
                                         "Record shuffle buffer; 0 keeps file order.")
  do_eval: bool = config.flag("bool", False, "Evaluate after training.")
  result_file: str | None = config.flag("string", None, "JSON output of this process.")
  sigkill_after_checkpoint: int | None = config.flag(
      "integer", None, "Test hook: SIGKILL this process right after writing this step's "
      "checkpoint.")
  max_loop_length: int | None = config.flag(
      "integer", None, "Test hook: this process plans training loops of at most this many steps.")
  eval_every_steps: int | None = config.flag(
      "integer", None, "Evaluate while training every this many steps.")
  scripted_scores: list | None = config.flag(
      "list", None, "Test hook: `step:score` pairs; evaluation while training reports `score` "
      "of the step it runs at.")
  early_stopping_patience: int | None = config.flag(
      "integer", None, "Evaluations without a better score.")


def _install_kill_hook(step_to_kill):
  save = checkpointing.CheckpointManager.save

  def save_then_maybe_die(manager, step):
    prefix = save(manager, step)
    if step == step_to_kill:
      os.kill(os.getpid(), signal.SIGKILL)
    return prefix

  checkpointing.CheckpointManager.save = save_then_maybe_die


def _install_loop_length_hook(max_steps):
  plan = engine.Trainer._loop_length
  engine.Trainer._loop_length = lambda *args: min(max_steps, plan(*args))


def run(toy_config):
  """Validates `toy_config`, claims its output directory (on the chief), trains and writes the
  result file."""
  if toy_config.sigkill_after_checkpoint is not None:
    _install_kill_hook(toy_config.sigkill_after_checkpoint)
  if toy_config.max_loop_length is not None:
    _install_loop_length_hook(toy_config.max_loop_length)
  output_locations.check_output_dir("output_dir", toy_config.output_dir)
  toy_config.validate()
  with output_locations.claimed_output_dir("output_dir", toy_config.output_dir,
                                           claim=cluster.is_chief_process()):
    _train(toy_config)


def _train(toy_config):
  strategy = toy_config.strategy()
  run_config = toy_config.engine_run_config(toy_config.num_train_steps,
                                            toy_config.train_batch_size,
                                            toy_config.eval_batch_size)
  input_fn, _ = input_pipeline.input_fn_from_flags(
      toy_config.input_file, toy_task.FEATURE_SPEC, toy_config.train_batch_size,
      is_training=True, compression=toy_config.input_compression,
      shuffle_buffer_size=toy_config.shuffle_buffer_size, seed=0)
  trainer = engine.Trainer(
      strategy, toy_task.ToyTask(), run_config,
      lambda: optimization.create_optimizer(toy_config.learning_rate, toy_config.num_train_steps,
                                            toy_config.num_warmup_steps, toy_config.optimizer))
  evaluation_config, evaluate_fn = None, None
  if toy_config.eval_every_steps:
    scores = {int(step): float(score) for step, score in
              (pair.split(":") for pair in toy_config.scripted_scores)}
    evaluation_config = periodic_evaluation.EvaluationConfig(
        toy_config.eval_every_steps, metric="score", patience=toy_config.early_stopping_patience)
    evaluate_fn = lambda: {"score": scores[int(trainer.global_step.numpy())]}
  result = trainer.train(input_fn, evaluation_config, evaluate_fn)
  result["best_checkpoint"] = trainer.best_checkpoint()
  if toy_config.do_eval:
    eval_fn, _ = input_pipeline.input_fn_from_flags(
        toy_config.input_file, toy_task.FEATURE_SPEC, toy_config.eval_batch_size, is_training=False)
    result["eval"] = trainer.evaluate(eval_fn, toy_config.max_eval_steps)
  result["is_chief"] = trainer.is_chief
  with open(toy_config.result_file, "w") as f:
    json.dump(result, f)


if __name__ == "__main__":
  cli.run_config(ToyConfig, run)
