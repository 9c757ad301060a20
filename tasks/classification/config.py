"""`run_classifier.py`'s config: the shared fine-tuning fields plus the task and its columns."""

import dataclasses

import tensorflow as tf

from base import config
from base import errors
from tasks import config as tasks_config
from tasks.classification import reader as classification_reader
from tasks.classification import spec as classification_spec


@dataclasses.dataclass(kw_only=True)
class ClassificationConfig(tasks_config.FineTuningWithEvalConfig):
  """A sentence or sentence-pair classification (or regression) run: a GLUE task, XNLI, or TSV /
  CSV files of your own (see the flags' help).

  Example:
    >>> from tasks.classification.config import ClassificationConfig
    >>> run_config = ClassificationConfig(
    ...     task_name="tsv", data_dir="samples/classification", vocab_file="vocab.txt",
    ...     bert_config_file="bert_config.json", output_dir="/tmp/classifier", do_train=True)
    >>> run_config.eval_batch_size, run_config.max_seq_length
    (8, 128)
  """
  REQUIRED = ("data_dir", "task_name", "output_dir")  # model files may come from a name

  data_dir: str | None = config.flag("string", None,
                                     "Directory of the task's train/dev/test files.")
  task_name: str | None = config.flag(
      "string", None, f"One of {', '.join(classification_reader.task_names())} "
      "(case-insensitive).")
  xnli_language: str = config.flag(
      "string", "zh", "Language of the XNLI train and dev files (the original hard-coded zh).")
  text_a_column: str = config.flag(
      "string", "sentence", "tsv/csv tasks: column of the first text (header name or 0-based "
      "index).")
  text_b_column: str | None = config.flag(
      "string", None, "tsv/csv tasks: column of the second text of a pair, if any.")
  label_column: str = config.flag("string", "label", "tsv/csv tasks: column of the label.")
  has_header: bool = config.flag("bool", True, "tsv/csv tasks: the first line names the columns.")
  label_list: list | None = config.flag(
      "list", None, "tsv/csv tasks: the labels, in class-id order; default the sorted labels of "
      "the training file.")
  multi_label: bool = config.flag(
      "bool", False, "tsv/csv tasks: several labels per row (sigmoid outputs), joined by "
      "--label_separator.")
  label_separator: str = config.flag(
      "string", ",", "tsv/csv tasks: separator of the labels of a row with --multi_label.")
  regression: bool = config.flag(
      "bool", False, "tsv/csv tasks: the label is a number (one output, mean-squared-error "
      "loss).")

  def validate_family(self, bert_config):
    if not tf.io.gfile.isdir(self.data_dir):
      raise errors.UsageError(f"--data_dir={self.data_dir}: no such directory")

  def make_spec(self):
    return classification_spec.ClassificationSpec()
