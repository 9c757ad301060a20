"""The one fine-tuning runner: the `main()` of run_classifier, run_ner, run_squad and
run_multiple_choice, driven by each task family's `FineTuningSpec`.

A run goes: `validate()` of its config (the shared checks and the family's own); every input
file read and checked; the record files written (all of them, before any training); the step count from the
training examples, the strategy and the `engine.Trainer`; training; evaluation, prediction and
export, each as the flags ask. The family says how to read, what to write and how to score; the
runner owns the order, the logs, the errors and the output files every family shares
(`label_list.txt`, `eval_results.txt`, the export).

Usage, from Python (a script does the same with the config of its flags):
  from tasks import runner
  from tasks.ner.config import NerConfig
  result = runner.run(NerConfig(data_dir="samples/ner", do_train=True, do_eval=True, ...))
  result.metrics["f1"]
"""

import contextlib
import dataclasses
import functools
import os

from absl import logging
import tensorflow as tf

from base import atomic_files
from base import cluster
from base import output_locations
from data import tokenization
from modeling import optimization
from serving import export_precision
from serving import saved_model_export
from training import engine
from training import input_pipeline

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

  def read_inputs(self, config, bert_config):
    """Reads and checks every input file the run needs; nothing is written yet."""
    raise NotImplementedError

  def label_list(self, config, inputs):
    """The labels in label-id order, written to `label_list.txt`; None for a family without."""
    return None

  def write_records(self, config, inputs, tokenizer):
    """Writes the record files into --output_dir; returns `{split: RecordFile}` ("train",
    "eval", "predict")."""
    raise NotImplementedError

  def num_train_examples(self, inputs, records):
    """What the step count is based on (the original's: examples, or questions for SQuAD)."""
    return records["train"].num_rows

  def training_summary(self, inputs, records):
    """The start of the log line before training, e.g. "Training on 3668 examples"."""
    return f"Training on {records['train'].num_rows} {self.example_unit}"

  def feature_spec(self, config, inputs, split):
    """The feature spec of the records of `split`."""
    raise NotImplementedError

  def sequence_features(self, config, inputs):
    """The features trimmed by dynamic padding, or None for the pipeline's default."""
    return None

  def make_task(self, config, bert_config, inputs, drop_padding):
    """The `training.task.Task` to train. `drop_padding` (`drop_padding_of`): its model may
    compute the real tokens alone (`BertEncoder(drop_padding=True)`), if its loss and outputs
    read no padding position."""
    raise NotImplementedError

  def evaluate(self, config, inputs, run):
    """Scores the model on the dev data; returns `{metric name: float}` (what --do_eval writes to
    `eval_results.txt`, and what evaluation while training records)."""
    raise NotImplementedError

  def eval_data(self, config, inputs):
    """What `evaluate` scores on ("the dev file"), or None when this run has nothing to score."""
    return "the dev file" if config.evaluates else None

  def metric_names(self, config, inputs):
    """The names `evaluate` always reports (those a best checkpoint can be chosen by)."""
    raise NotImplementedError

  def default_metric(self, config, inputs):
    """The metric the best checkpoint is chosen by unless --best_checkpoint_metric says."""
    return "eval_accuracy"

  def predict(self, config, inputs, run):
    """--do_predict: writes the predictions of the predict split (on the chief only)."""
    raise NotImplementedError

  def make_server(self, config, inputs, model, with_text):
    """The servable to export: an object with a `signatures()` method."""
    raise NotImplementedError


@dataclasses.dataclass
class Run:
  """What the evaluation and prediction hooks use: the trainer and the record files."""
  trainer: engine.Trainer
  records: dict
  spec: FineTuningSpec
  config: object
  inputs: object
  dynamic_padding: bool

  def predict(self, split, batch_size, keep_features=()):
    """`trainer.predict` over the records of `split`, in file order."""
    dataset_kwargs = self._dataset_kwargs()
    dataset = input_pipeline.make_dataset(
        [self.records[split].path],
        self.spec.feature_spec(self.config, self.inputs, split), batch_size,
        is_training=False, drop_remainder=False, dynamic_padding=self.dynamic_padding,
        **dataset_kwargs)
    return self.trainer.predict(dataset, keep_features=keep_features,
                                num_examples=self.records[split].num_rows)

  def train(self, evaluation_config=None):
    """Trains on the train split, evaluating while training with `evaluation_config`."""
    self.trainer.train(
        input_pipeline.make_input_fn(
            [self.records["train"].path],
            self.spec.feature_spec(self.config, self.inputs, "train"),
            self.config.train_batch_size, is_training=True,
            dynamic_padding=self.dynamic_padding, seed=self.config.seed,
            **self._dataset_kwargs()),
        evaluation_config,
        lambda: self.spec.evaluate(self.config, self.inputs, self))

  def _dataset_kwargs(self):
    sequence_features = self.spec.sequence_features(self.config, self.inputs)
    return {} if sequence_features is None else {"sequence_features": sequence_features}


def train_steps(config, num_examples):
  """`(num_train_steps, num_warmup_steps)` as the original: int(examples / batch * epochs), at
  least 1 when training; warmup int(steps * warmup_proportion). (0, 0) without --do_train."""
  if not config.do_train:
    return 0, 0
  num_train_steps = max(1, int(num_examples / config.train_batch_size
                               * config.num_train_epochs))
  return num_train_steps, int(num_train_steps * config.warmup_proportion)


def optimizer_fn(config, num_train_steps, num_warmup_steps):
  """The `engine.Trainer` optimizer factory of the flags, or None without --do_train."""
  if not config.do_train:
    return None
  return lambda: optimization.create_optimizer(config.learning_rate, num_train_steps,
                                               num_warmup_steps, config.optimizer)


def saved_label_list(config):
  """The labels of the model a run predicts with when it does not train: the `label_list.txt`
  beside the checkpoint the engine restores (--output_dir's, when it holds a checkpoint; else
  the one beside --init_checkpoint, as a converted fine-tuned model has), else None.

  Returns:
    the labels in label-id order, or None (the run trains, or no such file).
  """
  if config.do_train:
    return None
  if tf.io.gfile.isdir(config.output_dir) and tf.train.latest_checkpoint(config.output_dir):
    model_dir = config.output_dir
  elif config.init_checkpoint:
    path = config.init_checkpoint
    model_dir = path if tf.io.gfile.isdir(path) else os.path.dirname(path)
  else:
    return None
  path = os.path.join(model_dir, LABEL_LIST_FILENAME)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    labels = [line.rstrip("\n") for line in f]
  logging.info("labels of the model, from %s: %s", path, ", ".join(labels))
  return labels


def write_label_list(output_dir, label_list):
  """Writes `output_dir/label_list.txt`, one label per line in label-id order, atomically."""
  with atomic_files.open_for_writing(os.path.join(output_dir, LABEL_LIST_FILENAME)) as f:
    f.write("".join(f"{label}\n" for label in label_list))


def export(trainer, config, make_server):
  """Writes the trained model for TensorFlow Serving (every worker builds the servable; only the
  chief writes it).

  Args:
    trainer: the run's `engine.Trainer` (restored from --output_dir or --init_checkpoint if it
      has not trained).
    config: the run's config (--export_dir, --export_version, --export_ids_only,
      --export_precision).
    make_server: `(model, with_text) -> servable` with a `signatures()` method.

  Returns:
    the path of the written version, or None on a worker that does not write.
  """
  trainer.initialize()
  model = export_precision.model_in_precision(trainer.model, config.export_precision)
  server = make_server(model, not config.export_ids_only)
  if trainer.is_chief:
    return saved_model_export.export(server, config.export_dir, server.signatures(),
                                     config.export_version)
  return None


@dataclasses.dataclass(frozen=True)
class RunResult:
  """What a fine-tuning run wrote.

  Attributes:
    output_dir: the run's --output_dir.
    metrics: `{name: value}` of `eval_results.txt` (the last evaluation), or None when the run
      evaluated nothing.
    record_files: `{split: path}` of the record files it wrote ("train", "eval", "predict").
    export_path: the SavedModel version directory it wrote, or None.
  """
  output_dir: str
  metrics: dict | None
  record_files: dict
  export_path: str | None


def run(config):
  """Runs a fine-tuning config in this process: `config.validate()`, then the run (see the
  module's docstring); callable more than once in one process.

  Args:
    config: a `tasks.config.FineTuningConfig` of a family (e.g.
      `tasks.classification.config.ClassificationConfig`).

  Returns:
    the `RunResult`.

  Raises:
    errors.UserError: a flag, file, checkpoint or config the run cannot use (nothing is
      written for the checks `validate` makes).
  """
  config = config.resolve_weights()
  bert_config = config.load_bert_config()
  config.validate(bert_config)
  with output_locations.claimed_output_dir("output_dir", config.output_dir,
                                           claim=cluster.is_chief_process()):
    return _run(config, config.make_spec(), bert_config)


def _run(config, spec, bert_config):
  tokenizer = tokenization.FullTokenizer(config.vocab_file, config.do_lower_case)
  inputs = spec.read_inputs(config, bert_config)
  evaluation_config = config.evaluation_config(
      spec.metric_names(config, inputs), spec.default_metric(config, inputs),
      spec.eval_data(config, inputs))
  tf.io.gfile.makedirs(config.output_dir)
  with _removed_on_failure(config.output_dir):
    label_list = spec.label_list(config, inputs)
    if label_list is not None:
      write_label_list(config.output_dir, label_list)
    records = spec.write_records(config, inputs, tokenizer)

    num_train_steps, num_warmup_steps = train_steps(
        config, spec.num_train_examples(inputs, records) if config.do_train else 0)
    strategy = config.strategy()
    dynamic_padding = dynamic_padding_of(config, strategy)
    run_config = config.engine_run_config(num_train_steps, config.train_batch_size,
                                          config.eval_steps_batch_size)
    drop_padding = drop_padding_of(config, strategy)
    trainer = engine.Trainer(strategy, spec.make_task(config, bert_config, inputs, drop_padding),
                             run_config, optimizer_fn(config, num_train_steps, num_warmup_steps))
    # The weights are loaded here, before any training: a checkpoint damaged in a way only
    # loading finds (a checksum) fails while the files above can still be taken back.
    trainer.initialize()
  run_state = Run(trainer, records, spec, config, inputs, dynamic_padding)

  if config.do_train:
    logging.info("%s, batch size %d, %d steps (%d warmup), dynamic padding %s%s",
                 spec.training_summary(inputs, records), config.train_batch_size,
                 num_train_steps, num_warmup_steps, "on" if dynamic_padding else "off",
                 ", padding skipped by the layers" if drop_padding else "")
    run_state.train(evaluation_config)
  if config.final_checkpoint == "best":
    trainer.restore_best()
  if config.evaluates:
    trainer.record_eval_results(spec.evaluate(config, inputs, run_state))
  if config.do_predict:
    spec.predict(config, inputs, run_state)
  export_path = None
  if config.export_dir:
    export_path = export(trainer, config, functools.partial(spec.make_server, config, inputs))
  return RunResult(output_dir=config.output_dir,
                   metrics=engine.read_eval_results(config.output_dir),
                   record_files={split: record.path for split, record in records.items()},
                   export_path=export_path)


@contextlib.contextmanager
def _removed_on_failure(output_dir):
  """Removes the files that the block created in `output_dir` if it raises: a run that fails
  before training leaves no label list or record file under a final name."""
  before = set(tf.io.gfile.listdir(output_dir))
  try:
    yield
  except BaseException:
    for name in set(tf.io.gfile.listdir(output_dir)) - before:
      path = os.path.join(output_dir, name)
      if not tf.io.gfile.isdir(path):
        tf.io.gfile.remove(path)
    raise


def dynamic_padding_of(config, strategy):
  """--dynamic_padding, defaulting to True unless `strategy` is a TPUStrategy."""
  if config.dynamic_padding is None:
    return not isinstance(strategy, tf.distribute.TPUStrategy)
  return config.dynamic_padding


def drop_padding_of(config, strategy):
  """Whether the model computes the real tokens alone: outside XLA (no --jit_compile, not a
  TPUStrategy), where a batch's number of real tokens can shape its tensors. With dynamic
  padding too: the padding left in length-bucketed batches still costs more than skipping it
  (docs/benchmarks.md, "Fine-tuning against transformers")."""
  return not (config.jit_compile or isinstance(strategy, tf.distribute.TPUStrategy))
