r"""Extractive question answering on SQuAD v1.1 / v2.0, as the original `run_squad.py`.

Reads the official nested JSON, writes `train.tf_record` / `eval.tf_record` into `--output_dir`
in the original's format (question + sliding windows over the context), fine-tunes through the
shared engine (one device, GPUs, hosts or a TPU; resumable), and with `--do_predict` writes
`predictions.json`, `nbest_predictions.json` and, with `--version_2_with_negative`,
`null_odds.json`. When the predict file has answers, it is also scored by the official SQuAD rules
(exact match and F1; for v2.0 HasAns / NoAns and the best null threshold): `eval_results.json`.
With `--export_dir` it writes a SavedModel for TensorFlow Serving (question and context in, answer
and its character offsets out; `tasks/squad/server.py`), after training or from the checkpoint
in `--output_dir` / `--init_checkpoint` alone.

Example:
  python run_squad.py --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --do_train --train_file=$SQUAD_DIR/train-v1.1.json --do_predict \
      --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 --learning_rate=3e-5 \
      --num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad
"""

from absl import flags

from tasks import runner
from tasks.squad import spec
from training import flags as training_flags

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


if __name__ == "__main__":
  runner.run(spec.SquadSpec())
