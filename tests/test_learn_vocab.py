"""learn_vocab.py: a released-style vocab learned from real text, and its bad-input errors."""

import pytest

from data import tokenization
from tests import scripts

pytestmark = pytest.mark.slow


def _learn_vocab(*flags):
  return scripts.run_in_process("learn_vocab.py", *flags)


def test_vocab_learned_from_wikitext_tokenizes_held_out_text(shared_data, tmp_path):
  lines = (shared_data / "pretraining" / "wikitext-2-valid.tokens.txt").read_text(
      "utf-8").splitlines()
  split = int(len(lines) * 0.8)
  (tmp_path / "train.txt").write_text("\n".join(lines[:split]), "utf-8")
  vocab_file = tmp_path / "vocab.txt"
  result = _learn_vocab(f"--input_file={tmp_path / 'train.txt'}", f"--vocab_file={vocab_file}",
                        "--vocab_size=8000")
  assert result.returncode == 0, result.stderr

  tokenizer = tokenization.FullTokenizer(str(vocab_file))
  vocab = tokenizer.vocab
  assert len(vocab) <= 8000
  assert [vocab[token] for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
      0, 100, 101, 102, 103]
  assert [vocab[f"[unused{i}]"] for i in (0, 98)] == [1, 99]
  pieces = [piece for line in lines[split:] for piece in tokenizer.tokenize(line)]
  assert len(pieces) > 50_000
  unknown_rate = pieces.count("[UNK]") / len(pieces)
  assert unknown_rate < 0.01, unknown_rate


def test_no_matching_input_is_a_one_line_error(tmp_path):
  result = _learn_vocab(f"--input_file={tmp_path}/none*.txt", f"--vocab_file={tmp_path}/v.txt")
  assert result.returncode == 1
  assert "matches no file" in result.stderr
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "v.txt").exists()


def test_text_without_words_is_a_one_line_error(tmp_path):
  (tmp_path / "blank.txt").write_text("\n \n\t\n", "utf-8")
  result = _learn_vocab(f"--input_file={tmp_path}/blank.txt", f"--vocab_file={tmp_path}/v.txt")
  assert result.returncode == 1
  assert "no words" in result.stderr and "blank.txt" in result.stderr
  assert not (tmp_path / "v.txt").exists()
