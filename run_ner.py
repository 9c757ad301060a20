r"""Named-entity recognition on CoNLL column files, in the style of the original's runners.

Reads `train.txt` / `dev.txt` / `test.txt` from `--data_dir` (or `--train_file`, `--dev_file`,
`--predict_file`): a token first and its tag last on each line, IOB1, IOB2 or IOBES. Each word's
first word piece carries its label; long sentences are split into several windows, never cut.
Fine-tunes through the shared engine, writes `eval_results.txt` with conlleval's entity-level
precision / recall / F1 (pooled and per type), token accuracy and loss, and `predictions.txt`: the
test file's lines with the predicted tag appended, which conlleval can score.

Example:
  python run_ner.py --data_dir=conll2003 --do_train --do_eval --do_predict \
      --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
      --init_checkpoint=$BERT_DIR/bert_model.ckpt --do_lower_case=false --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3 --output_dir=/tmp/ner
"""

import os

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from base import cli
from base import errors
from tasks.ner import conll
from data import file_patterns
from tasks.ner import features as ner_features
from tasks.ner import metrics as ner_metrics
from data import schemas
from data import tokenization
from modeling import bert_config as bert_config_lib
from tasks.ner import server as tagger_server
from training import distribution
from training import engine
from training import fine_tuning
from training import flags as training_flags
from training import input_pipeline
from tasks.ner import task as tagging_task

FLAGS = flags.FLAGS

training_flags.define_fine_tuning_runner_flags(example_unit="Windows")
flags.DEFINE_string("data_dir", None, "Directory with train.txt, dev.txt and test.txt.")
flags.DEFINE_string("train_file", None, "Training file (default: <data_dir>/train.txt).")
flags.DEFINE_string("dev_file", None, "Evaluation file (default: <data_dir>/dev.txt).")
flags.DEFINE_string("predict_file", None, "File to tag (default: <data_dir>/test.txt); it may "
                    "have the token column only.")
flags.DEFINE_list("labels", None, "The tags, in label-id order; default the tags of the "
                  "training file (O first, then sorted).")
flags.DEFINE_bool("doc_context", False, "Fill each window with the neighbouring sentences of "
                  "the same -DOCSTART- document (unlabelled), as the BERT paper's NER setting.")
flags.mark_flags_as_required(["bert_config_file", "vocab_file", "output_dir"])

PREDICTIONS_FILENAME = "predictions.txt"
DEV_PREDICTIONS_FILENAME = "dev_predictions.txt"
PREDICT_RESULTS_FILENAME = "predict_results.txt"


def data_file(flag_name, default_name):
  path = FLAGS[flag_name].value or (os.path.join(FLAGS.data_dir, default_name)
                                     if FLAGS.data_dir else None)
  if path is None:
    raise errors.UsageError(f"--{flag_name} or --data_dir is required")
  return path


def label_list_from(sentences, path):
  """`--labels`, else the training file's tags: O first, then sorted."""
  if FLAGS.labels:
    return list(FLAGS.labels)
  tags = {tag for sentence in sentences for tag in sentence.tags}
  if len(tags) < 2:
    raise file_patterns.InputError(f"{path}: needs at least 2 different tags, found {sorted(tags)}")
  return sorted(tags, key=lambda tag: (tag != "O", tag))


def main(argv):
  del argv
  bert_config = bert_config_lib.BertConfig.from_json_file(FLAGS.bert_config_file)
  fine_tuning.check_flags(FLAGS, bert_config)
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  tf.io.gfile.makedirs(FLAGS.output_dir)

  splits = {}  # name -> (path, sentences, layout)
  if FLAGS.do_train or not FLAGS.labels:
    path = data_file("train_file", "train.txt")
    splits["train"] = (path, *conll.read_sentences(path))
  if FLAGS.do_eval:
    path = data_file("dev_file", "dev.txt")
    splits["eval"] = (path, *conll.read_sentences(path))
  if FLAGS.do_predict:
    path = data_file("predict_file", "test.txt")
    splits["predict"] = (path, *conll.read_sentences(path, require_tags=False))
  label_list = (label_list_from(splits["train"][1], splits["train"][0]) if "train" in splits
                else list(FLAGS.labels))
  fine_tuning.write_label_list(FLAGS.output_dir, label_list)

  # Every record file is written (and every tag checked) before training starts.
  windows = {}
  for name, (path, sentences, _) in splits.items():
    if name == "train" and not FLAGS.do_train:
      continue
    windows[name] = ner_features.make_windows(sentences, tokenizer, FLAGS.max_seq_length,
                                              FLAGS.doc_context)
    record_path = os.path.join(FLAGS.output_dir, f"{name}.tf_record")
    ner_features.write_records(record_path, windows[name], sentences, tokenizer,
                               FLAGS.max_seq_length, label_list)
    num_words = sum(len(s.words) for s in sentences)
    logging.info("%s: %d sentences, %d words -> %d windows in %s", path, len(sentences),
                 num_words, len(windows[name]), record_path)

  num_train_steps, num_warmup_steps = fine_tuning.train_steps(
      FLAGS, len(windows["train"]) if FLAGS.do_train else 0)
  strategy = distribution.strategy_from_flags(FLAGS)
  dynamic_padding = training_flags.dynamic_padding_from_flags(FLAGS, strategy)
  spec = schemas.tagging_feature_spec(FLAGS.max_seq_length)
  sequence_features = tuple(spec)
  run_config = training_flags.run_config_from_flags(
      FLAGS, num_train_steps, FLAGS.train_batch_size, FLAGS.eval_batch_size)

  trainer = engine.Trainer(
      strategy, tagging_task.TaggingTask(bert_config, len(label_list), FLAGS.max_seq_length),
      run_config, fine_tuning.optimizer_fn(FLAGS, num_train_steps, num_warmup_steps))

  if FLAGS.do_train:
    logging.info("Training on %d windows, batch size %d, %d steps (%d warmup), dynamic "
                 "padding %s", len(windows["train"]), FLAGS.train_batch_size, num_train_steps,
                 num_warmup_steps, "on" if dynamic_padding else "off")
    trainer.train(input_pipeline.make_input_fn(
        [os.path.join(FLAGS.output_dir, "train.tf_record")], spec, FLAGS.train_batch_size,
        is_training=True, dynamic_padding=dynamic_padding, sequence_features=sequence_features,
        seed=FLAGS.seed))

  def tag(name, batch_size, output_filename):
    """Predicts a split, writes its tagged copy; returns (gold sentences' tags, predicted, loss)."""
    path, sentences, layout = splits[name]
    dataset = input_pipeline.make_dataset(
        [os.path.join(FLAGS.output_dir, f"{name}.tf_record")], spec, batch_size,
        is_training=False, drop_remainder=False, dynamic_padding=dynamic_padding,
        sequence_features=sequence_features)
    outputs, _ = trainer.predict(dataset, num_examples=len(windows[name]))
    tags = ner_features.predicted_tags(windows[name], sentences, outputs["predicted_ids"],
                                       label_list)
    if trainer.is_chief:
      conll.write_predictions(os.path.join(FLAGS.output_dir, output_filename), sentences, layout,
                              tags)
    loss = float(np.sum(outputs["loss_sum"]) / max(np.sum(outputs["label_count"]), 1.0))
    return sentences, tags, loss

  if FLAGS.do_eval:
    sentences, tags, loss = tag("eval", FLAGS.eval_batch_size, DEV_PREDICTIONS_FILENAME)
    results = ner_metrics.score([s.tags for s in sentences], tags)
    trainer.record_eval_results(dict(results, eval_loss=loss))
  if FLAGS.do_predict:
    sentences, tags, _ = tag("predict", FLAGS.predict_batch_size, PREDICTIONS_FILENAME)
    logging.info("wrote %s", os.path.join(FLAGS.output_dir, PREDICTIONS_FILENAME))
    if sentences[0].tags is not None and trainer.is_chief:
      results = ner_metrics.score([s.tags for s in sentences], tags)
      engine.write_eval_results(os.path.join(FLAGS.output_dir, PREDICT_RESULTS_FILENAME),
                                results)
      logging.info("Predict file scores: precision %.4f, recall %.4f, f1 %.4f",
                   results["precision"], results["recall"], results["f1"])
  if FLAGS.export_dir:
    fine_tuning.export(trainer, FLAGS, lambda model, with_text: tagger_server.TaggerServer(
        model, FLAGS.vocab_file, FLAGS.do_lower_case, label_list, FLAGS.max_seq_length,
        with_text=with_text))


if __name__ == "__main__":
  cli.run(main)
