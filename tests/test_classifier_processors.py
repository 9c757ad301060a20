"""The classifier's readers on the real GLUE-layout files, the fixtures, and bad files."""

import os
import re

import pytest

from data import delimited_files
from data import file_patterns
from data import tokenization
from tasks import classifier
from tasks.classification import features as classifier_features
from tasks.classification import reader as classification_reader
from tests.conftest import SAMPLES_DIR


def glue_dir(tmp_path, files):
  """A data_dir whose files link to real ones: {name in data_dir: real path}."""
  for name, path in files.items():
    if not path.is_file():
      pytest.skip(f"{path} is absent")
    os.symlink(path, tmp_path / name)
  return tmp_path


def test_mrpc_reads_the_real_training_file_with_its_bom(shared_data, tmp_path):
  data_dir = glue_dir(tmp_path, {"train.tsv": shared_data / "glue/MRPC/msr_paraphrase_train.txt"})
  processor = classification_reader.glue_processors()["mrpc"]
  examples = processor.get_train_examples(data_dir)
  assert len(examples) == 4076
  assert examples[0].text_a.startswith("Amrozi accused his brother")
  assert examples[0].label == "1" and examples[1].label == "0"
  assert {example.label for example in examples} == set(processor.get_labels())
  assert examples[0].source.endswith("train.tsv:2")


def test_stsb_labels_are_floats(shared_data, tmp_path):
  data_dir = glue_dir(tmp_path, {"train.tsv": shared_data / "glue/STS-B/train.tsv",
                                 "dev.tsv": shared_data / "glue/STS-B/dev.tsv"})
  processor = classification_reader.glue_processors()["sts-b"]
  train, dev = processor.get_train_examples(data_dir), processor.get_dev_examples(data_dir)
  assert (len(train), len(dev)) == (5749, 1500)
  assert processor.kind == classifier.REGRESSION and processor.get_labels() == []
  assert train[0].text_a == "A plane is taking off." and train[0].label == 5.0
  assert all(isinstance(e.label, float) and 0.0 <= e.label <= 5.0 for e in train + dev)


def test_sst2_dev(shared_data, tmp_path):
  data_dir = glue_dir(tmp_path, {"dev.tsv": shared_data / "glue/SST-2/dev.tsv"})
  examples = classification_reader.glue_processors()["sst-2"].get_dev_examples(data_dir)
  assert len(examples) == 872
  assert examples[0].text_b is None and examples[0].label == "1"
  assert examples[0].text_a.startswith("it 's a charming and often affecting journey")


def test_mrpc_fixture_tsv_and_generic_csv_agree(shared_data):
  data_dir = shared_data / "samples/hf_fixtures/MRPC"
  if not data_dir.is_dir():
    pytest.skip(f"{data_dir} is absent")
  tsv = classification_reader.glue_processors()["mrpc"].get_dev_examples(data_dir)
  csv_processor = classification_reader.GenericProcessor(
      "csv", "sentence1", "sentence2", "label", has_header=True)
  csv = csv_processor.get_dev_examples(data_dir)
  assert len(tsv) == len(csv) == 6
  # The TSV keeps quotes literally (quotechar None, as GLUE); the CSV unescapes "" inside quotes.
  assert tsv[0].text_b == csv[0].text_b == '" The foodservice pie business does not fit our ' \
                                            'long-term growth strategy .'
  assert [e.label for e in tsv] == ["1" if e.label == "equivalent" else "0" for e in csv]


def test_generic_tsv_infers_sorted_labels_from_the_training_file():
  processor = classification_reader.GenericProcessor("tsv", "sentence", None, "label")
  train = processor.get_train_examples(SAMPLES_DIR / "classification")
  processor.infer_labels(train)
  assert processor.get_labels() == ["craft", "food", "nature"]
  test = processor.get_test_examples(SAMPLES_DIR / "classification")
  assert len(test) == 3 and all(example.label is None for example in test)


def test_generic_columns_by_index_without_header(tmp_path):
  (tmp_path / "train.csv").write_text('pos,"good, really"\nneg,bad\n', encoding="utf-8")
  processor = classification_reader.GenericProcessor("csv", "1", None, "0", has_header=False)
  examples = processor.get_train_examples(tmp_path)
  assert [(e.text_a, e.label) for e in examples] == [("good, really", "pos"), ("bad", "neg")]


def test_multi_label_rows(tmp_path):
  (tmp_path / "train.tsv").write_text("text\ttags\na b\tx,y\nc\ty\n", encoding="utf-8")
  processor = classification_reader.GenericProcessor("tsv", "text", None, "tags",
                                                     multi_label=True)
  examples = processor.get_train_examples(tmp_path)
  processor.infer_labels(examples)
  assert [e.label for e in examples] == [("x", "y"), ("y",)]
  assert processor.get_labels() == ["x", "y"]


def test_missing_column_names_file_and_line(tmp_path):
  (tmp_path / "train.tsv").write_text("a\tb\tc\td\n" * 3 + "short\n", encoding="utf-8")
  with pytest.raises(file_patterns.InputError, match=r"train\.tsv:4: 1 field where line 1 has 4$"):
    classification_reader.glue_processors()["cola"].get_train_examples(tmp_path)
  (tmp_path / "train.tsv").write_text("a\tb\n", encoding="utf-8")
  with pytest.raises(file_patterns.InputError, match=r"train\.tsv:1: expected at least 4 "
                                                      r"tab-separated columns for task 'cola', "
                                                      r"found 2"):
    classification_reader.glue_processors()["cola"].get_train_examples(tmp_path)


@pytest.mark.parametrize("task", ["tsv", "mrpc"])
def test_a_row_with_more_fields_than_the_header_names_file_and_line(tmp_path, task):
  # A tab inside scraped text: read as it was, the label column held "great" and the inferred
  # label list gained a class.
  header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String" if task == "mrpc" else "sentence\tlabel"
  row = "1\t1\t2\tA\tB" if task == "mrpc" else "fine\tpos"
  shifted = "1\t3\t4\tA\tB\tgreat" if task == "mrpc" else "it was\tgreat\tpos"
  (tmp_path / "train.tsv").write_text(f"{header}\n{row}\n{row}\n{shifted}\n", encoding="utf-8")
  processor = (classification_reader.glue_processors()["mrpc"] if task == "mrpc" else
               classification_reader.GenericProcessor("tsv", "sentence", None, "label"))
  fields = 6 if task == "mrpc" else 3
  with pytest.raises(file_patterns.InputError,
                     match=rf"train\.tsv:4: {fields} fields where line 1 has {fields - 1} "
                           r"\(a tab inside a text\?\)$"):
    processor.get_train_examples(tmp_path)


def test_an_unquoted_comma_in_a_csv_row_names_file_and_line(tmp_path):
  (tmp_path / "train.csv").write_text("review,stars\ngood,5\nbad, really,1\n", encoding="utf-8")
  processor = classification_reader.GenericProcessor("csv", "review", None, "stars")
  with pytest.raises(file_patterns.InputError, match=r"train\.csv:3: 3 fields where line 1 has 2 "
                                                      r"\(an unquoted ',' in a text\?\)$"):
    processor.get_train_examples(tmp_path)


def test_bytes_that_are_not_utf8_are_named_by_line_and_offset_in_the_file(tmp_path):
  # Past the first 8 KiB, where a decoder's own offset counts from the block it decodes.
  good = "sentence\tlabel\n" + "a fine text\tpos\n" * 1000
  (tmp_path / "train.tsv").write_bytes(good.encode() + b"caf\xe9\tneg\n")
  processor = classification_reader.GenericProcessor("tsv", "sentence", None, "label")
  with pytest.raises(file_patterns.InputError) as error:
    processor.get_train_examples(tmp_path)
  assert str(error.value).endswith(
      f"train.tsv: not UTF-8 text at line 1002 (invalid continuation byte at byte "
      f"{len(good) + 3})")


def test_unknown_header_column(tmp_path):
  (tmp_path / "train.tsv").write_text("text\tlabel\nhi\tx\n", encoding="utf-8")
  processor = classification_reader.GenericProcessor("tsv", "sentence", None, "label")
  with pytest.raises(file_patterns.InputError,
                     match=r"train\.tsv:1: no column 'sentence' for --text_a_column"):
    processor.get_train_examples(tmp_path)


def test_label_not_in_the_label_list_names_file_and_line(tmp_path, sample_vocab):
  (tmp_path / "dev.tsv").write_text("sentence\tlabel\nbees\tnature\nbread\tsport\n",
                                    encoding="utf-8")
  processor = classification_reader.GenericProcessor("tsv", "sentence", None, "label")
  examples = processor.get_dev_examples(tmp_path)
  tokenizer = tokenization.FullTokenizer(str(sample_vocab))
  with pytest.raises(file_patterns.InputError,
                     match=r"dev\.tsv:3: label 'sport' is not in the label list"):
    classifier_features.write_records(str(tmp_path / "eval.tf_record"), examples, tokenizer, 16,
                                      processor.kind, ["food", "nature"])
  assert not list(tmp_path.glob("eval.tf_record*"))


@pytest.mark.parametrize("label", ["high", "nan", "inf", "-Infinity"])
def test_non_numeric_regression_label(tmp_path, label):
  # float() takes "nan" and "inf"; one such label makes every loss of the run NaN.
  (tmp_path / "train.tsv").write_text("\t".join(["h"] * 10) + "\n"
                                      + "\t".join(["x"] * 9 + [label]) + "\n", encoding="utf-8")
  with pytest.raises(file_patterns.InputError,
                     match=rf"train\.tsv:2: label '{label}' is not a number"):
    classification_reader.glue_processors()["sts-b"].get_train_examples(tmp_path)


def test_an_unterminated_quote_is_reported_on_the_line_where_its_field_starts(tmp_path):
  path = tmp_path / "train.csv"
  path.write_text('label,sentence\npos,"good,\nreally"\nneg,"bad\nmore text\n',
                  encoding="utf-8")
  rows = delimited_files.read_rows(str(path), ",", '"', strict=True)
  assert next(rows) == (1, ["label", "sentence"])
  assert next(rows) == (2, ["pos", "good,\nreally"])
  with pytest.raises(file_patterns.InputError, match=rf"^{re.escape(str(path))}:4: malformed"):
    list(rows)
