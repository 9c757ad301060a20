r"""Multiple choice (SWAG and your own JSON lines) in the style of the original's runners.

Each example is a context and N candidate continuations. Every (context, choice) pair is encoded as
`[CLS] context [SEP] choice [SEP]`, the pooled output of each pair is scored by one learned vector,
and a softmax over an example's N scores is trained with cross-entropy (the BERT paper's SWAG
setup; the original release had no such runner). Reads `--data_dir`'s files (SWAG: `train.csv`,
`val.csv`, `test.csv` of the public release, or JSON lines; `jsonl`: `train.jsonl`, `dev.jsonl`,
`test.jsonl`), writes `train/eval/predict.tf_record` into `--output_dir`, fine-tunes through the
shared engine, and writes `eval_results.txt` (`eval_accuracy`, `eval_loss`) and
`predictions.jsonl` (per test example: the scores and probabilities of its choices and the chosen
index, in input order).

Example:
  python run_multiple_choice.py --task_name=swag --data_dir=swagaf/data --do_train --do_eval \
      --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
      --init_checkpoint=$BERT_DIR/bert_model.ckpt --max_seq_length=80 --train_batch_size=16 \
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/swag_output
"""

import json
import os

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from base import atomic_files
from base import cli
from base import errors
from data import file_patterns
from data import label_kinds
from training import classification_metrics
from tasks.multiple_choice import reader as multiple_choice
from tasks.multiple_choice import features as multiple_choice_features
from data import schemas
from data import tokenization
from modeling import bert_config as bert_config_lib
from tasks.multiple_choice import server as multiple_choice_server
from training import classifier_task
from training import distribution
from training import engine
from training import fine_tuning
from training import flags as training_flags
from training import input_pipeline
from training import model_inputs
from tasks.multiple_choice import task as multiple_choice_task

FLAGS = flags.FLAGS

training_flags.define_fine_tuning_runner_flags(
    example_unit="Examples (each with all its choices)")
flags.DEFINE_string("data_dir", None, "Directory of the task's train/dev/test files (swag: "
                    "train.csv, val.csv, test.csv; jsonl: train.jsonl, dev.jsonl, test.jsonl).")
flags.DEFINE_string("task_name", None, f"One of {', '.join(multiple_choice.TASKS)}: the SWAG "
                    "release's CSV (or its fields as JSON lines), or JSON lines "
                    '{"context": ..., "choices": [...], "label": ...}.')
flags.DEFINE_string("train_file", None, "Training file (default: the task's train file in "
                    "--data_dir). swag: a .csv file is read as CSV, any other as JSON lines.")
flags.DEFINE_string("dev_file", None, "Evaluation file (default: the task's dev file in "
                    "--data_dir).")
flags.DEFINE_string("predict_file", None, "File to predict (default: the task's test file in "
                    "--data_dir); labels are optional.")
flags.mark_flags_as_required(["task_name", "vocab_file", "bert_config_file", "output_dir"])

PREDICTIONS_FILENAME = "predictions.jsonl"
# split -> (file flag, whether every example needs a label, action flag, record file name)
SPLITS = {"train": ("train_file", True, "do_train", "train.tf_record"),
          "dev": ("dev_file", True, "do_eval", "eval.tf_record"),
          "test": ("predict_file", False, "do_predict", "predict.tf_record")}


def check_flags(bert_config):
  fine_tuning.check_flags(FLAGS, bert_config)
  model_inputs.check_segments(2, bert_config, FLAGS.bert_config_file,
                              "each choice packs context and ending as two segments")
  if FLAGS.task_name.lower() not in multiple_choice.TASKS:
    raise errors.UsageError(f"--task_name={FLAGS.task_name}: unknown task; known tasks: "
                         f"{', '.join(multiple_choice.TASKS)}")
  if FLAGS.data_dir and not tf.io.gfile.isdir(FLAGS.data_dir):
    raise errors.UsageError(f"--data_dir={FLAGS.data_dir}: no such directory")


def split_path(split):
  """The file of a split: its flag, else the task's default name in --data_dir."""
  flag_name = SPLITS[split][0]
  if FLAGS[flag_name].value:
    return FLAGS[flag_name].value
  if not FLAGS.data_dir:
    raise errors.UsageError(f"--{flag_name} or --data_dir is required")
  return os.path.join(FLAGS.data_dir,
                      multiple_choice.DEFAULT_FILES[FLAGS.task_name.lower()][split])


def read_splits():
  """`({split: (path, examples)}, num_choices)` of the splits the run needs (num_choices None
  without any); every example must have the same number of choices (an error naming the file
  and line otherwise)."""
  splits, reference = {}, None
  for split, (_, labelled, action, _) in SPLITS.items():
    if not FLAGS[action].value:
      continue
    path = split_path(split)
    examples = multiple_choice.read_examples(FLAGS.task_name.lower(), path, split, labelled)
    if not examples:
      raise file_patterns.InputError(f"{path}: holds no example")
    multiple_choice.check_num_choices(examples, reference)
    reference = reference or examples[0]
    splits[split] = (path, examples)
  return splits, len(reference.choices) if reference else None


def write_predictions(path, examples, scores):
  """One JSON line per example: `scores`, `probabilities` (per choice), `choice`, and `label`
  when the example has one; written atomically.

  Args:
    path: the output file.
    examples: list of `MultipleChoiceExample`.
    scores: float `[num_examples, num_choices]`.
  """
  probabilities = classification_metrics.output_values(label_kinds.CLASSIFICATION,
                                                       scores)
  with atomic_files.open_for_writing(path) as f:
    for example, row_scores, row_probabilities in zip(examples, scores, probabilities):
      record = {"id": example.guid, "scores": [float(s) for s in row_scores],
                "probabilities": [float(p) for p in row_probabilities],
                "choice": int(np.argmax(row_scores))}
      if example.label is not None:
        record["label"] = example.label
      f.write(json.dumps(record) + "\n")


def main(argv):
  del argv
  bert_config = bert_config_lib.BertConfig.from_json_file(FLAGS.bert_config_file)
  check_flags(bert_config)
  tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  splits, num_choices = read_splits()
  tf.io.gfile.makedirs(FLAGS.output_dir)

  # Every record file is written before training starts.
  batch_sizes = {"train": 1, "dev": FLAGS.eval_batch_size, "test": FLAGS.predict_batch_size}
  records, num_records = {}, {}
  for split, (path, examples) in splits.items():
    records[split] = os.path.join(FLAGS.output_dir, SPLITS[split][3])
    num_real, num_padding = multiple_choice_features.write_records(
        records[split], examples, tokenizer, FLAGS.max_seq_length, batch_sizes[split])
    num_records[split] = num_real + num_padding
    logging.info("%s: %d examples of %d choices + %d padding rows -> %s", path, num_real,
                 num_choices, num_padding, records[split])

  num_train_steps, num_warmup_steps = fine_tuning.train_steps(
      FLAGS, len(splits["train"][1]) if FLAGS.do_train else 0)
  strategy = distribution.strategy_from_flags(FLAGS)
  dynamic_padding = training_flags.dynamic_padding_from_flags(FLAGS, strategy)
  spec = (schemas.multiple_choice_feature_spec(num_choices, FLAGS.max_seq_length)
          if num_choices else None)
  run_config = training_flags.run_config_from_flags(
      FLAGS, num_train_steps, FLAGS.train_batch_size, FLAGS.eval_batch_size)
  trainer = engine.Trainer(strategy, multiple_choice_task.MultipleChoiceTask(bert_config),
                           run_config,
                           fine_tuning.optimizer_fn(FLAGS, num_train_steps, num_warmup_steps))

  if FLAGS.do_train:
    logging.info("Training on %d examples, batch size %d, %d steps (%d warmup), dynamic "
                 "padding %s", len(splits["train"][1]), FLAGS.train_batch_size, num_train_steps,
                 num_warmup_steps, "on" if dynamic_padding else "off")
    trainer.train(input_pipeline.make_input_fn(
        [records["train"]], spec, FLAGS.train_batch_size, is_training=True,
        dynamic_padding=dynamic_padding, seed=FLAGS.seed))

  def predict(split):
    dataset = input_pipeline.make_dataset([records[split]], spec, batch_sizes[split],
                                          is_training=False, drop_remainder=False,
                                          dynamic_padding=dynamic_padding)
    return trainer.predict(dataset, keep_features=("label_ids", "is_real_example"),
                           num_examples=num_records[split])

  if FLAGS.do_eval:
    scores, features = predict("dev")
    losses = classifier_task.per_example_loss(label_kinds.CLASSIFICATION, scores,
                                              features["label_ids"]).numpy()
    trainer.record_eval_results(classification_metrics.compute(
        label_kinds.CLASSIFICATION, scores, features["label_ids"],
        features["is_real_example"], losses))
  if FLAGS.do_predict:
    scores, features = predict("test")
    path = os.path.join(FLAGS.output_dir, PREDICTIONS_FILENAME)
    # Padding rows are the last rows of the file, so the real ones keep the input order.
    if trainer.is_chief:
      write_predictions(path, splits["test"][1], scores[features["is_real_example"] > 0])
      logging.info("wrote %d predictions to %s", len(splits["test"][1]), path)
  if FLAGS.export_dir:
    fine_tuning.export(trainer, FLAGS,
                       lambda model, with_text: multiple_choice_server.MultipleChoiceServer(
                           model, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                           with_text=with_text))

if __name__ == "__main__":
  cli.run(main)
