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

from base import cli
from tasks import runner
from tasks.ner.config import NerConfig

if __name__ == "__main__":
  cli.run_config(NerConfig, runner.run)
