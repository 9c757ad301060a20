"""`run_multiple_choice.py`'s part of a fine-tuning run: SWAG CSV or JSON lines, one record per
example with all its choices, accuracy, `predictions.jsonl`, the multiple-choice export."""

import dataclasses
import json
import os

from absl import logging
import numpy as np
import tensorflow as tf

from base import atomic_files
from base import errors
from data import file_patterns
from tasks import classifier
from tasks import runner
from tasks.multiple_choice import features as multiple_choice_features
from tasks.multiple_choice import reader as multiple_choice
from tasks.multiple_choice import server as multiple_choice_server
from tasks.multiple_choice import task as multiple_choice_task
from training import model_inputs

PREDICTIONS_FILENAME = "predictions.jsonl"
# Split -> (file flag, the reader's name of the split, whether every example needs a label,
# action flag).
SPLITS = {"train": ("train_file", "train", True, "do_train"),
          "eval": ("dev_file", "dev", True, "do_eval"),
          "predict": ("predict_file", "test", False, "do_predict")}


@dataclasses.dataclass
class MultipleChoiceInputs:
  """`{split: (path, examples)}` of the files read; the number of choices of every example (None
  when no file was read)."""
  splits: dict
  num_choices: int


def split_path(config, split):
  """The file of a split: its flag, else the task's default name in --data_dir."""
  flag_name, reader_split = SPLITS[split][:2]
  if getattr(config, flag_name):
    return getattr(config, flag_name)
  if not config.data_dir:
    raise errors.UsageError(f"--{flag_name} or --data_dir is required")
  return os.path.join(config.data_dir,
                      multiple_choice.DEFAULT_FILES[config.task_name.lower()][reader_split])


def write_predictions(path, examples, scores):
  """One JSON line per example: `scores`, `probabilities` (per choice), `choice`, and `label`
  when the example has one; written atomically.

  Args:
    path: the output file.
    examples: list of `MultipleChoiceExample`.
    scores: float `[num_examples, num_choices]`.
  """
  probabilities = classifier.output_values(classifier.CLASSIFICATION, scores)
  with atomic_files.open_for_writing(path) as f:
    for example, row_scores, row_probabilities in zip(examples, scores, probabilities):
      record = {"id": example.guid, "scores": [float(s) for s in row_scores],
                "probabilities": [float(p) for p in row_probabilities],
                "choice": int(np.argmax(row_scores))}
      if example.label is not None:
        record["label"] = example.label
      f.write(json.dumps(record) + "\n")


class MultipleChoiceSpec(runner.FineTuningSpec):
  """A softmax over each example's choices (SWAG and the like)."""

  def read_inputs(self, config, bert_config):
    """Every example must have the same number of choices (an error naming the file and line
    otherwise)."""
    splits, reference = {}, None
    for split, (_, reader_split, labelled, action) in SPLITS.items():
      if not getattr(config, action):
        continue
      path = split_path(config, split)
      examples = multiple_choice.read_examples(config.task_name.lower(), path,
                                               reader_split, labelled)
      if not examples:
        raise file_patterns.InputError(f"{path}: holds no example")
      multiple_choice.check_num_choices(examples, reference)
      reference = reference or examples[0]
      splits[split] = (path, examples)
    return MultipleChoiceInputs(splits, len(reference.choices) if reference else None)

  def write_records(self, config, inputs, tokenizer):
    batch_sizes = {"train": 1, "eval": config.eval_batch_size,
                   "predict": config.predict_batch_size}
    records = {}
    for split, (path, examples) in inputs.splits.items():
      record_path = os.path.join(config.output_dir, f"{split}.tf_record")
      num_real, num_padding = multiple_choice_features.write_records(
          record_path, examples, tokenizer, config.max_seq_length, batch_sizes[split])
      logging.info("%s: %d examples of %d choices + %d padding rows -> %s", path, num_real,
                   inputs.num_choices, num_padding, record_path)
      records[split] = runner.RecordFile(record_path, num_real + num_padding)
    return records

  def feature_spec(self, config, inputs, split):
    return multiple_choice_features.multiple_choice_feature_spec(inputs.num_choices,
                                                                 config.max_seq_length)

  def make_task(self, config, bert_config, inputs, drop_padding):
    return multiple_choice_task.MultipleChoiceTask(bert_config, drop_padding=drop_padding)

  def evaluate(self, config, inputs, run):
    scores, features = run.predict("eval", config.eval_batch_size,
                                   keep_features=("label_ids", "is_real_example"))
    losses = classifier.per_example_loss(classifier.CLASSIFICATION, scores,
                                         features["label_ids"]).numpy()
    return classifier.compute(
        classifier.CLASSIFICATION, scores, features["label_ids"],
        features["is_real_example"], losses)

  def metric_names(self, config, inputs):
    return classifier.reported_names(classifier.CLASSIFICATION)

  def predict(self, config, inputs, run):
    scores, features = run.predict("predict", config.predict_batch_size,
                                   keep_features=("label_ids", "is_real_example"))
    examples = inputs.splits["predict"][1]
    path = os.path.join(config.output_dir, PREDICTIONS_FILENAME)
    # Padding rows are the last rows of the file, so the real ones keep the input order.
    if run.trainer.is_chief:
      write_predictions(path, examples, scores[features["is_real_example"] > 0])
      logging.info("wrote %d predictions to %s", len(examples), path)

  def make_server(self, config, inputs, model, with_text):
    return multiple_choice_server.MultipleChoiceServer(
        model, config.vocab_file, config.do_lower_case, config.max_seq_length,
        with_text=with_text)
