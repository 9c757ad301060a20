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

from base import cli
from tasks import runner
from tasks.classification.config import ClassificationConfig

if __name__ == "__main__":
  cli.run_config(ClassificationConfig, runner.run)
