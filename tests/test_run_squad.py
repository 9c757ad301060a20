"""run_squad.py end to end: the shipped v2.0 sample with a tiny model, a real SQuAD slice with the
real MiniLM weights (the path of the README's example, on a tiny slice), and bad input."""

import json

import pytest

from data import file_patterns
from tasks.squad import reader as squad_reader
from tests import scripts
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow

SAMPLE_TRAIN = SAMPLES_DIR / "squad" / "train.json"
SAMPLE_DEV = SAMPLES_DIR / "squad" / "dev.json"


run_squad = scripts.fine_tuning_runner("run_squad.py")


def question_ids(path):
  dataset = json.loads(path.read_text(encoding="utf-8"))
  return [qa["id"] for article in dataset["data"] for paragraph in article["paragraphs"]
          for qa in paragraph["qas"]]


def test_v2_sample_run_writes_predictions_and_official_scores(tiny_model, tmp_path):
  vocab_file, config_file = tiny_model
  # The script itself, as a user starts it; the other runs here call its run in this process.
  result = scripts.fine_tuning_runner("run_squad.py", in_process=False)(
      f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--output_dir={tmp_path}", "--do_train", f"--train_file={SAMPLE_TRAIN}", "--do_predict",
      f"--predict_file={SAMPLE_DEV}", "--version_2_with_negative", "--max_seq_length=48",
      "--doc_stride=16", "--max_query_length=16", "--train_batch_size=8",
      "--num_train_epochs=1", "--learning_rate=1e-3", "--predict_batch_size=5",
      "--n_best_size=4")
  assert result.returncode == 0, result.stderr[-3000:]
  ids = question_ids(SAMPLE_DEV)
  predictions = json.loads((tmp_path / "predictions.json").read_text())
  nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())
  null_odds = json.loads((tmp_path / "null_odds.json").read_text())
  assert sorted(predictions) == sorted(nbest) == sorted(null_odds) == sorted(ids)
  for qas_id in ids:
    entries = nbest[qas_id]
    assert 1 <= len(entries) <= 5  # n_best_size, plus the null answer appended for v2.0
    assert sum(entry["probability"] for entry in entries) == pytest.approx(1.0, abs=1e-6)
    assert "" in [entry["text"] for entry in entries]
    # The prediction is "" exactly when the null score beats the best span by more than 0.
    assert (predictions[qas_id] == "") == (null_odds[qas_id] > 0.0)
  results = json.loads((tmp_path / "eval_results.json").read_text())
  assert results["total"] == len(ids)
  assert results["HasAns_total"] + results["NoAns_total"] == len(ids)
  assert {"exact", "f1", "best_f1", "best_f1_thresh", "HasAns_f1", "NoAns_f1"} <= set(results)
  assert 0.0 <= results["exact"] <= results["f1"] <= 100.0
  assert "global_step" in (tmp_path / "eval_results.txt").read_text()
  records = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".tf_record")
  assert records == ["eval.tf_record", "train.tf_record"]


def test_v1_prediction_from_the_trained_checkpoint_alone(tiny_model, tmp_path):
  vocab_file, config_file = tiny_model
  common = [f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
            f"--output_dir={tmp_path}", "--max_seq_length=48", "--doc_stride=16",
            "--max_query_length=16"]
  # v1.1 training refuses the sample's unanswerable questions...
  result = run_squad(*common, "--do_train", f"--train_file={SAMPLE_TRAIN}")
  assert result.returncode != 0
  assert "is unanswerable (is_impossible); train on it with --version_2_with_negative" in (
      result.stderr.strip().splitlines()[-1])
  # ... so train on the answerable ones, then predict in a second run from output_dir.
  dataset = json.loads(SAMPLE_TRAIN.read_text(encoding="utf-8"))
  for article in dataset["data"]:
    for paragraph in article["paragraphs"]:
      paragraph["qas"] = [qa for qa in paragraph["qas"] if not qa["is_impossible"]]
  dataset["version"] = "1.1"
  answerable = tmp_path / "answerable.json"
  answerable.write_text(json.dumps(dataset), encoding="utf-8")
  result = run_squad(*common, "--do_train", f"--train_file={answerable}",
                     "--train_batch_size=8", "--num_train_epochs=1")
  assert result.returncode == 0, result.stderr[-3000:]
  result = run_squad(*common, "--do_predict", f"--predict_file={answerable}")
  assert result.returncode == 0, result.stderr[-3000:]
  predictions = json.loads((tmp_path / "predictions.json").read_text())
  assert sorted(predictions) == sorted(question_ids(answerable))
  assert all(predictions.values())  # v1.1 always answers
  assert not (tmp_path / "null_odds.json").exists()
  results = json.loads((tmp_path / "eval_results.json").read_text())
  assert set(results) == {"exact_match", "f1", "total", "missing"}
  assert results["total"] == len(predictions) and results["missing"] == 0
  # Dynamic padding (the default off TPU) batches windows at their own length; padding is masked,
  # so every window scores as when padded to max_seq_length.
  nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())
  result = run_squad(*common, "--do_predict", f"--predict_file={answerable}",
                     "--dynamic_padding=false")
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads((tmp_path / "predictions.json").read_text()) == predictions
  padded_nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())
  for qas_id, entries in nbest.items():
    assert [e["text"] for e in padded_nbest[qas_id]] == [e["text"] for e in entries]
    for padded, dynamic in zip(padded_nbest[qas_id], entries):
      assert padded["start_logit"] == pytest.approx(dynamic["start_logit"], abs=1e-4)
      assert padded["end_logit"] == pytest.approx(dynamic["end_logit"], abs=1e-4)


def test_minilm_on_a_real_squad_slice(minilm_bert_dir, shared_data, tmp_path):
  source = shared_data / "squad/squad-v2.0-16-articles.json"
  if not source.is_file():
    pytest.skip(f"{source} is absent")
  dataset = json.loads(source.read_text(encoding="utf-8"))
  paragraphs = dataset["data"][0]["paragraphs"]
  train = {"version": "v2.0", "data": [{"title": "train", "paragraphs": paragraphs[:2]}]}
  dev = {"version": "v2.0", "data": [{"title": "dev", "paragraphs": paragraphs[2:3]}]}
  (tmp_path / "train.json").write_text(json.dumps(train), encoding="utf-8")
  (tmp_path / "dev.json").write_text(json.dumps(dev), encoding="utf-8")
  result = run_squad(f"--vocab_file={minilm_bert_dir / 'vocab.txt'}",
                     f"--bert_config_file={minilm_bert_dir / 'bert_config.json'}",
                     f"--init_checkpoint={minilm_bert_dir / 'bert_model.ckpt'}",
                     f"--output_dir={tmp_path / 'out'}", "--do_train",
                     f"--train_file={tmp_path / 'train.json'}", "--do_predict",
                     f"--predict_file={tmp_path / 'dev.json'}", "--version_2_with_negative",
                     "--max_seq_length=128", "--doc_stride=64", "--train_batch_size=8",
                     "--num_train_epochs=1", "--learning_rate=5e-5")
  assert result.returncode == 0, result.stderr[-3000:]
  # The encoder comes from the checkpoint; only the span layer is new.
  assert "trained from scratch): cls/squad/output_bias and cls/squad/output_weights;" in (
      result.stderr)
  predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
  assert sorted(predictions) == sorted(question_ids(tmp_path / "dev.json"))
  results = json.loads((tmp_path / "out" / "eval_results.json").read_text())
  assert results["total"] == len(predictions)
  # Every non-empty prediction is a span of its context (text recovered from the context).
  context = paragraphs[2]["context"]
  assert all(text in context for text in predictions.values())


@pytest.mark.parametrize("case, flags, message", [
    ("nothing_to_do", [], "at least one of --do_train, --do_predict, --export_dir is needed"),
    ("no_train_file", ["--do_train"], "--do_train needs --train_file"),
    ("query_too_long", ["--do_train", f"--train_file={SAMPLE_TRAIN}", "--max_seq_length=40",
                        "--max_query_length=37"],
     "--max_seq_length=40 leaves no room for the context: it must be more than "
     "--max_query_length + 3 = 40"),
])
def test_bad_flags_fail_before_any_work(tiny_model, tmp_path, case, flags, message):
  vocab_file, config_file = tiny_model
  output_dir = tmp_path / case
  result = scripts.run_in_process("run_squad.py", f"--vocab_file={vocab_file}",
                                  f"--bert_config_file={config_file}",
                                  f"--output_dir={output_dir}", "--max_seq_length=48", *flags)
  assert result.returncode != 0
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line == f"run_squad.py: error: {message}"
  assert not output_dir.exists()


BAD_FILES = [
    ("malformed", '{"version": "v2.0", "data": [{"title": ', "not valid JSON"),
    ("no_version", '{"data": []}', "no 'version' key"),
    ("no_data", '{"version": "v2.0"}', "no 'data' key"),
    ("moved_offset", json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": "Bees make honey.", "qas": [{"id": "q1", "question": "What?",
                                               "answers": [{"text": "honey",
                                                            "answer_start": 4}]}]}]}]}),
     "question 'q1': answer 'honey' is not at answer_start 4"),
    *[(case, json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        dict({"context": "Bees make honey.", "qas": [
            dict({"id": "q1", "question": "What?",
                  "answers": [dict({"text": "honey", "answer_start": 10}, **answer)]},
                 **qa)]}, **paragraph)]}]}), message)
      for case, paragraph, qa, answer, message in [
          ("null_context", {"context": None}, {}, {},
           "article 0 paragraph 0: 'context' must be a string, got null"),
          ("qas_not_a_list", {"qas": {"id": "q1"}}, {}, {},
           "article 0 paragraph 0: 'qas' must be a list, got {\"id\": \"q1\"}"),
          ("question_not_a_string", {}, {"question": 5}, {},
           "question 'q1': 'question' must be a string, got 5"),
          ("string_answer_start", {}, {}, {"answer_start": "10"},
           "question 'q1': 'answer_start' must be an integer, got \"10\""),
          ("string_is_impossible", {}, {"is_impossible": "false"}, {},
           "question 'q1': 'is_impossible' must be true or false, got \"false\""),
      ]],
]
# Read from training files only.
TRAINING_ONLY = ("moved_offset", "string_answer_start", "string_is_impossible")


BAD_CASES = [(*bad, role) for bad in BAD_FILES for role in ("train", "predict")
             if not (bad[0] in TRAINING_ONLY and role == "predict")]


def write_bad_file(tmp_path, case, content):
  path = tmp_path / f"{case}.json"
  path.write_text(content, encoding="utf-8")
  return path


# Answer offsets matter only for training (the scorer reads answer texts), so a moved offset is a
# training-file error only. The runner reads its files with `reader.read_examples` and stops
# with its message as the last line (test_bad_files_stop_the_runner_before_it_writes_anything,
# one case per role); here every case, in this process.
@pytest.mark.parametrize("case, content, message, role", BAD_CASES)
def test_bad_files_are_named_with_what_is_wrong(tmp_path, case, content, message, role):
  path = write_bad_file(tmp_path, case, content)
  with pytest.raises(file_patterns.InputError) as error:
    squad_reader.read_examples(str(path), is_training=role == "train",
                               version_2_with_negative=True)
  assert str(error.value).startswith(f"{path}: ")
  assert message in str(error.value)


@pytest.mark.parametrize("case, content, message, role", [
    bad for bad in BAD_CASES if (bad[0], bad[3]) in (("moved_offset", "train"),
                                                     ("malformed", "predict"))])
def test_bad_files_stop_the_runner_before_it_writes_anything(tiny_model, tmp_path, case, content,
                                                              message, role):
  vocab_file, config_file = tiny_model
  path = write_bad_file(tmp_path, case, content)
  files = {"train": SAMPLE_TRAIN, "predict": SAMPLE_DEV, role: path}
  output_dir = tmp_path / "output"
  # Whichever file is bad, it is found before anything is written: not even the good file's
  # records are left behind.
  result = scripts.run_in_process(
      "run_squad.py", f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--output_dir={output_dir}", "--max_seq_length=48", "--max_query_length=16",
      "--do_train", f"--train_file={files['train']}", "--do_predict",
      f"--predict_file={files['predict']}", "--version_2_with_negative")
  assert result.returncode != 0
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith(f"run_squad.py: error: {path}: ")
  assert message in last_line
  assert not output_dir.exists()


@pytest.mark.parametrize("data", [
    [],
    [{"title": "t", "paragraphs": [{"context": "the bees fly", "qas": []}]}],
])
def test_training_on_no_question_is_refused_before_any_work(tiny_model, tmp_path, data):
  vocab_file, config_file = tiny_model
  train_file = tmp_path / "train.json"
  train_file.write_text(json.dumps({"version": "1.1", "data": data}))
  result = scripts.run_in_process(
      "run_squad.py", f"--train_file={train_file}", f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'out'}", "--do_train",
      "--max_seq_length=32", "--max_query_length=8", "--distribution_strategy=one_device")
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      f"run_squad.py: error: {train_file}: no question to train on (questions whose answer is "
      "not found in their context are skipped)")
  assert not (tmp_path / "out").exists()
