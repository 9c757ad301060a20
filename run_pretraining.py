r"""Masked-LM and next-sentence pretraining, as the original `run_pretraining.py`.

Reads the TFRecords of `create_pretraining_data.py`, trains on one device, several GPUs, several
hosts or a TPU through one custom training loop, checkpoints in the original variable names into
`--output_dir` and resumes from there, and writes `eval_results.txt` with `--do_eval`.

Example:
  python run_pretraining.py --input_file='data/*.tfrecord' --output_dir=pretraining_output \
      --do_train --do_eval --bert_config_file=$BERT_DIR/bert_config.json \
      --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20 \
      --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5
"""

from base import cli
from tasks.pretraining import runner
from tasks.pretraining.config import PretrainingConfig

if __name__ == "__main__":
  cli.run_config(PretrainingConfig, runner.run)
