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

from absl import flags

from tasks import runner
from tasks.multiple_choice import reader as multiple_choice
from tasks.multiple_choice import spec
from training import flags as training_flags

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


if __name__ == "__main__":
  runner.run(spec.MultipleChoiceSpec())
