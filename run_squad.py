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

from base import cli
from tasks import runner
from tasks.squad.config import SquadConfig

if __name__ == "__main__":
  cli.run_config(SquadConfig, runner.run)
