"""`run_multiple_choice.py`'s config: the shared fine-tuning fields plus the task and its files."""

import dataclasses

import tensorflow as tf

from base import config
from base import errors
from tasks import config as tasks_config
from tasks.multiple_choice import spec as multiple_choice_spec
from tasks.multiple_choice import reader as multiple_choice
from training import model_inputs

_UNIT = "Examples (each with all its choices)"


@dataclasses.dataclass(kw_only=True)
class MultipleChoiceConfig(tasks_config.FineTuningWithEvalConfig):
  """A multiple-choice run: SWAG, or JSON lines of your own (see the flags' help).

  Example:
    >>> from tasks.multiple_choice.config import MultipleChoiceConfig
    >>> MultipleChoiceConfig(task_name="jsonl", data_dir="samples/multiple_choice",
    ...                      vocab_file="vocab.txt", bert_config_file="bert_config.json",
    ...                      output_dir="/tmp/mc").do_train
    False
  """
  REQUIRED = ("task_name", "output_dir")  # model files may come from a name

  train_batch_size: int = tasks_config.batch_size_field(
      _UNIT, "optimizer step, over all replicas.", 32)
  eval_batch_size: int = tasks_config.batch_size_field(_UNIT, "evaluation step.", 8)
  predict_batch_size: int = tasks_config.batch_size_field(_UNIT, "prediction step.", 8)

  data_dir: str | None = config.flag(
      "string", None, "Directory of the task's train/dev/test files (swag: train.csv, val.csv, "
      "test.csv; jsonl: train.jsonl, dev.jsonl, test.jsonl).")
  task_name: str | None = config.flag(
      "string", None, f"One of {', '.join(multiple_choice.TASKS)}: the SWAG release's CSV (or "
      'its fields as JSON lines), or JSON lines {"context": ..., "choices": [...], '
      '"label": ...}.')
  train_file: str | None = config.flag(
      "string", None, "Training file (default: the task's train file in --data_dir). swag: a "
      ".csv file is read as CSV, any other as JSON lines.")
  dev_file: str | None = config.flag(
      "string", None, "Evaluation file (default: the task's dev file in --data_dir).")
  predict_file: str | None = config.flag(
      "string", None, "File to predict (default: the task's test file in --data_dir); labels "
      "are optional.")

  def validate_family(self, bert_config):
    model_inputs.check_segments(2, bert_config, self.bert_config_file,
                                "each choice packs context and ending as two segments")
    if self.task_name.lower() not in multiple_choice.TASKS:
      raise errors.UsageError(f"--task_name={self.task_name}: unknown task; known tasks: "
                              f"{', '.join(multiple_choice.TASKS)}")
    if self.data_dir and not tf.io.gfile.isdir(self.data_dir):
      raise errors.UsageError(f"--data_dir={self.data_dir}: no such directory")

  def make_spec(self):
    return multiple_choice_spec.MultipleChoiceSpec()
