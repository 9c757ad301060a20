"""Each class of bad input (docs/bad_input.md) against every script it applies to: a one-line
`<script>: error: ...` naming the flag, exit status 1, no traceback, before any work.

`SCRIPTS` lists every top-level script with the flags it needs to start and the flags that name its
outputs; `test_every_script_is_listed` fails for a script missing there, so a new script is
checked by every class below. The scripts run in this process from their command-line words
(`scripts.run_in_process`: the config parsed from the flags, then `run(config)`); each script's
own test module runs it as a real process too.
"""

import json
import pathlib
import re

import pytest

from modeling import bert_config
from modeling import checkpoint_io
from modeling import pretraining_model
from tests import pretraining_records
from tests import scripts
from tests.conftest import REPO_ROOT
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow

# script -> (flags a run needs besides its outputs, {output flag: "dir" or "file"}). Inputs are
# filled in by `_flags`; the checks below fail before any of them is read.
SCRIPTS = {
    "create_pretraining_data.py": (("input_file", "vocab_file"), {"output_file": "file"}),
    "run_pretraining.py": (("bert_config_file", "input_file", "do_train"), {"output_dir": "dir"}),
    "run_classifier.py": (("task_name", "data_dir", "vocab_file", "bert_config_file", "do_train"),
                          {"output_dir": "dir", "export_dir": "dir"}),
    "run_ner.py": (("ner_data_dir", "vocab_file", "bert_config_file", "do_train"),
                   {"output_dir": "dir", "export_dir": "dir"}),
    "run_squad.py": (("train_file", "vocab_file", "bert_config_file", "do_train"),
                     {"output_dir": "dir", "export_dir": "dir"}),
    "run_multiple_choice.py": (("mc_task_name", "mc_data_dir", "vocab_file", "bert_config_file",
                                "do_train"), {"output_dir": "dir", "export_dir": "dir"}),
    "extract_features.py": (("text_input_file", "vocab_file", "bert_config_file",
                             "init_checkpoint"), {"output_file": "file"}),
    "export_model.py": (("vocab_file", "bert_config_file", "init_checkpoint"),
                        {"export_dir": "dir"}),
    "convert_checkpoint.py": (("direction", "input_dir"), {"output_dir": "dir"}),
    "learn_vocab.py": (("text_input_file",), {"vocab_file": "file"}),
}
FINE_TUNING_RUNNERS = ("run_classifier.py", "run_ner.py", "run_squad.py",
                       "run_multiple_choice.py")
# Scripts that tokenize text for a model of a given bert_config.json.
TOKENIZING_MODEL_SCRIPTS = FINE_TUNING_RUNNERS + ("extract_features.py", "export_model.py")


def test_every_script_is_listed():
  top_level = {path.name for path in REPO_ROOT.glob("*.py")}
  assert top_level == set(SCRIPTS)


@pytest.fixture
def model_files(tiny_model, tmp_path):
  """`(vocab_file, write_config)`: the tiny model's vocab, and a function writing its config
  with some keys changed."""
  vocab_file, config_file = tiny_model
  base = json.loads(pathlib.Path(config_file).read_text())

  def write_config(**changes):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(base | changes))
    return str(path)
  return vocab_file, write_config


def _flags(script, tmp_path, vocab_file, config_file, outputs=None, **overrides):
  """The flags of a run of `script` on the project's samples, outputs in `tmp_path` unless
  `outputs` says otherwise, then `overrides` (None drops a flag)."""
  needed, output_kinds = SCRIPTS[script]
  text = tmp_path / "text.txt"
  if not text.exists():
    text.write_text("the bees fly out of the hive\n")
  values = {
      "input_file": str(SAMPLES_DIR / "sample_corpus.txt") if script.startswith("create")
                    else str(tmp_path / "records.tfrecord"),
      "vocab_file": vocab_file, "bert_config_file": config_file,
      "task_name": "tsv", "data_dir": str(SAMPLES_DIR / "classification"),
      "ner_data_dir": str(SAMPLES_DIR / "ner"), "train_file": str(SAMPLES_DIR / "squad" / "train.json"),
      "mc_task_name": "jsonl", "mc_data_dir": str(SAMPLES_DIR / "multiple_choice"),
      "text_input_file": str(text), "init_checkpoint": str(tmp_path / "no_checkpoint"),
      "direction": "hf_to_bert", "input_dir": str(tmp_path), "do_train": "true",
  }
  renamed = {"ner_data_dir": "data_dir", "mc_task_name": "task_name", "mc_data_dir": "data_dir",
             "text_input_file": "input_file"}
  flags = {renamed.get(name, name): values[name] for name in needed}
  if script in TOKENIZING_MODEL_SCRIPTS + ("run_pretraining.py",):
    flags["max_seq_length"] = "32"
  if script == "run_squad.py":
    flags["max_query_length"] = "8"
  for name, kind in output_kinds.items():
    if name != "export_dir" or script not in FINE_TUNING_RUNNERS:
      flags[name] = str(tmp_path / ("out" if kind == "dir" else "out.txt"))
  flags.update((name, value) for name, value in (outputs or {}).items() if name in output_kinds)
  flags.update(overrides)
  return [f"--{name}={value}" for name, value in flags.items() if value is not None]


def _assert_one_line_error(result, script, pattern):
  assert result.returncode == 1, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith(f"{script}: error: "), last_line
  assert re.search(pattern, last_line), last_line


OUTPUT_CASES = [(script, flag, case)
                for script, (_, outputs) in SCRIPTS.items()
                for flag in outputs
                for case in ("wrong_kind", "parent_is_a_file", "cannot_create")]


@pytest.mark.parametrize("script, flag, case", OUTPUT_CASES)
def test_an_output_location_that_cannot_be_written_fails_before_any_work(
    model_files, tmp_path, script, flag, case):
  vocab_file, write_config = model_files
  kind = SCRIPTS[script][1][flag]
  a_file = tmp_path / "a_file"
  a_file.write_text("x")
  if case == "wrong_kind":
    location = a_file if kind == "dir" else tmp_path
    expected = "is a file, expected a directory" if kind == "dir" else "is a directory"
  elif case == "parent_is_a_file":
    location = a_file / "out"
    expected = (f"{a_file} is a file, not a directory" if kind == "dir"
                else f"directory {a_file} is not a directory")
  else:
    # /proc takes no new files, even from root (the tests may run as root, for whom a read-only
    # mode bit is no obstacle).
    location = pathlib.Path("/proc/bert-output-test" + ("/out" if kind == "dir" else ".txt"))
    expected = "cannot create files in /proc"
  result = scripts.run_in_process(script, *_flags(script, tmp_path, vocab_file, write_config(),
                                               {flag: str(location)}))
  _assert_one_line_error(result, script, re.escape(f"--{flag}={location}: ") + re.escape(expected))
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
      ["a_file", "bert_config.json", "text.txt"])


@pytest.mark.parametrize("script", ["create_pretraining_data.py", "extract_features.py",
                                    "learn_vocab.py"])
def test_an_output_file_in_a_missing_directory_fails_before_any_work(model_files, tmp_path,
                                                                      script):
  vocab_file, write_config = model_files
  flag = next(iter(SCRIPTS[script][1]))
  location = tmp_path / "missing" / "out.txt"
  result = scripts.run_in_process(script, *_flags(script, tmp_path, vocab_file, write_config(),
                                               {flag: str(location)}))
  _assert_one_line_error(result, script, re.escape(
      f"--{flag}={location}: directory {tmp_path / 'missing'} does not exist"))


@pytest.mark.parametrize("script", TOKENIZING_MODEL_SCRIPTS)
def test_a_vocab_larger_than_the_config_fails_before_any_work(model_files, tmp_path, script):
  vocab_file, write_config = model_files
  vocab_size = sum(1 for _ in open(vocab_file, encoding="utf-8"))
  config_file = write_config(vocab_size=vocab_size - 1)
  result = scripts.run_in_process(script, *_flags(script, tmp_path, vocab_file, config_file,
                                               {"export_dir": str(tmp_path / "export")}))
  _assert_one_line_error(result, script, re.escape(
      f"--vocab_file={vocab_file} has {vocab_size} entries, more than vocab_size "
      f"{vocab_size - 1} of {config_file}"))
  assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
  assert not (tmp_path / "export").exists()


@pytest.mark.parametrize("script", TOKENIZING_MODEL_SCRIPTS + ("run_pretraining.py",))
def test_max_seq_length_beyond_the_position_table_or_below_the_minimum_fails(
    model_files, tmp_path, script):
  vocab_file, write_config = model_files
  config_file = write_config(max_position_embeddings=64)
  for length, expected in ((65, "exceeds max_position_embeddings 64"), (2, "must be at least")):
    result = scripts.run_in_process(script, *_flags(script, tmp_path, vocab_file, config_file,
                                                 {"export_dir": str(tmp_path / "export")},
                                                 max_seq_length=length))
    _assert_one_line_error(result, script, re.escape(f"--max_seq_length={length}") + ".*"
                           + re.escape(expected))


def _pair_inputs(script, tmp_path):
  """Flag overrides giving `script` inputs with two segments."""
  if script == "run_classifier.py":
    data_dir = tmp_path / "pairs"
    data_dir.mkdir()
    (data_dir / "train.tsv").write_text("a\tb\tlabel\nthe bees fly\tthe hive\tyes\n"
                                        "the river\truns fast\tno\n")
    return {"data_dir": str(data_dir), "text_a_column": "0", "text_b_column": "1",
            "label_column": "2", "has_header": "true"}
  if script == "extract_features.py":
    (tmp_path / "pairs.txt").write_text("the bees fly\nthe river ||| runs fast\n")
    return {"input_file": str(tmp_path / "pairs.txt")}
  return {}


@pytest.mark.parametrize("script, expected", [
    ("run_classifier.py", "the train examples of task 'tsv' are sentence pairs"),
    ("run_squad.py", "SQuAD packs question and context as two segments"),
    ("run_multiple_choice.py", "each choice packs context and ending as two segments"),
    ("extract_features.py", "line 2 is a text pair"),
])
def test_two_segments_with_a_one_segment_config_fail_before_any_work(
    model_files, tmp_path, script, expected):
  vocab_file, write_config = model_files
  config_file = write_config(type_vocab_size=1)
  result = scripts.run_in_process(script, *_flags(script, tmp_path, vocab_file, config_file,
                                               **_pair_inputs(script, tmp_path)))
  _assert_one_line_error(result, script, re.escape(expected) + ".*" + re.escape(
      f"type_vocab_size 1 of {config_file} allows 1 segment(s)"))
  assert not list((tmp_path / "out").glob("model.ckpt-*"))


@pytest.mark.parametrize("script", FINE_TUNING_RUNNERS + ("run_pretraining.py",))
def test_evaluating_without_training_or_weights_fails_before_any_work(model_files, tmp_path,
                                                                      script):
  vocab_file, write_config = model_files
  action = "do_predict" if script == "run_squad.py" else "do_eval"
  overrides = {"do_train": None, action: "true", "predict_file": str(SAMPLES_DIR / "squad" /
                                                                      "dev.json")}
  if script != "run_squad.py":
    overrides.pop("predict_file")
  result = scripts.run_in_process(script, *_flags(script, tmp_path, vocab_file, write_config(),
                                               **overrides))
  _assert_one_line_error(result, script, re.escape(
      f"--{action} without --do_train needs a checkpoint in --output_dir="))


@pytest.mark.parametrize("script, flag, value, expected", [
    *[(script, "train_batch_size", "0", "--train_batch_size must be positive, got 0")
      for script in FINE_TUNING_RUNNERS + ("run_pretraining.py",)],
    *[(script, "learning_rate", "-1e-5", "--learning_rate must be positive, got -1e-05")
      for script in FINE_TUNING_RUNNERS + ("run_pretraining.py",)],
    *[(script, "export_ids_only", "true", "--export_ids_only needs --export_dir")
      for script in FINE_TUNING_RUNNERS],
    ("extract_features.py", "batch_size", "0", "--batch_size must be positive, got 0"),
])
def test_a_flag_value_without_sense_fails_before_any_work(model_files, tmp_path, script, flag,
                                                          value, expected):
  vocab_file, write_config = model_files
  result = scripts.run_in_process(script, *_flags(script, tmp_path, vocab_file, write_config(),
                                               **{flag: value}))
  _assert_one_line_error(result, script, re.escape(expected))


@pytest.fixture
def deeper_checkpoint(model_files, tmp_path):
  """A checkpoint of the tiny model with 3 encoder layers instead of 2 (heads included)."""
  vocab_file, write_config = model_files
  config = bert_config.BertConfig.from_json_file(write_config(num_hidden_layers=3))
  model = pretraining_model.BertPretrainingModel(config)
  prefix = str(tmp_path / "deeper" / "bert_model.ckpt")
  checkpoint_io.write_checkpoint(prefix, model.name_to_variable())
  return prefix


@pytest.mark.parametrize("script", TOKENIZING_MODEL_SCRIPTS + ("run_pretraining.py",))
def test_a_checkpoint_that_does_not_fit_the_config_fails_before_any_work(
    model_files, deeper_checkpoint, tmp_path, script):
  vocab_file, write_config = model_files
  flags = _flags(script, tmp_path, vocab_file, write_config(),
                 {"export_dir": str(tmp_path / "export")}, init_checkpoint=deeper_checkpoint)
  if script == "run_pretraining.py":
    records = pretraining_records.write_records(tmp_path / "records.tfrecord", max_id=50)
    flags += [f"--input_file={records}", "--max_predictions_per_seq=5"]
  result = scripts.run_in_process(script, *flags)
  _assert_one_line_error(result, script, re.escape(
      f"{deeper_checkpoint} does not fit {tmp_path / 'bert_config.json'}: the checkpoint has 3 "
      "encoder layers, the config 2"))
  assert not list((tmp_path / "out").glob("model.ckpt-*"))
  assert not (tmp_path / "export").exists()


# script -> (flag overrides writing its input with a byte that is not UTF-8, what it does then:
# "reads" (the bad bytes replaced and counted, as the original's tokenizer dropped them) or the
# message naming the file). Structured formats (TSV/CSV, JSON) are refused: a replaced byte
# there could be a delimiter or quote the file did not hold.
LATIN1 = "café au lait\n\nun thé\n".encode("latin-1")


def _undecodable_input(script, tmp_path):
  data_dir = tmp_path / "latin1"
  data_dir.mkdir()
  if script in ("create_pretraining_data.py", "learn_vocab.py", "extract_features.py"):
    (data_dir / "input.txt").write_bytes(LATIN1)
    return {"input_file": str(data_dir / "input.txt")}, "reads"
  if script == "run_ner.py":
    (data_dir / "train.txt").write_bytes("Zürich B-LOC\nis O\n\nParis B-LOC\n".encode("latin-1"))
    return {"data_dir": str(data_dir)}, "reads"
  if script == "run_classifier.py":
    (data_dir / "train.tsv").write_bytes("sentence\tlabel\ncafé\ta\nthé\tb\n".encode("latin-1"))
    return {"data_dir": str(data_dir)}, f"{data_dir / 'train.tsv'}: not UTF-8 text"
  if script == "run_multiple_choice.py":
    (data_dir / "train.jsonl").write_bytes('{"context": "café"}\n'.encode("latin-1"))
    return {"data_dir": str(data_dir)}, f"{data_dir / 'train.jsonl'}: not UTF-8 text"
  (data_dir / "train.json").write_bytes('{"version": "v2.0", "data": ["café"]}'.encode("latin-1"))
  return {"train_file": str(data_dir / "train.json")}, f"{data_dir / 'train.json'}: not valid JSON"


@pytest.mark.parametrize("script", ["create_pretraining_data.py", "learn_vocab.py",
                                    "extract_features.py", *FINE_TUNING_RUNNERS])
def test_undecodable_input_is_read_or_refused_in_one_line_by_every_reader(
    model_files, tmp_path, script):
  vocab_file, write_config = model_files
  config_file = write_config()
  overrides, expected = _undecodable_input(script, tmp_path)
  if script == "extract_features.py":
    model = pretraining_model.BertPretrainingModel(bert_config.BertConfig.from_json_file(config_file))
    overrides["init_checkpoint"] = checkpoint_io.write_checkpoint(
        str(tmp_path / "model" / "bert_model.ckpt"), model.name_to_variable())
    overrides["layers"] = "-1"
  flags = _flags(script, tmp_path, vocab_file, config_file, **overrides)
  if script in FINE_TUNING_RUNNERS:
    flags += ["--num_train_epochs=1", "--train_batch_size=2"]
  result = scripts.run_in_process(script, *flags)
  if expected == "reads":
    assert result.returncode == 0, result.stderr[-3000:]
    assert "not valid UTF-8" in result.stderr or "undecodable" in result.stderr.lower() or (
        "U+FFFD" in result.stderr), result.stderr[-2000:]
  else:
    _assert_one_line_error(result, script, re.escape(expected))
