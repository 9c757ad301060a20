"""run_ner.py end to end: the shipped sample, the real CoNLL-2003 fixture (IOB1), the real
MiniLM weights on a WNUT-17 slice, and bad input."""

import re

import numpy as np
import pytest

from tests import scripts
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow


run_ner = scripts.fine_tuning_runner("run_ner.py")


def test_sample_run_scores_and_tags_every_word(tiny_model, tmp_path):
  vocab_file, config_file = tiny_model
  # The script itself, as a user starts it; the other runs here call its run in this process.
  result = scripts.fine_tuning_runner("run_ner.py", in_process=False)(
      f"--data_dir={SAMPLES_DIR / 'ner'}", f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--output_dir={tmp_path}", "--do_train",
      "--do_eval", "--do_predict", "--max_seq_length=12", "--train_batch_size=8",
      "--num_train_epochs=2", "--learning_rate=1e-3", "--eval_batch_size=3")
  assert result.returncode == 0, result.stderr[-3000:]
  results = scripts.read_eval_results(tmp_path / "eval_results.txt")
  assert {"precision", "recall", "f1", "token_accuracy", "eval_loss", "global_step", "f1_PER",
          "f1_LOC", "f1_ORG"} <= set(results)
  assert all(0.0 <= results[k] <= 1.0 for k in ("precision", "recall", "f1", "token_accuracy"))
  assert (tmp_path / "label_list.txt").read_text().split() == [
      "O", "B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER"]
  # predictions.txt: every input line with one predicted tag appended, blank lines kept.
  inputs = (SAMPLES_DIR / "ner" / "test.txt").read_text().splitlines()
  outputs = (tmp_path / "predictions.txt").read_text().splitlines()
  assert len(outputs) == len(inputs)
  for line, output in zip(inputs, outputs):
    if not line:
      assert output == ""
      continue
    assert output.startswith(line + " ")
    assert output.split()[-1] in ("O", "B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER")
  assert "predict_results.txt" in {p.name for p in tmp_path.iterdir()}


def test_conll2003_fixture_iob1_with_documents(tiny_model, shared_data, tmp_path):
  path = shared_data / "samples/allennlp_fixtures/conll2003.txt"
  if not path.is_file():
    pytest.skip(f"{path} is absent")
  vocab_file, config_file = tiny_model
  result = run_ner(f"--train_file={path}", f"--dev_file={path}", f"--predict_file={path}",
                   f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
                   f"--output_dir={tmp_path}", "--do_train", "--do_eval", "--do_predict",
                   "--doc_context", "--max_seq_length=24", "--train_batch_size=4",
                   "--num_train_epochs=1")
  assert result.returncode == 0, result.stderr[-3000:]
  outputs = (tmp_path / "predictions.txt").read_text().splitlines()
  inputs = path.read_text().splitlines()
  assert [o.rsplit(" ", 1)[0] for o in outputs if o] == [line for line in inputs if line]


def test_minilm_on_a_real_wnut17_slice(minilm_bert_dir, shared_data, tmp_path):
  source = shared_data / "ner/wnut17/train.conll"
  if not source.is_file():
    pytest.skip(f"{source} is absent")
  sentences = source.read_text(encoding="utf-8").split("\n\n")
  (tmp_path / "train.txt").write_text("\n\n".join(sentences[:48]) + "\n", encoding="utf-8")
  (tmp_path / "dev.txt").write_text("\n\n".join(sentences[48:72]) + "\n", encoding="utf-8")
  labels = ",".join(["O"] + [f"{p}-{t}" for t in ("corporation", "creative-work", "group",
                                                   "location", "person", "product")
                             for p in "BI"])
  result = run_ner(f"--data_dir={tmp_path}", f"--vocab_file={minilm_bert_dir / 'vocab.txt'}",
                   f"--bert_config_file={minilm_bert_dir / 'bert_config.json'}",
                   f"--init_checkpoint={minilm_bert_dir / 'bert_model.ckpt'}",
                   f"--output_dir={tmp_path / 'out'}", f"--labels={labels}", "--do_train",
                   "--do_eval", "--max_seq_length=64", "--train_batch_size=16",
                   "--eval_batch_size=16", "--num_train_epochs=1")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "not in the checkpoint (trained from scratch): output_bias and output_weights;" in (
      result.stderr)
  results = scripts.read_eval_results(tmp_path / "out" / "eval_results.txt")
  assert results["global_step"] == 3
  assert np.isfinite(results["eval_loss"]) and 0.0 <= results["token_accuracy"] <= 1.0


@pytest.mark.parametrize("case, expected", [
    ("columns", r"train\.txt:3: expected 2 columns \(as line 1 of the data\), found 1"),
    ("unknown_tag", r"dev\.txt:1: word 1 \('bees'\) has tag 'B-ORG', which is not in the label "
                    r"list \['O', 'B-PER'\]"),
    ("empty", r"train\.txt: holds no sentence"),
])
def test_bad_input_fails_before_training(tiny_model, tmp_path, case, expected):
  vocab_file, config_file = tiny_model
  train = {"columns": "a O\nb B-PER\nc\n", "unknown_tag": "a O\nb B-PER\n", "empty": "\n"}[case]
  (tmp_path / "train.txt").write_text(train, encoding="utf-8")
  (tmp_path / "dev.txt").write_text("bees B-ORG\n", encoding="utf-8")
  result = run_ner(f"--data_dir={tmp_path}", f"--vocab_file={vocab_file}",
                   f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'out'}",
                   "--do_train", "--do_eval", "--max_seq_length=16")
  assert result.returncode != 0
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith("run_ner.py: error: "), result.stderr[-2000:]
  assert re.search(expected, last_line), last_line
  assert not list((tmp_path / "out").glob("model.ckpt-*"))
