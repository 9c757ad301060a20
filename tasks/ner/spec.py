"""`run_ner.py`'s part of a fine-tuning run: CoNLL files, windows of whole sentences, entity-level
precision / recall / F1, the tagged copies of the files, the tagger export."""

import dataclasses
import os

from absl import logging
import numpy as np

from base import errors
from data import file_patterns
from tasks import runner
from tasks.ner import features as ner_features
from tasks.ner import metrics as ner_metrics
from tasks.ner import reader as ner_reader
from tasks.ner import server as tagger_server
from tasks.ner import task as tagging_task
from training import engine

PREDICTIONS_FILENAME = "predictions.txt"
DEV_PREDICTIONS_FILENAME = "dev_predictions.txt"
PREDICT_RESULTS_FILENAME = "predict_results.txt"
# Split -> (file flag, default file name in --data_dir, whether every line needs a tag).
SPLIT_FILES = {"train": ("train_file", "train.txt", True),
               "eval": ("dev_file", "dev.txt", True),
               "predict": ("predict_file", "test.txt", False)}


@dataclasses.dataclass
class NerInputs:
  """`{split: (path, sentences, layout)}` of the files read, and the label list."""
  splits: dict
  label_list: list


def data_file(config, split):
  """The file of a split: its flag, else its default name in --data_dir."""
  flag_name, default_name, _ = SPLIT_FILES[split]
  path = getattr(config, flag_name) or (os.path.join(config.data_dir, default_name)
                                          if config.data_dir else None)
  if path is None:
    raise errors.UsageError(f"--{flag_name} or --data_dir is required")
  return path


def label_list_from(sentences, path):
  """The training file's tags: O first, then sorted."""
  tags = {tag for sentence in sentences for tag in sentence.tags}
  if len(tags) < 2:
    raise file_patterns.InputError(f"{path}: needs at least 2 different tags, found {sorted(tags)}")
  return sorted(tags, key=lambda tag: (tag != "O", tag))


class NerSpec(runner.FineTuningSpec):
  """Named-entity recognition: a tag for the first piece of every word."""
  example_unit = "windows"

  def read_inputs(self, config, bert_config):
    # The tags: --labels, else the model's when the run does not train, else the training file's.
    given_labels = config.labels or runner.saved_label_list(config)
    needed = {"train": config.do_train or not given_labels,
              "eval": config.do_eval, "predict": config.do_predict}
    splits = {}
    for split, is_needed in needed.items():
      if is_needed:
        path = data_file(config, split)
        splits[split] = (path, *ner_reader.read_sentences(path, require_tags=SPLIT_FILES[split][2]))
    label_list = (list(given_labels) if given_labels
                  else label_list_from(splits["train"][1], splits["train"][0]))
    return NerInputs(splits, label_list)

  def label_list(self, config, inputs):
    return inputs.label_list

  def write_records(self, config, inputs, tokenizer):
    records = {}
    for split, (path, sentences, _) in inputs.splits.items():
      if split == "train" and not config.do_train:
        continue
      windows = ner_features.make_windows(sentences, tokenizer, config.max_seq_length,
                                          config.doc_context)
      record_path = os.path.join(config.output_dir, f"{split}.tf_record")
      ner_features.write_records(record_path, windows, sentences, tokenizer,
                                 config.max_seq_length, inputs.label_list)
      num_words = sum(len(s.words) for s in sentences)
      logging.info("%s: %d sentences, %d words -> %d windows in %s", path, len(sentences),
                   num_words, len(windows), record_path)
      records[split] = runner.RecordFile(record_path, len(windows), features=windows)
    return records

  def feature_spec(self, config, inputs, split):
    return ner_features.tagging_feature_spec(config.max_seq_length)

  def sequence_features(self, config, inputs):
    return tuple(self.feature_spec(config, inputs, "train"))

  def make_task(self, config, bert_config, inputs, drop_padding):
    return tagging_task.TaggingTask(bert_config, len(inputs.label_list),
                                    config.max_seq_length, drop_padding=drop_padding)

  def _tag(self, config, inputs, run, split, batch_size, output_filename):
    """Predicts a split, writes its tagged copy; returns (sentences, predicted tags, loss)."""
    _, sentences, layout = inputs.splits[split]
    windows = run.records[split].features
    outputs, _ = run.predict(split, batch_size)
    tags = ner_features.predicted_tags(windows, sentences, outputs["predicted_ids"],
                                       inputs.label_list)
    if run.trainer.is_chief:
      ner_reader.write_predictions(os.path.join(config.output_dir, output_filename),
                                   sentences, layout, tags)
    loss = float(np.sum(outputs["loss_sum"]) / max(np.sum(outputs["label_count"]), 1.0))
    return sentences, tags, loss

  def evaluate(self, config, inputs, run):
    sentences, tags, loss = self._tag(config, inputs, run, "eval",
                                      config.eval_batch_size, DEV_PREDICTIONS_FILENAME)
    results = ner_metrics.score([s.tags for s in sentences], tags)
    return dict(results, eval_loss=loss)

  def metric_names(self, config, inputs):
    return {*ner_metrics.POOLED_NAMES, "eval_loss"}

  def default_metric(self, config, inputs):
    return "f1"

  def predict(self, config, inputs, run):
    sentences, tags, _ = self._tag(config, inputs, run, "predict",
                                   config.predict_batch_size, PREDICTIONS_FILENAME)
    logging.info("wrote %s", os.path.join(config.output_dir, PREDICTIONS_FILENAME))
    if sentences[0].tags is not None and run.trainer.is_chief:
      results = ner_metrics.score([s.tags for s in sentences], tags)
      engine.write_eval_results(os.path.join(config.output_dir, PREDICT_RESULTS_FILENAME),
                                results)
      logging.info("Predict file scores: precision %.4f, recall %.4f, f1 %.4f",
                   results["precision"], results["recall"], results["f1"])

  def make_server(self, config, inputs, model, with_text):
    return tagger_server.TaggerServer(model, config.vocab_file, config.do_lower_case,
                                      inputs.label_list, config.max_seq_length,
                                      with_text=with_text)
