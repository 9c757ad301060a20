"""A runner for the toy task on the shared engine and flags; the multi-process tests start it.

Writes a JSON file (--result_file) with the training history and evaluation results.
"""

import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import flags

from base import cli
from modeling import optimization
from tests import toy_task
from training import checkpointing
from training import distribution
from training import config as training_config
from training import engine
from training import input_pipeline
from training import periodic_evaluation

training_config.EngineConfig.define_flags(flags.FLAGS)
training_config.InputCompressionConfig.define_flags(flags.FLAGS)
flags.DEFINE_string("input_file", None, "Toy TFRecords.")
flags.DEFINE_integer("train_batch_size", 8, "Examples per step.")
flags.DEFINE_integer("eval_batch_size", 8, "Examples per eval step.")
flags.DEFINE_integer("num_train_steps", 10, "Training steps.")
flags.DEFINE_integer("num_warmup_steps", 2, "Warmup steps.")
flags.DEFINE_float("learning_rate", 0.05, "Peak learning rate.")
flags.DEFINE_integer("max_eval_steps", None, "Eval batches.")
flags.DEFINE_integer("shuffle_buffer_size", 0, "Record shuffle buffer; 0 keeps file order.")
flags.DEFINE_bool("do_eval", False, "Evaluate after training.")
flags.DEFINE_string("result_file", None, "JSON output of this process.")
flags.DEFINE_integer("sigkill_after_checkpoint", None,
                     "Test hook: SIGKILL this process right after writing this step's checkpoint.")
flags.DEFINE_integer("max_loop_length", None,
                     "Test hook: this process plans training loops of at most this many steps.")
flags.DEFINE_integer("eval_every_steps", None, "Evaluate while training every this many steps.")
flags.DEFINE_list("scripted_scores", None, "Test hook: `step:score` pairs; evaluation while "
                  "training reports `score` of the step it runs at.")
flags.DEFINE_integer("early_stopping_patience", None, "Evaluations without a better score.")
flags.mark_flags_as_required(["input_file", "output_dir", "result_file"])

FLAGS = flags.FLAGS


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


def main(_):
  if FLAGS.sigkill_after_checkpoint is not None:
    _install_kill_hook(FLAGS.sigkill_after_checkpoint)
  if FLAGS.max_loop_length is not None:
    _install_loop_length_hook(FLAGS.max_loop_length)
  engine_config = training_config.EngineConfig.from_flags(FLAGS)
  engine_config.validate()
  strategy = engine_config.strategy()
  config = engine_config.engine_run_config(FLAGS.num_train_steps, FLAGS.train_batch_size,
                                           FLAGS.eval_batch_size)
  input_fn, _ = input_pipeline.input_fn_from_flags(
      FLAGS.input_file, toy_task.FEATURE_SPEC, FLAGS.train_batch_size, is_training=True,
      compression=FLAGS.input_compression, shuffle_buffer_size=FLAGS.shuffle_buffer_size, seed=0)
  trainer = engine.Trainer(
      strategy, toy_task.ToyTask(), config,
      lambda: optimization.create_optimizer(FLAGS.learning_rate, FLAGS.num_train_steps,
                                            FLAGS.num_warmup_steps, FLAGS.optimizer))
  evaluation_config, evaluate_fn = None, None
  if FLAGS.eval_every_steps:
    scores = {int(step): float(score) for step, score in
              (pair.split(":") for pair in FLAGS.scripted_scores)}
    evaluation_config = periodic_evaluation.EvaluationConfig(
        FLAGS.eval_every_steps, metric="score", patience=FLAGS.early_stopping_patience)
    evaluate_fn = lambda: {"score": scores[int(trainer.global_step.numpy())]}
  result = trainer.train(input_fn, evaluation_config, evaluate_fn)
  result["best_checkpoint"] = trainer.best_checkpoint()
  if FLAGS.do_eval:
    eval_fn, _ = input_pipeline.input_fn_from_flags(
        FLAGS.input_file, toy_task.FEATURE_SPEC, FLAGS.eval_batch_size, is_training=False)
    result["eval"] = trainer.evaluate(eval_fn, FLAGS.max_eval_steps)
  result["is_chief"] = trainer.is_chief
  with open(FLAGS.result_file, "w") as f:
    json.dump(result, f)


if __name__ == "__main__":
  cli.run(main)
