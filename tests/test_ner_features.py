"""CoNLL reading, windowing and alignment: every input word gets exactly one prediction, in order."""

import numpy as np
import pytest
import tensorflow as tf

from data import file_patterns
from data import tokenization
from tasks.ner import features as ner_features
from tasks.ner import reader as ner_reader

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def write(tmp_path, text, name="train.txt"):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_reads_the_conll2003_fixture(shared_data):
  path = shared_data / "samples/allennlp_fixtures/conll2003.txt"
  if not path.is_file():
    pytest.skip(f"{path} is absent")
  sentences, layout = ner_reader.read_sentences(str(path))
  assert sentences[0].words[:3] == ["U.N.", "official", "Ekeus"]
  assert sentences[0].tags[:3] == ["I-ORG", "O", "I-PER"]  # IOB1, tag in the 4th column
  assert layout[0].startswith(ner_reader.DOCSTART)
  assert [s.document for s in sentences] == sorted(s.document for s in sentences)
  assert sentences[-1].document == sum(isinstance(e, str) for e in layout) - 1


def test_reads_the_real_wnut17_files(shared_data):
  path = shared_data / "ner/wnut17/train.conll"
  if not path.is_file():
    pytest.skip(f"{path} is absent")
  sentences, _ = ner_reader.read_sentences(str(path))
  assert len(sentences) == 3394
  assert sentences[0].words[:2] == ["@paulwalk", "It"]
  assert sentences[0].tags[14:17] == ["B-location", "I-location", "I-location"]


@pytest.mark.parametrize("text, expected", [
    ("a O\nb\tB-PER\nc X O\n", r"train\.txt:3: expected 2 columns \(as line 1 of the data\), "
                               r"found 3"),
    ("a O\nb PER\n", r"train\.txt:2: tag 'PER' is not O, B-<type>, I-<type>"),
    ("\n\n-DOCSTART- O\n\n", r"train\.txt: holds no sentence"),
])
def test_bad_files(tmp_path, text, expected):
  with pytest.raises(file_patterns.InputError, match=expected):
    ner_reader.read_sentences(write(tmp_path, text))


@pytest.fixture()
def tokenizer(sample_vocab):
  return tokenization.FullTokenizer(str(sample_vocab))


def long_sentences(tmp_path):
  """A 60-word sentence whose invented words split into many pieces, and a short one."""
  words = [("zyxwvut" if i % 7 == 3 else "the") for i in range(60)]
  tags = ["B-PER" if i % 7 == 3 else "O" for i in range(60)]
  text = "".join(f"{w} {t}\n" for w, t in zip(words, tags)) + "\nbees O\nlive O\nhere B-LOC\n"
  return ner_reader.read_sentences(write(tmp_path, text))


def test_undecodable_bytes_are_replaced_and_counted_like_the_other_readers(tmp_path, caplog):
  path = tmp_path / "latin1.txt"
  path.write_bytes("\ufeffParis B-LOC\nis O\n\n".encode("utf-8") + "Zürich B-LOC\n".encode("latin-1"))
  sentences, _ = ner_reader.read_sentences(str(path))
  assert [s.words for s in sentences] == [["Paris", "is"], ["Z\ufffdrich"]]
  assert [s.tags for s in sentences] == [["B-LOC", "O"], ["B-LOC"]]
  assert "1 of 4 lines are not valid UTF-8" in caplog.text


def test_every_word_is_labelled_exactly_once_in_order(tmp_path, tokenizer):
  sentences, _ = long_sentences(tmp_path)
  assert len(tokenizer.tokenize("zyxwvut")) > 3
  windows = ner_features.make_windows(sentences, tokenizer, max_seq_length=16)
  assert len(windows) > 5
  assert all(len(w.pieces) <= 14 for w in windows)
  labelled = [(s, w) for window in windows for _, s, w in window.labelled]
  assert labelled == [(s, w) for s, sentence in enumerate(sentences)
                      for w in range(len(sentence.words))]


def test_predictions_map_back_to_every_word(tmp_path, tokenizer):
  sentences, layout = long_sentences(tmp_path)
  windows = ner_features.make_windows(sentences, tokenizer, max_seq_length=16)
  path = str(tmp_path / "train.tf_record")
  ner_features.write_records(path, windows, sentences, tokenizer, 16, LABELS)
  spec = {"label_ids": tf.io.FixedLenFeature([16], tf.int64)}
  label_ids = np.stack([tf.io.parse_single_example(r, spec)["label_ids"].numpy()
                        for r in tf.data.TFRecordDataset(path)])
  # Exactly one labelled position per word; using the records' labels as predictions gives back
  # the gold tags of every word.
  assert np.sum(label_ids >= 0) == sum(len(s.words) for s in sentences)
  tags = ner_features.predicted_tags(windows, sentences, label_ids, LABELS)
  assert tags == [s.tags for s in sentences]
  output = tmp_path / "predictions.txt"
  ner_reader.write_predictions(str(output), sentences, layout, tags)
  lines = output.read_text().splitlines()
  assert lines[0] == "the O O" and lines[3] == "zyxwvut B-PER B-PER"
  assert lines[61:64] == ["bees O O", "live O O", "here B-LOC B-LOC"]


def test_doc_context_adds_unlabelled_neighbours(tmp_path, tokenizer):
  text = ("-DOCSTART- O\n\nbees O\nlive O\n\nhere B-LOC\n\nthe O\nriver O\n\n"
          "-DOCSTART- O\n\nbread O\n")
  sentences, _ = ner_reader.read_sentences(write(tmp_path, text))
  assert [s.document for s in sentences] == [0, 0, 0, 1]
  windows = ner_features.make_windows(sentences, tokenizer, max_seq_length=32, doc_context=True)
  assert len(windows) == 4
  middle = windows[1]
  # "here" with its document's neighbours on both sides, but not the next document's "bread".
  assert middle.pieces == tokenizer.tokenize("bees live here the river")
  assert "bread" not in middle.pieces
  assert [(s, w) for _, s, w in middle.labelled] == [(1, 0)]
  assert middle.pieces[middle.labelled[0][0]] == tokenizer.tokenize("here")[0]
