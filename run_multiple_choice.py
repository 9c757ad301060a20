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

from base import cli
from tasks import runner
from tasks.multiple_choice.config import MultipleChoiceConfig

if __name__ == "__main__":
  cli.run_config(MultipleChoiceConfig, runner.run)
