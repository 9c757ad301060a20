"""`run_squad.py`'s part of a fine-tuning run: SQuAD JSON, windows of long contexts, the original's
answer selection, `predictions.json` / `nbest_predictions.json` / `null_odds.json`, the official
scores when the file has answers, the question-answering export."""

import dataclasses
import os
import random

from absl import logging

from base import errors
from data import file_patterns
from tasks import runner
from tasks.squad import features as squad_features
from tasks.squad import metrics as squad_metrics
from tasks.squad import postprocessing as squad_postprocessing
from tasks.squad import reader as squad_reader
from tasks.squad import server as squad_server
from tasks.squad import task as squad_task
from training import model_inputs

PREDICTIONS_FILENAME = "predictions.json"
NBEST_FILENAME = "nbest_predictions.json"
NULL_ODDS_FILENAME = "null_odds.json"
EVAL_RESULTS_JSON_FILENAME = "eval_results.json"
_VERBOSE_EXAMPLES = 20


@dataclasses.dataclass
class SquadInputs:
  """The questions of --train_file (shuffled) and of --predict_file, with its articles."""
  train_examples: list = None
  predict_examples: list = None
  predict_articles: list = None


def log_windows(features, examples):
  """--verbose_logging: what the windows of the first questions hold."""
  for feature in features:
    if feature.example_index >= _VERBOSE_EXAMPLES:
      return
    example = examples[feature.example_index]
    logging.info("question %s window %d: %s", example.qas_id, feature.doc_span_index,
                 " ".join(feature.tokens))
    logging.info("  pieces this window scores: %s", " ".join(
        str(position) for position, scored in feature.token_is_max_context.items() if scored))
    if feature.start_position is not None:
      answer = " ".join(feature.tokens[feature.start_position:feature.end_position + 1])
      logging.info("  answer positions %d-%d: %s", feature.start_position, feature.end_position,
                   answer if feature.start_position else "(none in this window)")


def has_answers(articles):
  """Whether every question of the file says what its answers are (so it can be scored)."""
  questions = [qa for article in articles for paragraph in article["paragraphs"]
               for qa in paragraph["qas"]]
  return bool(questions) and all("answers" in qa for qa in questions) and any(
      qa["answers"] for qa in questions)


class SquadSpec(runner.FineTuningSpec):
  """Extractive question answering, SQuAD 1.1 or 2.0 (--version_2_with_negative)."""
  example_unit = "windows"

  def read_inputs(self, config, bert_config):
    inputs = SquadInputs()
    if config.do_train:
      inputs.train_examples, _ = squad_reader.read_examples(
          config.train_file, is_training=True,
          version_2_with_negative=config.version_2_with_negative)
      if not inputs.train_examples:
        raise file_patterns.InputError(
            f"{config.train_file}: no question to train on (questions whose answer is not found "
            "in their context are skipped)")
      # Shuffled with the original's seed.
      random.Random(12345).shuffle(inputs.train_examples)
    if config.do_predict:
      inputs.predict_examples, inputs.predict_articles = squad_reader.read_examples(
          config.predict_file, is_training=False,
          version_2_with_negative=config.version_2_with_negative)
    return inputs

  def write_records(self, config, inputs, tokenizer):
    def convert(examples, is_training):
      return squad_features.convert_examples(
          examples, tokenizer, config.max_seq_length, config.doc_stride,
          config.max_query_length, is_training)

    records = {}
    if config.do_train:
      examples = inputs.train_examples
      if config.verbose_logging:
        log_windows(convert(examples[:_VERBOSE_EXAMPLES], True), examples)
      path = os.path.join(config.output_dir, "train.tf_record")
      num_windows = squad_features.write_records(path, convert(examples, True),
                                                 is_training=True)
      logging.info("%s: %d questions -> %d windows in %s", config.train_file,
                   len(examples), num_windows, path)
      records["train"] = runner.RecordFile(path, num_windows)
    if config.do_predict:
      examples = inputs.predict_examples
      features = list(convert(examples, False))
      if config.verbose_logging:
        log_windows(features, examples)
      path = os.path.join(config.output_dir, "eval.tf_record")
      squad_features.write_records(path, features, is_training=False)
      logging.info("%s: %d questions -> %d windows in %s", config.predict_file,
                   len(examples), len(features), path)
      records["predict"] = runner.RecordFile(path, len(features), features=features)
    return records

  def num_train_examples(self, inputs, records):
    # As the original, the step count is based on questions, not windows.
    return len(inputs.train_examples)

  def training_summary(self, inputs, records):
    return (f"Training on {records['train'].num_rows} windows of {len(inputs.train_examples)} "
            "questions")

  def feature_spec(self, config, inputs, split):
    return squad_features.squad_feature_spec(config.max_seq_length, is_training=split == "train")

  def make_task(self, config, bert_config, inputs, drop_padding):
    # The original's span loss is a softmax over every position, padding included: its model
    # computes them all.
    del drop_padding
    return squad_task.SquadTask(bert_config, config.max_seq_length)

  def _answer(self, config, inputs, run):
    """`(predictions, nbest, null_odds)` of the --predict_file questions by the current model."""
    features = run.records["predict"].features
    outputs, kept = run.predict("predict", config.predict_batch_size,
                                keep_features=("unique_ids",))
    logits_by_unique_id = {
        int(unique_id): (start, end) for unique_id, start, end in zip(
            kept["unique_ids"], outputs["start_logits"].tolist(),
            outputs["end_logits"].tolist())}
    return squad_postprocessing.predict_all(
        inputs.predict_examples, features, logits_by_unique_id,
        n_best_size=config.n_best_size, max_answer_length=config.max_answer_length,
        do_lower_case=config.do_lower_case,
        version_2_with_negative=config.version_2_with_negative,
        null_score_diff_threshold=config.null_score_diff_threshold)

  def _score(self, config, inputs, predictions, null_odds):
    """The official SQuAD figures of `predictions`."""
    return squad_metrics.evaluate(inputs.predict_articles, predictions,
                                  version_2=config.version_2_with_negative,
                                  na_probs=null_odds or None)

  def eval_data(self, config, inputs):
    """The --predict_file, when it has answers: SQuAD has no separate dev split."""
    if config.do_predict and has_answers(inputs.predict_articles):
      return "the --predict_file's answers"
    return None

  def metric_names(self, config, inputs):
    return {"exact", "f1"}

  def default_metric(self, config, inputs):
    return "f1"

  def evaluate(self, config, inputs, run):
    predictions, _, null_odds = self._answer(config, inputs, run)
    return {name: float(value) for name, value in
            self._score(config, inputs, predictions, null_odds).items()}

  def predict(self, config, inputs, run):
    """Answers the questions of --predict_file, writes the prediction files, scores them if the
    file has answers."""
    predictions, nbest, null_odds = self._answer(config, inputs, run)
    if not run.trainer.is_chief:
      return
    written = {PREDICTIONS_FILENAME: predictions, NBEST_FILENAME: nbest}
    if config.version_2_with_negative:
      written[NULL_ODDS_FILENAME] = null_odds
    for filename, value in written.items():
      squad_postprocessing.write_json(os.path.join(config.output_dir, filename), value)
    logging.info("wrote %s to %s", ", ".join(written), config.output_dir)

    if has_answers(inputs.predict_articles):
      results = self._score(config, inputs, predictions, null_odds)
      squad_postprocessing.write_json(
          os.path.join(config.output_dir, EVAL_RESULTS_JSON_FILENAME), results)
      run.trainer.record_eval_results({name: float(value) for name, value in results.items()})
    else:
      logging.info("%s has no answers: predictions not scored", config.predict_file)

  def make_server(self, config, inputs, model, with_text):
    return squad_server.SquadServer(
        model, config.vocab_file, config.do_lower_case,
        max_seq_length=config.max_seq_length, max_query_length=config.max_query_length,
        max_answer_length=config.max_answer_length, n_best_size=config.n_best_size,
        version_2_with_negative=config.version_2_with_negative,
        null_score_diff_threshold=config.null_score_diff_threshold, with_text=with_text)
