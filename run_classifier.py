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

from absl import flags

from tasks import runner
from tasks.classification import processors as classifier_processors
from tasks.classification import spec
from training import flags as training_flags


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


if __name__ == "__main__":
  runner.run(spec.ClassificationSpec())
