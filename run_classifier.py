r"""Sentence and sentence-pair classification (and regression), as the original `run_classifier.py`.

Reads a GLUE task, XNLI, or your own TSV/CSV files from `--data_dir`, writes `train.tf_record`,
`eval.tf_record` and `predict.tf_record` into `--output_dir` in the original's format, fine-tunes
through the shared training engine (one device, GPUs, hosts or a TPU; resumable), and writes
`eval_results.txt` (accuracy and loss, plus F1 / Matthews correlation / Pearson and Spearman /
per-class precision and recall as the task calls for) and `test_results.tsv` (one line of class
probabilities per test example, in input order).

Example:
  python run_classifier.py --task_name=MRPC --do_train --do_eval --data_dir=glue/MRPC \
      --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
      --init_checkpoint=$BERT_DIR/bert_model.ckpt --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/mrpc_output

  Your own data (`my_data/train.csv`, `dev.csv`, `test.csv` with a header row):
  python run_classifier.py --task_name=csv --text_a_column=review --label_column=stars ...
"""

import os

from absl import flags
from absl import logging
import tensorflow as tf

from base import atomic_files
from base import cli
from base import errors
from data import label_kinds
from training import classification_metrics
from tasks.classification import features as classifier_features
from tasks.classification import processors as classifier_processors
from data import file_patterns
from data import tokenization
from modeling import bert_config as bert_config_lib
from tasks.classification import server as classifier_server
from training import classifier_task
from training import distribution
from training import engine
from training import fine_tuning
from training import flags as training_flags
from training import input_pipeline
from training import model_inputs

FLAGS = flags.FLAGS

training_flags.define_fine_tuning_runner_flags()
flags.DEFINE_string("data_dir", None, "Directory of the task's train/dev/test files.")
flags.DEFINE_string("task_name", None,
                    f"One of {', '.join(classifier_processors.task_names())} (case-insensitive).")
flags.DEFINE_string("xnli_language", "zh", "Language of the XNLI train and dev files (the "
                    "original hard-coded zh).")
flags.DEFINE_string("text_a_column", "sentence",
                    "tsv/csv tasks: column of the first text (header name or 0-based index).")
flags.DEFINE_string("text_b_column", None,
                    "tsv/csv tasks: column of the second text of a pair, if any.")
flags.DEFINE_string("label_column", "label", "tsv/csv tasks: column of the label.")
flags.DEFINE_bool("has_header", True, "tsv/csv tasks: the first line names the columns.")
flags.DEFINE_list("label_list", None, "tsv/csv tasks: the labels, in class-id order; default the "
                  "sorted labels of the training file.")
flags.DEFINE_bool("multi_label", False, "tsv/csv tasks: several labels per row (sigmoid "
                  "outputs), joined by --label_separator.")
flags.DEFINE_string("label_separator", ",", "tsv/csv tasks: separator of the labels of a row "
                    "with --multi_label.")
flags.DEFINE_bool("regression", False, "tsv/csv tasks: the label is a number (one output, "
                  "mean-squared-error loss).")
flags.mark_flags_as_required(
    ["data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir"])

TEST_RESULTS_FILENAME = "test_results.tsv"


def make_processor():
  """The processor of --task_name; a UsageError listing the known tasks otherwise."""
  name = FLAGS.task_name.lower()
  if name in classifier_processors.GENERIC_TASKS:
    if FLAGS.multi_label and FLAGS.regression:
      raise errors.UsageError("--multi_label and --regression exclude each other")
    return classifier_processors.GenericProcessor(
        name, FLAGS.text_a_column, FLAGS.text_b_column, FLAGS.label_column, FLAGS.has_header,
        FLAGS.label_list, FLAGS.multi_label, FLAGS.label_separator, FLAGS.regression)
  processors = classifier_processors.glue_processors(FLAGS.xnli_language)
  if name not in processors:
    raise errors.UsageError(f"--task_name={FLAGS.task_name}: unknown task; known tasks: "
                         f"{', '.join(classifier_processors.task_names())}")
  return processors[name]


def check_flags(bert_config):
  fine_tuning.check_flags(FLAGS, bert_config)
  if not tf.io.gfile.isdir(FLAGS.data_dir):
    raise errors.UsageError(f"--data_dir={FLAGS.data_dir}: no such directory")


def read_examples(processor, split, bert_config):
  """The examples of a split; an error naming the file when it holds none, or sentence pairs
  that the config's segment table cannot take."""
  examples = getattr(processor, f"get_{split}_examples")(FLAGS.data_dir)
  if not examples:
    raise file_patterns.InputError(f"{FLAGS.data_dir}: the {split} file of task "
                                   f"{processor.name!r} holds no example")
  if any(example.text_b is not None for example in examples):
    model_inputs.check_segments(2, bert_config, FLAGS.bert_config_file,
                                f"the {split} examples of task {processor.name!r} are sentence "
                                "pairs")
  return examples


def write_test_results(path, values):
  """One tab-separated line of floats per example (the original's `test_results.tsv`)."""
  with atomic_files.open_for_writing(path) as f:
    for row in values:
      f.write("\t".join(str(float(value)) for value in row) + "\n")


def main(argv):
  del argv
  bert_config = bert_config_lib.BertConfig.from_json_file(FLAGS.bert_config_file)
  check_flags(bert_config)
  processor = make_processor()
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  tf.io.gfile.makedirs(FLAGS.output_dir)

  infers_labels = (isinstance(processor, classifier_processors.GenericProcessor)
                   and not FLAGS.label_list)
  train_examples = None
  if FLAGS.do_train or infers_labels:
    train_examples = read_examples(processor, "train", bert_config)
    if infers_labels:
      processor.infer_labels(train_examples)
  kind = processor.kind
  label_list = processor.get_labels()
  if kind != label_kinds.REGRESSION and len(label_list) < 2:
    raise file_patterns.InputError(f"task {processor.name!r}: needs at least 2 labels, found "
                                   f"{label_list}")
  fine_tuning.write_label_list(FLAGS.output_dir, label_list)

  # Every record file is written (and every label checked) before training starts.
  def write(split_name, examples, batch_size):
    path = os.path.join(FLAGS.output_dir, f"{split_name}.tf_record")
    num_real, num_padding = classifier_features.write_records(
        path, examples, tokenizer, FLAGS.max_seq_length, kind, label_list, batch_size)
    logging.info("%s: %d examples + %d padding rows", path, num_real, num_padding)
    return path, num_real, num_real + num_padding

  files = {}
  if FLAGS.do_train:
    files["train"] = write("train", train_examples, batch_size=1)
  if FLAGS.do_eval:
    files["eval"] = write("eval", read_examples(processor, "dev", bert_config),
                          FLAGS.eval_batch_size)
  if FLAGS.do_predict:
    files["predict"] = write("predict", read_examples(processor, "test", bert_config),
                             FLAGS.predict_batch_size)

  num_train_steps, num_warmup_steps = fine_tuning.train_steps(
      FLAGS, files["train"][1] if FLAGS.do_train else 0)
  strategy = distribution.strategy_from_flags(FLAGS)
  dynamic_padding = training_flags.dynamic_padding_from_flags(FLAGS, strategy)
  spec = classifier_features.feature_spec(FLAGS.max_seq_length, kind, len(label_list))
  run_config = training_flags.run_config_from_flags(
      FLAGS, num_train_steps, FLAGS.train_batch_size, FLAGS.eval_batch_size)
  task = classifier_task.ClassifierTask(bert_config, kind, len(label_list))
  trainer = engine.Trainer(strategy, task, run_config,
                           fine_tuning.optimizer_fn(FLAGS, num_train_steps, num_warmup_steps))

  if FLAGS.do_train:
    logging.info("Training on %d examples, batch size %d, %d steps (%d warmup), dynamic "
                 "padding %s", files["train"][1], FLAGS.train_batch_size, num_train_steps,
                 num_warmup_steps, "on" if dynamic_padding else "off")
    trainer.train(input_pipeline.make_input_fn(
        [files["train"][0]], spec, FLAGS.train_batch_size, is_training=True,
        dynamic_padding=dynamic_padding, seed=FLAGS.seed))

  def predict(split_name, batch_size):
    dataset = input_pipeline.make_dataset([files[split_name][0]], spec, batch_size,
                                          is_training=False, drop_remainder=False,
                                          dynamic_padding=dynamic_padding)
    return trainer.predict(dataset, keep_features=("label_ids", "is_real_example"),
                           num_examples=files[split_name][2])

  if FLAGS.do_eval:
    logits, features = predict("eval", FLAGS.eval_batch_size)
    losses = classifier_task.per_example_loss(kind, logits, features["label_ids"]).numpy()
    trainer.record_eval_results(classification_metrics.compute(
        kind, logits, features["label_ids"], features["is_real_example"], losses, label_list,
        processor.metrics))
  if FLAGS.do_predict:
    logits, features = predict("predict", FLAGS.predict_batch_size)
    # Padding rows are the last rows of the file, so the real ones keep the input order.
    values = classification_metrics.output_values(kind, logits)[features["is_real_example"] > 0]
    path = os.path.join(FLAGS.output_dir, TEST_RESULTS_FILENAME)
    if trainer.is_chief:
      write_test_results(path, values)
      logging.info("wrote %d predictions to %s", len(values), path)
  if FLAGS.export_dir:
    fine_tuning.export(trainer, FLAGS, lambda model, with_text: classifier_server.ClassifierServer(
        model, FLAGS.vocab_file, FLAGS.do_lower_case, label_list, kind, FLAGS.max_seq_length,
        has_pairs=processor.has_pairs, with_text=with_text))


if __name__ == "__main__":
  cli.run(main)
