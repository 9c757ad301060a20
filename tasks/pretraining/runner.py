"""The pretraining run: `run(config)` reads the records of `create_pretraining_data.py`, trains
the masked-LM and next-sentence model through the engine, and evaluates.

Usage, from Python (run_pretraining.py does the same with the config of its flags):
  from tasks.pretraining import runner
  from tasks.pretraining.config import PretrainingConfig
  result = runner.run(PretrainingConfig(input_file="data/*.tfrecord", do_train=True, ...))
"""

import dataclasses

from absl import logging

from base import cluster
from base import output_locations
from data import file_patterns
from modeling import optimization
from tasks.pretraining import features
from tasks.pretraining import task
from training import engine
from training import input_pipeline
from training import periodic_evaluation


@dataclasses.dataclass(frozen=True)
class RunResult:
  """What a pretraining run wrote.

  Attributes:
    output_dir: the run's --output_dir (checkpoints, summaries).
    metrics: `{name: value}` of `eval_results.txt`, or None when the run evaluated nothing.
  """
  output_dir: str
  metrics: dict | None


def read_layout(config, patterns, flag_name):
  """The `RecordLayout` of the records of a file flag, checked against the config (None when no
  file holds a record: `input_pipeline.input_fn_from_flags` reports it)."""
  layout, path = task.read_record_layout(
      file_patterns.expand_globs(patterns, flag_name),
      input_pipeline.COMPRESSION_TYPES[config.input_compression])
  if layout is not None:
    task.check_record_layout(layout, path, config.max_seq_length,
                                         config.max_predictions_per_seq,
                                         config.max_sequences_per_pack)
  return layout


def records_input_fn(config, patterns, flag_name, layout, packed_model, batch_size, is_training,
                     **kwargs):
  """`input_pipeline.input_fn_from_flags` for records of `layout`; unpacked records feed a
  packed model as rows of one instance."""
  feature_spec = (layout.feature_spec() if layout is not None else
                  features.pretraining_feature_spec(config.max_seq_length,
                                                   config.max_predictions_per_seq))
  unpacked_for_packed = packed_model and not (layout is not None and layout.packed)
  return input_pipeline.input_fn_from_flags(
      patterns, feature_spec, batch_size, is_training, flag_name=flag_name,
      compression=config.input_compression,
      example_fn=task.as_packed_rows if unpacked_for_packed else None, **kwargs)


def run(config):
  """Runs a `PretrainingConfig` in this process: `config.validate()`, the records checked, then
  training and evaluation as the config asks; callable more than once in one process.

  Returns:
    the `RunResult`.

  Raises:
    errors.UserError: a flag, file, record or checkpoint the run cannot use.
  """
  config = config.resolve_weights()
  bert_config = config.load_bert_config()
  config.validate(bert_config)
  with output_locations.claimed_output_dir("output_dir", config.output_dir,
                                           claim=cluster.is_chief_process()):
    _run(config, bert_config)
  return RunResult(output_dir=config.output_dir,
                   metrics=engine.read_eval_results(config.output_dir))


def _run(config, bert_config):
  eval_flag = "eval_input_file" if config.eval_input_file else "input_file"
  train_layout = read_layout(config, config.input_file, "input_file")
  eval_layout = read_layout(config, config.eval_patterns, eval_flag)
  packed = any(layout is not None and layout.packed for layout in (train_layout, eval_layout))
  if not packed:
    config.warn_without_effect(("max_sequences_per_pack",), "on records that are not packed")
  train_input_fn, files = records_input_fn(config, config.input_file, "input_file", train_layout,
                                           packed, config.train_batch_size, is_training=True,
                                           seed=config.seed)
  task.check_ids_within_config(
      files[0], bert_config,
      compression_type=input_pipeline.COMPRESSION_TYPES[config.input_compression])
  logging.info("%d input file(s), e.g. %s%s", len(files), files[0],
               f"; packed rows of up to {train_layout.max_sequences_per_pack} instances"
               if train_layout is not None and train_layout.packed else "")
  evaluation_config = None
  if config.eval_every_steps is not None:
    evaluation_config = periodic_evaluation.EvaluationConfig(every_steps=config.eval_every_steps)

  strategy = config.strategy()
  run_config = config.engine_run_config(config.num_train_steps, config.train_batch_size,
                                        config.eval_batch_size)
  trainer = engine.Trainer(
      strategy, task.PretrainingTask(bert_config, packed=packed), run_config,
      lambda: optimization.create_optimizer(config.learning_rate, config.num_train_steps,
                                            config.num_warmup_steps, config.optimizer))
  eval_input_fn = None
  if config.do_eval or evaluation_config is not None:
    eval_input_fn, _ = records_input_fn(config, config.eval_patterns, eval_flag, eval_layout,
                                        packed, config.eval_batch_size, is_training=False)
  if config.do_train:
    trainer.train(train_input_fn, evaluation_config,
                  lambda: trainer.compute_eval_metrics(eval_input_fn, config.max_eval_steps))
  if config.do_eval:
    trainer.evaluate(eval_input_fn, config.max_eval_steps)

