"""The one fine-tuning runner: the `main()` of run_classifier, run_ner, run_squad and
run_multiple_choice, driven by each task family's `FineTuningSpec`.

A run goes: the shared checks of the flags and the family's own; every input file read and
checked; the record files written (all of them, before any training); the step count from the
training examples, the strategy and the `engine.Trainer`; training; evaluation, prediction and
export, each as the flags ask. The family says how to read, what to write and how to score; the
runner owns the order, the logs, the errors and the output files every family shares
(`label_list.txt`, `eval_results.txt`, the export).

Usage (the body of a runner script, after its task flags):
  from tasks import runner
  from tasks.ner import spec
  if __name__ == "__main__":
    runner.run(spec.NerSpec())
"""

import dataclasses
import functools
import os

from absl import flags
from absl import logging
import tensorflow as tf

from base import atomic_files
from base import cli
from base import errors
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import optimization
from serving import saved_model_export
from training import distribution
from training import engine
from training import flags as training_flags
from training import input_pipeline
from training import model_inputs

LABEL_LIST_FILENAME = "label_list.txt"


@dataclasses.dataclass(frozen=True)
class RecordFile:
  """A record file the run wrote.

  Attributes:
    path: the file.
    num_rows: records in it, padding rows included (the progress report's total).
    features: what the family needs again to read the predictions of the rows (e.g. the
      windows of each sentence or question), or None.
  """
  path: str
  num_rows: int
  features: object = None


class FineTuningSpec:
  """What a task family tells the runner. Subclasses override the hooks; `inputs` is whatever
  `read_inputs` returns, handed back to every later hook.

  Attributes:
    example_unit: what the training log counts ("examples", "windows").
  """
  example_unit = "examples"

  def check_flags(self, flag_values, bert_config):
    """Raises `errors.UserError` for the family's flags; runs after the shared checks."""

  def read_inputs(self, flag_values, bert_config):
    """Reads and checks every input file the run needs; nothing is written yet."""
    raise NotImplementedError

  def label_list(self, flag_values, inputs):
    """The labels in label-id order, written to `label_list.txt`; None for a family without."""
    return None

  def write_records(self, flag_values, inputs, tokenizer):
    """Writes the record files into --output_dir; returns `{split: RecordFile}` ("train",
    "eval", "predict")."""
    raise NotImplementedError

  def num_train_examples(self, inputs, records):
    """What the step count is based on (the original's: examples, or questions for SQuAD)."""
    return records["train"].num_rows

  def training_summary(self, inputs, records):
    """The start of the log line before training, e.g. "Training on 3668 examples"."""
    return f"Training on {records['train'].num_rows} {self.example_unit}"

  def feature_spec(self, flag_values, inputs, split):
    """The feature spec of the records of `split`."""
    raise NotImplementedError

  def sequence_features(self, flag_values, inputs):
    """The features trimmed by dynamic padding, or None for the pipeline's default."""
    return None

  def make_task(self, flag_values, bert_config, inputs):
    """The `training.task.Task` to train."""
    raise NotImplementedError

  def evaluate(self, flag_values, inputs, run):
    """Scores the model on the dev data; returns `{metric name: float}` (what --do_eval writes to
    `eval_results.txt`, and what evaluation while training records)."""
    raise NotImplementedError

  def eval_data(self, flag_values, inputs):
    """What `evaluate` scores on ("the dev file"), or None when this run has nothing to score."""
    return "the dev file" if "do_eval" in flag_values and flag_values.do_eval else None

  def metric_names(self, flag_values, inputs):
    """The names `evaluate` always reports (those a best checkpoint can be chosen by)."""
    raise NotImplementedError

  def default_metric(self, flag_values, inputs):
    """The metric the best checkpoint is chosen by unless --best_checkpoint_metric says."""
    return "eval_accuracy"

  def predict(self, flag_values, inputs, run):
    """--do_predict: writes the predictions of the predict split (on the chief only)."""
    raise NotImplementedError

  def make_server(self, flag_values, inputs, model, with_text):
    """The servable to export: an object with a `signatures()` method."""
    raise NotImplementedError


@dataclasses.dataclass
class Run:
  """What the evaluation and prediction hooks use: the trainer and the record files."""
  trainer: engine.Trainer
  records: dict
  spec: FineTuningSpec
  flag_values: object
  inputs: object
  dynamic_padding: bool

  def predict(self, split, batch_size, keep_features=()):
    """`trainer.predict` over the records of `split`, in file order."""
    dataset_kwargs = self._dataset_kwargs()
    dataset = input_pipeline.make_dataset(
        [self.records[split].path],
        self.spec.feature_spec(self.flag_values, self.inputs, split), batch_size,
        is_training=False, drop_remainder=False, dynamic_padding=self.dynamic_padding,
        **dataset_kwargs)
    return self.trainer.predict(dataset, keep_features=keep_features,
                                num_examples=self.records[split].num_rows)

  def train(self, evaluation_config=None):
    """Trains on the train split, evaluating while training with `evaluation_config`."""
    self.trainer.train(
        input_pipeline.make_input_fn(
            [self.records["train"].path],
            self.spec.feature_spec(self.flag_values, self.inputs, "train"),
            self.flag_values.train_batch_size, is_training=True,
            dynamic_padding=self.dynamic_padding, seed=self.flag_values.seed,
            **self._dataset_kwargs()),
        evaluation_config,
        lambda: self.spec.evaluate(self.flag_values, self.inputs, self))

  def _dataset_kwargs(self):
    sequence_features = self.spec.sequence_features(self.flag_values, self.inputs)
    return {} if sequence_features is None else {"sequence_features": sequence_features}


def check_flags(flag_values, bert_config):
  """The checks of the shared fine-tuning flags, before any file is read.

  Raises:
    errors.UsageError: nothing to do, `--max_seq_length` beyond the position table or too short,
      a vocab larger than the config's, a non-positive size or rate, a warmup proportion outside
      [0, 1], --export_ids_only without --export_dir, a taken --export_version.
    tokenization.VocabError: `--do_lower_case` contradicts a released checkpoint's name.
    engine.ConfigError: no weights for a run that does not train.
  """
  actions = [name for name in ("do_train", "do_eval", "do_predict", "export_dir")
             if name in flag_values]
  if not any(flag_values[name].value for name in actions):
    raise errors.UsageError(f"at least one of {', '.join('--' + name for name in actions)} is "
                            "needed")
  model_inputs.check_max_seq_length(flag_values.max_seq_length, bert_config,
                                    flag_values.bert_config_file)
  model_inputs.check_vocab(flag_values.vocab_file, bert_config, flag_values.bert_config_file)
  training_flags.check_positive(flag_values, ("train_batch_size", "eval_batch_size",
                                              "predict_batch_size", "learning_rate",
                                              "num_train_epochs"))
  if not 0 <= flag_values.warmup_proportion <= 1:
    raise errors.UsageError(
        f"--warmup_proportion must be in [0, 1], got {flag_values.warmup_proportion}")
  tokenization.validate_case_matches_checkpoint(flag_values.do_lower_case,
                                                flag_values.init_checkpoint)
  if flag_values.export_ids_only and not flag_values.export_dir:
    raise errors.UsageError("--export_ids_only needs --export_dir")
  training_flags.check_starting_weights(flag_values, bert_config)
  if flag_values.export_dir:
    try:
      saved_model_export.check_version(flag_values.export_dir, flag_values.export_version)
    except saved_model_export.ExportError as error:
      raise errors.UsageError(str(error)) from None


def train_steps(flag_values, num_examples):
  """`(num_train_steps, num_warmup_steps)` as the original: int(examples / batch * epochs), at
  least 1 when training; warmup int(steps * warmup_proportion). (0, 0) without --do_train."""
  if not flag_values.do_train:
    return 0, 0
  num_train_steps = max(1, int(num_examples / flag_values.train_batch_size
                               * flag_values.num_train_epochs))
  return num_train_steps, int(num_train_steps * flag_values.warmup_proportion)


def optimizer_fn(flag_values, num_train_steps, num_warmup_steps):
  """The `engine.Trainer` optimizer factory of the flags, or None without --do_train."""
  if not flag_values.do_train:
    return None
  return lambda: optimization.create_optimizer(flag_values.learning_rate, num_train_steps,
                                               num_warmup_steps, flag_values.optimizer)


def write_label_list(output_dir, label_list):
  """Writes `output_dir/label_list.txt`, one label per line in label-id order, atomically."""
  with atomic_files.open_for_writing(os.path.join(output_dir, LABEL_LIST_FILENAME)) as f:
    f.write("".join(f"{label}\n" for label in label_list))


def export(trainer, flag_values, make_server):
  """Writes the trained model for TensorFlow Serving (every worker builds the servable; only the
  chief writes it).

  Args:
    trainer: the run's `engine.Trainer` (restored from --output_dir or --init_checkpoint if it
      has not trained).
    flag_values: the parsed flags (--export_dir, --export_version, --export_ids_only).
    make_server: `(model, with_text) -> servable` with a `signatures()` method.
  """
  trainer.initialize()
  server = make_server(trainer.model, not flag_values.export_ids_only)
  if trainer.is_chief:
    saved_model_export.export(server, flag_values.export_dir, server.signatures(),
                              flag_values.export_version)


def main(spec, argv):
  """A fine-tuning run of `spec`'s family with the parsed `flags.FLAGS`."""
  del argv
  flag_values = flags.FLAGS
  bert_config = bert_config_lib.BertConfig.from_json_file(flag_values.bert_config_file)
  check_flags(flag_values, bert_config)
  spec.check_flags(flag_values, bert_config)
  tokenizer = tokenization.FullTokenizer(flag_values.vocab_file, flag_values.do_lower_case)
  inputs = spec.read_inputs(flag_values, bert_config)
  evaluation_config = training_flags.evaluation_config_from_flags(
      flag_values, spec.metric_names(flag_values, inputs),
      spec.default_metric(flag_values, inputs), spec.eval_data(flag_values, inputs))
  tf.io.gfile.makedirs(flag_values.output_dir)
  label_list = spec.label_list(flag_values, inputs)
  if label_list is not None:
    write_label_list(flag_values.output_dir, label_list)
  records = spec.write_records(flag_values, inputs, tokenizer)

  num_train_steps, num_warmup_steps = train_steps(
      flag_values, spec.num_train_examples(inputs, records) if flag_values.do_train else 0)
  strategy = distribution.strategy_from_flags(flag_values)
  dynamic_padding = training_flags.dynamic_padding_from_flags(flag_values, strategy)
  eval_batch_size = (flag_values.eval_batch_size if "eval_batch_size" in flag_values
                     else flag_values.predict_batch_size)
  run_config = training_flags.run_config_from_flags(
      flag_values, num_train_steps, flag_values.train_batch_size, eval_batch_size)
  trainer = engine.Trainer(strategy, spec.make_task(flag_values, bert_config, inputs),
                           run_config, optimizer_fn(flag_values, num_train_steps,
                                                    num_warmup_steps))
  run_state = Run(trainer, records, spec, flag_values, inputs, dynamic_padding)

  if flag_values.do_train:
    logging.info("%s, batch size %d, %d steps (%d warmup), dynamic padding %s",
                 spec.training_summary(inputs, records), flag_values.train_batch_size,
                 num_train_steps, num_warmup_steps, "on" if dynamic_padding else "off")
    run_state.train(evaluation_config)
  if flag_values.final_checkpoint == "best":
    trainer.restore_best()
  if "do_eval" in flag_values and flag_values.do_eval:
    trainer.record_eval_results(spec.evaluate(flag_values, inputs, run_state))
  if flag_values.do_predict:
    spec.predict(flag_values, inputs, run_state)
  if flag_values.export_dir:
    export(trainer, flag_values, functools.partial(spec.make_server, flag_values, inputs))


def run(spec):
  """The entry point of a runner script: `cli.run` of `main` for `spec`."""
  cli.run(functools.partial(main, spec))
