"""run_classifier.py end to end: the shipped sample, real MRPC / STS-B slices with the real MiniLM
weights, padding rows that never count, dynamic padding, and bad input."""

import re

import numpy as np
import pytest
import tensorflow as tf

from tests import scripts
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow

SAMPLE_DIR = SAMPLES_DIR / "classification"


run_classifier = scripts.fine_tuning_runner("run_classifier.py")


def sample_flags(tiny_model, output_dir, *extra):
  vocab_file, config_file = tiny_model
  return ("--task_name=tsv", f"--data_dir={SAMPLE_DIR}", f"--vocab_file={vocab_file}",
          f"--bert_config_file={config_file}", f"--output_dir={output_dir}",
          "--max_seq_length=32", *extra)


@pytest.fixture(scope="module")
def trained_sample(tiny_model, tmp_path_factory):
  output_dir = tmp_path_factory.mktemp("sample_classifier")
  # The script itself, as a user starts it; the other runs here call its run in this process.
  result = scripts.fine_tuning_runner("run_classifier.py", in_process=False)(*sample_flags(
      tiny_model, output_dir, "--do_train", "--do_eval", "--do_predict", "--train_batch_size=8",
      "--eval_batch_size=5", "--predict_batch_size=2", "--num_train_epochs=3",
      "--learning_rate=1e-3", "--steps_per_loop=4"))
  assert result.returncode == 0, result.stderr[-3000:]
  return output_dir


def test_sample_run_writes_the_original_outputs(trained_sample):
  results = scripts.read_eval_results(trained_sample / "eval_results.txt")
  # Three classes: accuracy, loss, and per-class precision/recall; 15 steps = int(42 / 8 * 3).
  assert results["global_step"] == 15
  assert set(results) == {"eval_accuracy", "eval_loss", "global_step"} | {
      f"{m}_{label}" for m in ("precision", "recall") for label in ("craft", "food", "nature")}
  assert 0.0 <= results["eval_accuracy"] <= 1.0 and np.isfinite(results["eval_loss"])
  assert (trained_sample / "label_list.txt").read_text().split() == ["craft", "food", "nature"]
  rows = [[float(x) for x in line.split("\t")]
          for line in (trained_sample / "test_results.tsv").read_text().splitlines()]
  assert len(rows) == 3 and all(len(row) == 3 for row in rows)
  np.testing.assert_allclose([sum(row) for row in rows], 1.0, atol=1e-6)


def test_records_have_the_original_features_and_padding_rows(trained_sample):
  def records(name):
    return [tf.train.Example.FromString(r.numpy())
            for r in tf.data.TFRecordDataset(str(trained_sample / name))]
  train, evaluation = records("train.tf_record"), records("eval.tf_record")
  assert len(train) == 42
  assert set(train[0].features.feature) == {"input_ids", "input_mask", "segment_ids",
                                            "label_ids", "is_real_example"}
  # 12 dev examples padded to a multiple of --eval_batch_size=5 with is_real_example = 0 rows.
  real = [e.features.feature["is_real_example"].int64_list.value[0] for e in evaluation]
  assert real == [1] * 12 + [0] * 3


def eval_only(tiny_model, trained_sample, output_dir, *extra):
  result = run_classifier(*sample_flags(
      tiny_model, output_dir, "--do_eval", "--do_predict",
      f"--init_checkpoint={trained_sample / 'model.ckpt-15'}", *extra))
  assert result.returncode == 0, result.stderr[-3000:]
  return (scripts.read_eval_results(output_dir / "eval_results.txt"),
          np.loadtxt(output_dir / "test_results.tsv"))


def test_padding_rows_and_dynamic_padding_change_no_result(tiny_model, trained_sample, tmp_path):
  # Batch 4 needs no padding row (12 dev examples); batch 5 adds 3, batch 7 adds 2; dynamic
  # padding off pads every batch to --max_seq_length.
  reference = eval_only(tiny_model, trained_sample, tmp_path / "a", "--eval_batch_size=4",
                        "--predict_batch_size=3", "--dynamic_padding=false")
  for flags in (("--eval_batch_size=5", "--predict_batch_size=2", "--dynamic_padding=true"),
                ("--eval_batch_size=7", "--predict_batch_size=4", "--dynamic_padding=false")):
    results, predictions = eval_only(tiny_model, trained_sample, tmp_path / flags[0][2:], *flags)
    assert results == pytest.approx(reference[0], abs=1e-5), flags
    np.testing.assert_allclose(predictions, reference[1], atol=1e-5)


@pytest.fixture()
def glue_slice(shared_data, tmp_path):
  """Real MRPC (64 train / 32 dev rows of msr_paraphrase_train.txt) and STS-B (64 / 32) slices."""
  slices = {}
  for task, path, dev in (("mrpc", "glue/MRPC/msr_paraphrase_train.txt", None),
                          ("sts-b", "glue/STS-B/train.tsv", "glue/STS-B/dev.tsv")):
    if not (shared_data / path).is_file():
      pytest.skip(f"{shared_data / path} is absent")
    lines = (shared_data / path).read_text(encoding="utf-8").splitlines(keepends=True)
    dev_lines = ((shared_data / dev).read_text(encoding="utf-8").splitlines(keepends=True)
                 if dev else [lines[0]] + lines[-32:])
    data_dir = tmp_path / task
    data_dir.mkdir()
    (data_dir / "train.tsv").write_text("".join(lines[:65]), encoding="utf-8")
    (data_dir / "dev.tsv").write_text("".join(dev_lines[:33]), encoding="utf-8")
    slices[task] = data_dir
  return slices


@pytest.mark.parametrize("task, metrics", [("mrpc", {"eval_accuracy", "f1"}),
                                           ("sts-b", {"pearson", "spearman"})])
def test_minilm_fine_tunes_on_real_glue_slices(minilm_bert_dir, glue_slice, tmp_path, task,
                                               metrics):
  output_dir = tmp_path / "output"
  result = run_classifier(
      f"--task_name={task}", f"--data_dir={glue_slice[task]}",
      f"--vocab_file={minilm_bert_dir / 'vocab.txt'}",
      f"--bert_config_file={minilm_bert_dir / 'bert_config.json'}",
      f"--init_checkpoint={minilm_bert_dir / 'bert_model.ckpt'}", f"--output_dir={output_dir}",
      "--do_train", "--do_eval", "--max_seq_length=64", "--train_batch_size=16",
      "--eval_batch_size=16", "--num_train_epochs=0.5", "--learning_rate=5e-5")
  assert result.returncode == 0, result.stderr[-3000:]
  # The encoder is warm-started from the real weights; only the output layer is new.
  assert "not in the checkpoint (trained from scratch): output_bias and output_weights;" in (
      result.stderr)
  results = scripts.read_eval_results(output_dir / "eval_results.txt")
  assert results["global_step"] == 2
  assert metrics | {"eval_loss", "global_step"} <= set(results)
  for name in metrics:
    assert -1.0 <= results[name] <= 1.0 and np.isfinite(results[name])


def bad_data_dir(tmp_path, train, dev=None):
  data_dir = tmp_path / "data"
  data_dir.mkdir(exist_ok=True)
  (data_dir / "train.tsv").write_text(train, encoding="utf-8")
  if dev is not None:
    (data_dir / "dev.tsv").write_text(dev, encoding="utf-8")
  return data_dir


@pytest.mark.parametrize("case, expected", [
    ("unknown_task", r"--task_name=glue9: unknown task; known tasks: cola, mnli, mnli-mm, mrpc, "),
    ("missing_column", r"train\.tsv:3: 2 fields where line 1 has 5"),
    ("label_not_in_list", r"dev\.tsv:2: label 'sport' is not in the label list "
                          r"\['food', 'nature'\]"),
    ("empty_train", r"the train file of task 'tsv' holds no example"),
    ("too_long", r"--max_seq_length=128 exceeds max_position_embeddings 64"),
    ("case_mismatch", r"`uncased_L-12_H-768_A-12` seems to be a lowercased model"),
    ("taken_export_version", r"export/5 exists already; TF Serving versions are immutable"),
    ("untrained_export", r"--export_dir without --do_train needs a checkpoint in --output_dir="),
])
def test_bad_input_fails_before_training(tiny_model, tmp_path, case, expected):
  flags = dict(arg.split("=", 1) for arg in sample_flags(tiny_model, tmp_path / "out"))
  flags["--max_seq_length"] = "32"
  extra = ["--do_train", "--do_eval"]
  if case == "unknown_task":
    flags["--task_name"] = "glue9"
  elif case == "missing_column":
    flags["--task_name"] = "mrpc"
    flags["--data_dir"] = str(bad_data_dir(tmp_path, "h\th\th\th\th\n1\t1\t2\ta\tb\n0\tshort\n"))
  elif case == "label_not_in_list":
    flags["--data_dir"] = str(bad_data_dir(tmp_path, "sentence\tlabel\nbees\tnature\nbread\tfood\n",
                                           dev="sentence\tlabel\nbread\tsport\n"))
  elif case == "empty_train":
    flags["--data_dir"] = str(bad_data_dir(tmp_path, "sentence\tlabel\n"))
  elif case == "too_long":
    flags["--max_seq_length"] = "128"
  elif case == "case_mismatch":
    flags["--init_checkpoint"] = str(tmp_path / "uncased_L-12_H-768_A-12" / "bert_model.ckpt")
    extra.append("--do_lower_case=false")
  elif case == "taken_export_version":
    (tmp_path / "export" / "5").mkdir(parents=True)
    extra += [f"--export_dir={tmp_path / 'export'}", "--export_version=5"]
  elif case == "untrained_export":
    flags.pop("--init_checkpoint", None)
    extra = [f"--export_dir={tmp_path / 'export'}"]
  result = run_classifier(*(f"{k}={v}" for k, v in flags.items()), *extra)
  assert result.returncode != 0
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith("run_classifier.py: error: "), result.stderr[-2000:]
  assert re.search(expected, last_line), last_line
  assert not list((tmp_path / "out").glob("model.ckpt-*"))
  assert not list((tmp_path / "out").glob("*.tmp-*"))

