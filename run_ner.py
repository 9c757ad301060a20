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

from absl import flags

from tasks import runner
from tasks.ner import spec
from training import flags as training_flags

training_flags.define_fine_tuning_runner_flags(example_unit="Windows")
flags.DEFINE_string("data_dir", None, "Directory with train.txt, dev.txt and test.txt.")
flags.DEFINE_string("train_file", None, "Training file (default: <data_dir>/train.txt).")
flags.DEFINE_string("dev_file", None, "Evaluation file (default: <data_dir>/dev.txt).")
flags.DEFINE_string("predict_file", None, "File to tag (default: <data_dir>/test.txt); it may "
                    "have the token column only.")
flags.DEFINE_list("labels", None, "The tags, in label-id order; default the tags of the "
                  "training file (O first, then sorted).")
flags.DEFINE_bool("doc_context", False, "Fill each window with the neighbouring sentences of "
                  "the same -DOCSTART- document (unlabelled), as the BERT paper's NER setting.")
flags.mark_flags_as_required(["bert_config_file", "vocab_file", "output_dir"])


if __name__ == "__main__":
  runner.run(spec.NerSpec())
