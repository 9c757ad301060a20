r"""Extractive question answering on SQuAD v1.1 / v2.0, as the original `run_squad.py`.

Reads the official nested JSON, writes `train.tf_record` / `eval.tf_record` into `--output_dir`
in the original's format (question + sliding windows over the context), fine-tunes through the
shared engine (one device, GPUs, hosts or a TPU; resumable), and with `--do_predict` writes
`predictions.json`, `nbest_predictions.json` and, with `--version_2_with_negative`,
`null_odds.json`. When the predict file has answers, it is also scored by the official SQuAD rules
(exact match and F1; for v2.0 HasAns / NoAns and the best null threshold): `eval_results.json`.
With `--export_dir` it writes a SavedModel for TensorFlow Serving (question and context in, answer
and its character offsets out; `serving/squad_server.py`), after training or from the checkpoint
in `--output_dir` / `--init_checkpoint` alone.

Example:
  python run_squad.py --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --do_train --train_file=$SQUAD_DIR/train-v1.1.json --do_predict \
      --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 --learning_rate=3e-5 \
      --num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad
"""

import os
import random

from absl import flags
from absl import logging
import tensorflow as tf

from base import cli
from base import errors
from data import schemas
from tasks.squad import examples as squad_examples
from tasks.squad import features as squad_features
from tasks.squad import metrics as squad_metrics
from tasks.squad import postprocessing as squad_postprocessing
from data import tokenization
from modeling import bert_config as bert_config_lib
from tasks.squad import server as squad_server
from training import distribution
from training import engine
from training import fine_tuning
from training import flags as training_flags
from training import input_pipeline
from training import model_inputs
from tasks.squad import task as squad_task

FLAGS = flags.FLAGS

training_flags.define_fine_tuning_runner_flags(example_unit="Windows", max_seq_length=384,
                                              with_eval=False)
flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON for predictions, e.g. dev-v1.1.json; "
                    "scored when it has answers.")
flags.DEFINE_integer("doc_stride", 128, "How far each window of a long context starts after the "
                     "previous one, in word pieces.")
flags.DEFINE_integer("max_query_length", 64, "Question word pieces kept (the rest is cut).")
flags.DEFINE_integer("n_best_size", 20, "Start and end candidates per window, and length of the "
                     "n-best lists in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in word pieces.")
flags.DEFINE_bool("verbose_logging", False, "Log the windows of the first 20 questions (pieces, "
                  "which window scores each piece, the answer span).")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: some questions have no answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "v2.0: answer \"\" when the null score "
                   "exceeds the best span's score by more than this.")
flags.mark_flags_as_required(["vocab_file", "bert_config_file", "output_dir"])

PREDICTIONS_FILENAME = "predictions.json"
NBEST_FILENAME = "nbest_predictions.json"
NULL_ODDS_FILENAME = "null_odds.json"
EVAL_RESULTS_JSON_FILENAME = "eval_results.json"
_VERBOSE_EXAMPLES = 20


def check_flags(bert_config):
  """The original's checks (plus the shared fine-tuning ones), before any file is read."""
  if FLAGS.do_train and not FLAGS.train_file:
    raise errors.UsageError("--do_train needs --train_file")
  if FLAGS.do_predict and not FLAGS.predict_file:
    raise errors.UsageError("--do_predict needs --predict_file")
  fine_tuning.check_flags(FLAGS, bert_config)
  model_inputs.check_segments(2, bert_config, FLAGS.bert_config_file,
                              "SQuAD packs question and context as two segments")
  if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
    raise errors.UsageError(
        f"--max_seq_length={FLAGS.max_seq_length} leaves no room for the context: it must be "
        f"more than --max_query_length + 3 = {FLAGS.max_query_length + 3}")
  for name in ("doc_stride", "n_best_size", "max_answer_length"):
    if FLAGS[name].value <= 0:
      raise errors.UsageError(f"--{name} must be positive, got {FLAGS[name].value}")


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


def convert(examples, tokenizer, is_training):
  return squad_features.convert_examples(examples, tokenizer, FLAGS.max_seq_length,
                                         FLAGS.doc_stride, FLAGS.max_query_length, is_training)


def read_training_examples():
  """The training questions, shuffled (seed 12345) as the original."""
  examples, _ = squad_examples.read_examples(FLAGS.train_file, is_training=True,
                                             version_2_with_negative=FLAGS.version_2_with_negative)
  random.Random(12345).shuffle(examples)
  return examples


def write_training_records(examples, tokenizer):
  """Writes the windows of the training questions to `train.tf_record`.

  Returns:
    `(path, number of windows)`.
  """
  if FLAGS.verbose_logging:
    log_windows(convert(examples[:_VERBOSE_EXAMPLES], tokenizer, True), examples)
  path = os.path.join(FLAGS.output_dir, "train.tf_record")
  num_windows = squad_features.write_records(path, convert(examples, tokenizer, True),
                                             is_training=True)
  logging.info("%s: %d questions -> %d windows in %s", FLAGS.train_file, len(examples),
               num_windows, path)
  return path, num_windows


def has_answers(articles):
  """Whether every question of the file says what its answers are (so it can be scored)."""
  questions = [qa for article in articles for paragraph in article["paragraphs"]
               for qa in paragraph["qas"]]
  return bool(questions) and all("answers" in qa for qa in questions) and any(
      qa["answers"] for qa in questions)


def write_predict_records(examples, tokenizer):
  """Writes the windows of the --predict_file questions to `eval.tf_record`.

  Returns:
    `(path, features)`.
  """
  features = list(convert(examples, tokenizer, False))
  if FLAGS.verbose_logging:
    log_windows(features, examples)
  path = os.path.join(FLAGS.output_dir, "eval.tf_record")
  squad_features.write_records(path, features, is_training=False)
  logging.info("%s: %d questions -> %d windows in %s", FLAGS.predict_file, len(examples),
               len(features), path)
  return path, features


def predict(trainer, predict_data, dynamic_padding):
  """Answers the questions of --predict_file, writes the prediction files, scores them if the
  file has answers.

  Args:
    predict_data: `(examples, articles, record path, features)` of --predict_file.
  """
  examples, articles, path, features = predict_data
  dataset = input_pipeline.make_dataset(
      [path], schemas.squad_feature_spec(FLAGS.max_seq_length, is_training=False),
      FLAGS.predict_batch_size, is_training=False, drop_remainder=False,
      dynamic_padding=dynamic_padding)
  outputs, kept = trainer.predict(dataset, keep_features=("unique_ids",),
                                  num_examples=len(features))
  logits_by_unique_id = {
      int(unique_id): (start, end) for unique_id, start, end in zip(
          kept["unique_ids"], outputs["start_logits"].tolist(), outputs["end_logits"].tolist())}
  predictions, nbest, null_odds = squad_postprocessing.predict_all(
      examples, features, logits_by_unique_id, n_best_size=FLAGS.n_best_size,
      max_answer_length=FLAGS.max_answer_length, do_lower_case=FLAGS.do_lower_case,
      version_2_with_negative=FLAGS.version_2_with_negative,
      null_score_diff_threshold=FLAGS.null_score_diff_threshold)
  if not trainer.is_chief:
    return
  written = {PREDICTIONS_FILENAME: predictions, NBEST_FILENAME: nbest}
  if FLAGS.version_2_with_negative:
    written[NULL_ODDS_FILENAME] = null_odds
  for filename, value in written.items():
    squad_postprocessing.write_json(os.path.join(FLAGS.output_dir, filename), value)
  logging.info("wrote %s to %s", ", ".join(written), FLAGS.output_dir)

  if has_answers(articles):
    results = squad_metrics.evaluate(articles, predictions,
                                     version_2=FLAGS.version_2_with_negative,
                                     na_probs=null_odds or None)
    squad_postprocessing.write_json(
        os.path.join(FLAGS.output_dir, EVAL_RESULTS_JSON_FILENAME), results)
    trainer.record_eval_results({name: float(value) for name, value in results.items()})
  else:
    logging.info("%s has no answers: predictions not scored", FLAGS.predict_file)


def main(argv):
  del argv
  bert_config = bert_config_lib.BertConfig.from_json_file(FLAGS.bert_config_file)
  check_flags(bert_config)
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)

  # Both files are read and every question checked before any record file is written.
  if FLAGS.do_train:
    train_examples = read_training_examples()
  if FLAGS.do_predict:
    predict_examples, predict_articles = squad_examples.read_examples(
        FLAGS.predict_file, is_training=False,
        version_2_with_negative=FLAGS.version_2_with_negative)
  tf.io.gfile.makedirs(FLAGS.output_dir)
  if FLAGS.do_train:
    num_questions = len(train_examples)
    train_path, num_windows = write_training_records(train_examples, tokenizer)
  if FLAGS.do_predict:
    predict_data = (predict_examples, predict_articles,
                    *write_predict_records(predict_examples, tokenizer))
  # As the original, the step count is based on questions, not windows.
  num_train_steps, num_warmup_steps = fine_tuning.train_steps(
      FLAGS, num_questions if FLAGS.do_train else 0)
  strategy = distribution.strategy_from_flags(FLAGS)
  dynamic_padding = training_flags.dynamic_padding_from_flags(FLAGS, strategy)
  run_config = training_flags.run_config_from_flags(
      FLAGS, num_train_steps, FLAGS.train_batch_size, FLAGS.predict_batch_size)
  trainer = engine.Trainer(strategy, squad_task.SquadTask(bert_config, FLAGS.max_seq_length),
                           run_config,
                           fine_tuning.optimizer_fn(FLAGS, num_train_steps, num_warmup_steps))

  if FLAGS.do_train:
    logging.info("Training on %d windows of %d questions, batch size %d, %d steps (%d warmup), "
                 "dynamic padding %s", num_windows, num_questions, FLAGS.train_batch_size,
                 num_train_steps, num_warmup_steps, "on" if dynamic_padding else "off")
    trainer.train(input_pipeline.make_input_fn(
        [train_path], schemas.squad_feature_spec(FLAGS.max_seq_length, is_training=True),
        FLAGS.train_batch_size, is_training=True, dynamic_padding=dynamic_padding,
        seed=FLAGS.seed))
  if FLAGS.do_predict:
    predict(trainer, predict_data, dynamic_padding)
  if FLAGS.export_dir:
    fine_tuning.export(trainer, FLAGS, lambda model, with_text: squad_server.SquadServer(
        model, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
        FLAGS.max_query_length, FLAGS.max_answer_length, FLAGS.n_best_size,
        FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold, with_text=with_text))


if __name__ == "__main__":
  cli.run(main)
