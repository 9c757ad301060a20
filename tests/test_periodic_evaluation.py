"""Evaluation while training: the best checkpoint for max and min metrics, early stopping, state
that survives a kill, TensorBoard scalars, and the runners' flags."""

import json
import re
import signal

import numpy as np
import pytest
import tensorflow as tf

from modeling import checkpoint_io
from modeling import optimization
from tests import scripts
from tests import toy_task
from tests.conftest import SAMPLES_DIR
from training import checkpointing
from training import engine
from training import input_pipeline
from training import periodic_evaluation

STRATEGY = tf.distribute.OneDeviceStrategy("/cpu:0")


def _evaluation(output_dir, mode="max", patience=None, is_chief=True, value=1.0):
  return periodic_evaluation.PeriodicEvaluation(
      str(output_dir), {"w": tf.Variable(value)},
      periodic_evaluation.EvaluationConfig(every_steps=10, metric="m", mode=mode,
                                           patience=patience), is_chief=is_chief)


def _best_state(output_dir):
  return json.loads((output_dir / "best" / "best.json").read_text())


@pytest.mark.parametrize("mode, scores, best_step", [
    ("max", [0.5, 0.9, 0.7, 0.9], 20),   # a tie does not replace the earlier best
    ("min", [0.5, 0.9, 0.2, 0.3], 30),
])
def test_the_best_checkpoint_has_the_best_metric(tmp_path, mode, scores, best_step):
  evaluation = _evaluation(tmp_path, mode)
  evaluation.resume(0)
  for index, score in enumerate(scores):
    evaluation.record(10 * (index + 1), {"m": score, "other": 1.0}, seconds=0.1)
  assert evaluation.best_step == best_step
  assert _best_state(tmp_path)["step"] == best_step
  assert sorted(p.name for p in (tmp_path / "best").glob("*.index")) == [
      f"model.ckpt-{best_step}.index"]
  assert tf.train.latest_checkpoint(str(tmp_path / "best")).endswith(f"model.ckpt-{best_step}")
  history = [json.loads(line) for line in
             (tmp_path / periodic_evaluation.HISTORY_FILENAME).read_text().splitlines()]
  assert [(entry["step"], entry["metrics"]["m"]) for entry in history] == [
      (10 * (i + 1), s) for i, s in enumerate(scores)]


def test_early_stopping_stops_when_patience_runs_out(tmp_path):
  evaluation = _evaluation(tmp_path, patience=2)
  evaluation.resume(0)
  reasons = []
  for step, score in [(10, 0.5), (20, 0.6), (30, 0.55), (40, 0.6), (50, 0.9)]:
    evaluation.record(step, {"m": score}, seconds=0.1)
    reasons.append(evaluation.stop_reason())
  assert reasons[:3] == [None, None, None]
  assert reasons[3] is not None and "2 evaluation(s) since the best m = 0.6 at step 20" in (
      reasons[3])


def test_resume_keeps_the_best_and_a_worse_evaluation_does_not_replace_it(tmp_path):
  first = _evaluation(tmp_path, value=1.0)
  first.resume(0)
  first.record(10, {"m": 0.5}, seconds=0.1)
  first.record(20, {"m": 0.9}, seconds=0.1)
  # Killed after the evaluation of step 20, resumed from the checkpoint of step 15.
  second = _evaluation(tmp_path, value=2.0)
  second.resume(15)
  assert [entry["step"] for entry in second.history] == [10]
  assert (second.best_step, second.best_value) == (20, 0.9)
  assert not second.record(20, {"m": 0.8}, seconds=0.1)
  assert _best_state(tmp_path)["step"] == 20
  kept = checkpoint_io.read_checkpoint(str(tmp_path / "best" / "model.ckpt-20"))
  assert kept["w"] == 1.0


def test_a_non_chief_process_writes_nothing(tmp_path):
  evaluation = _evaluation(tmp_path / "out", is_chief=False)
  evaluation.resume(0)
  assert evaluation.record(10, {"m": 0.5}, seconds=0.1)
  assert evaluation.best_step == 10
  assert not (tmp_path / "out").exists()


def _trainer(output_dir, num_train_steps):
  config = engine.RunConfig(output_dir=str(output_dir), num_train_steps=num_train_steps,
                            train_batch_size=8, steps_per_loop=4, save_checkpoints_steps=4)
  return engine.Trainer(STRATEGY, toy_task.ToyTask(), config,
                        lambda: optimization.create_optimizer(0.05, num_train_steps, 1))


def test_the_engine_evaluates_stops_early_and_restores_the_best(tmp_path):
  data_path = toy_task.write_records(tmp_path / "toy.tfrecord", 64)
  input_fn = input_pipeline.make_input_fn([data_path], toy_task.FEATURE_SPEC, 8, True,
                                          shuffle_buffer_size=0, seed=0)
  trainer = _trainer(tmp_path / "out", num_train_steps=20)
  scores = {2: 0.1, 4: 0.7, 6: 0.3, 8: 0.2, 10: 0.6}
  weights_at = {}

  def evaluate():
    step = int(trainer.global_step.numpy())
    weights_at[step] = {n: v.numpy().copy() for n, v in trainer.model_variables.items()}
    return {"score": scores[step]}

  config = periodic_evaluation.EvaluationConfig(every_steps=2, metric="score", patience=3)
  result = trainer.train(input_fn, config, evaluate)
  assert result["global_step"] == 10   # evaluations at 6, 8, 10 did not beat step 4's
  assert sorted(weights_at) == [2, 4, 6, 8, 10]
  assert trainer.restore_best().endswith("best/model.ckpt-4")
  assert int(trainer.global_step.numpy()) == 4
  for name, variable in trainer.model_variables.items():
    np.testing.assert_array_equal(variable.numpy(), weights_at[4][name])
  # TensorBoard: the eval run holds the metric against the step.
  logged = {}
  for event_file in (tmp_path / "out" / "eval").glob("events.out.tfevents.*"):
    for event in tf.compat.v1.train.summary_iterator(str(event_file)):
      for value in event.summary.value:
        logged[(value.tag, event.step)] = float(tf.make_ndarray(value.tensor))
  assert {step: logged[("score", step)] for step in scores} == pytest.approx(scores)
  # A new run in the same directory does not train on past the early stop; a run that only
  # predicts or exports uses the best checkpoint.
  again = _trainer(tmp_path / "out", num_train_steps=20)
  assert again.train(input_fn, config, evaluate)["global_step"] == 10
  assert _trainer(tmp_path / "out", num_train_steps=20).best_checkpoint().endswith(
      "best/model.ckpt-4")
  # Trained on without evaluations, the old best no longer stands for the run.
  without_evaluation = _trainer(tmp_path / "out", num_train_steps=12)
  assert without_evaluation.train(input_fn)["global_step"] == 12
  assert without_evaluation.restore_best() is None
  assert _trainer(tmp_path / "out", num_train_steps=12).best_checkpoint() is None


@pytest.mark.slow
def test_sigkill_between_evaluations_keeps_the_best(tmp_path):
  data_path = toy_task.write_records(tmp_path / "toy.tfrecord", 16)
  output_dir = tmp_path / "out"
  common = [f"--input_file={data_path}", f"--output_dir={output_dir}",
            "--distribution_strategy=one_device", "--train_batch_size=8",
            "--num_train_steps=9", "--save_checkpoints_steps=2", "--steps_per_loop=1",
            "--eval_every_steps=3", "--scripted_scores=3:0.9,6:0.5,9:0.95"]
  killed = scripts.run_toy_runner(*common, f"--result_file={tmp_path}/killed.json",
                                  "--sigkill_after_checkpoint=4")
  assert killed.returncode == -signal.SIGKILL
  assert _best_state(output_dir)["step"] == 3
  resumed = scripts.run_toy_runner(*common, f"--result_file={tmp_path}/resumed.json")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "Resuming at global step 4" in resumed.stderr
  history = [json.loads(line)["step"] for line in
             (output_dir / periodic_evaluation.HISTORY_FILENAME).read_text().splitlines()]
  assert history == [3, 6, 9]
  # Step 6's worse score kept step 3's checkpoint; step 9's better one replaced it.
  assert re.search(r"New best score = 0\.95 at step 9", resumed.stderr)
  assert "New best score = 0.5" not in resumed.stderr
  assert _best_state(output_dir)["step"] == 9
  assert sorted(p.name for p in (output_dir / "best").glob("*.index")) == ["model.ckpt-9.index"]


def _classifier(tmp_path, tiny_model, *flags, run=scripts.run_script):
  vocab_file, config_file = tiny_model
  return run(
      "run_classifier.py", "--distribution_strategy=one_device", "--task_name=tsv",
      f"--data_dir={SAMPLES_DIR / 'classification'}", f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'out'}",
      "--max_seq_length=32", "--train_batch_size=8", "--learning_rate=1e-3", "--seed=3", *flags)


@pytest.mark.slow
def test_run_classifier_evaluates_and_ends_on_the_best_checkpoint(tmp_path, tiny_model):
  result = _classifier(tmp_path, tiny_model, "--do_train", "--do_eval", "--num_train_epochs=6",
                       "--eval_every_steps=5", "--best_checkpoint_metric=eval_loss")
  assert result.returncode == 0, result.stderr[-3000:]
  output_dir = tmp_path / "out"
  history = [json.loads(line) for line in
             (output_dir / periodic_evaluation.HISTORY_FILENAME).read_text().splitlines()]
  assert [entry["step"] for entry in history] == [5, 10, 15, 20, 25, 30, 31]
  best = min(history, key=lambda entry: entry["metrics"]["eval_loss"])
  assert _best_state(output_dir) | {"checkpoint": None} == {
      "step": best["step"], "metric": "eval_loss", "mode": "min",
      "value": best["metrics"]["eval_loss"], "checkpoint": None}
  final = scripts.read_eval_results(output_dir / "eval_results.txt")
  assert final["global_step"] == best["step"]
  assert final["eval_loss"] == pytest.approx(best["metrics"]["eval_loss"], rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("flags, expected", [
    (("--do_eval", "--eval_every_steps=0"), "--eval_every_steps must be positive, got 0"),
    (("--do_eval", "--eval_every_steps=5", "--best_checkpoint_metric=bleu"),
     "--best_checkpoint_metric=bleu: not a metric of this task; its metrics: eval_accuracy, "
     "eval_loss"),
    (("--do_eval", "--early_stopping_patience=2"), "--early_stopping_patience needs "
     "--eval_every_steps"),
    (("--eval_every_steps=5",), "--eval_every_steps needs dev data to evaluate on"),
])
def test_bad_evaluation_flags_are_one_line_errors_before_any_work(tmp_path, tiny_model, flags,
                                                                   expected):
  result = _classifier(tmp_path, tiny_model, "--do_train", "--num_train_epochs=1", *flags,
                       run=scripts.run_in_process)
  assert result.returncode == 1, result.stderr[-3000:]
  assert "Traceback" not in result.stderr
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith(f"run_classifier.py: error: {expected}"), last_line
  assert not (tmp_path / "out" / "train.tf_record").exists()


FAMILY_RUNS = {
    "run_ner.py": ((f"--data_dir={SAMPLES_DIR / 'ner'}", "--do_eval"), "f1"),
    "run_multiple_choice.py": (("--task_name=jsonl", f"--data_dir={SAMPLES_DIR / 'multiple_choice'}",
                                "--do_eval"), "eval_accuracy"),
    "run_squad.py": ((f"--train_file={SAMPLES_DIR / 'squad' / 'train.json'}",
                      f"--predict_file={SAMPLES_DIR / 'squad' / 'dev.json'}",
                      "--version_2_with_negative", "--do_predict", "--doc_stride=16",
                      "--max_query_length=8"), "f1"),
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(FAMILY_RUNS))
def test_every_family_evaluates_while_training_by_its_default_metric(tmp_path, tiny_model,
                                                                     script):
  flags, metric = FAMILY_RUNS[script]
  vocab_file, config_file = tiny_model
  result = scripts.run_in_process(
      script, "--distribution_strategy=one_device", f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'out'}",
      "--max_seq_length=32", "--train_batch_size=4", "--learning_rate=1e-3", "--seed=3",
      "--do_train", "--num_train_epochs=2", "--eval_every_steps=2", *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  history = [json.loads(line) for line in
             (tmp_path / "out" / periodic_evaluation.HISTORY_FILENAME).read_text().splitlines()]
  assert len(history) >= 2 and all(metric in entry["metrics"] for entry in history)
  state = _best_state(tmp_path / "out")
  assert state["metric"] == metric and state["mode"] == "max"
  assert state["value"] == max(entry["metrics"][metric] for entry in history)
  assert f"Using the best checkpoint {tmp_path / 'out' / 'best' / state['checkpoint']}" in (
      result.stderr)


def _history_steps(output_dir):
  return [json.loads(line)["step"] for line in
          (output_dir / periodic_evaluation.HISTORY_FILENAME).read_text().splitlines()]


def test_a_kill_between_keeping_the_best_and_recording_it_is_evaluated_again(tmp_path,
                                                                            monkeypatch):
  first = _evaluation(tmp_path, value=1.0)
  first.resume(0)
  first.record(10, {"m": 0.5}, seconds=0.1)
  history_path = str(tmp_path / periodic_evaluation.HISTORY_FILENAME)
  real_open = periodic_evaluation.atomic_files.open_for_writing

  def killed_at_the_history(path, *args, **kwargs):
    if path == history_path:
      raise KeyboardInterrupt("killed")
    return real_open(path, *args, **kwargs)

  monkeypatch.setattr(periodic_evaluation.atomic_files, "open_for_writing", killed_at_the_history)
  with pytest.raises(KeyboardInterrupt):
    first.record(20, {"m": 0.9}, seconds=0.1)
  monkeypatch.undo()
  assert _best_state(tmp_path)["step"] == 20 and _history_steps(tmp_path) == [10]
  # Resumed from the checkpoint of step 20, saved before its evaluation: evaluated again first.
  second = _evaluation(tmp_path, value=1.0)
  second.resume(20)
  assert second.pending_step(20, num_train_steps=100) == 20
  assert not second.record(20, {"m": 0.875}, seconds=0.1)
  assert _history_steps(tmp_path) == [10, 20]
  assert (_best_state(tmp_path)["step"], _best_state(tmp_path)["value"]) == (20, 0.875)
  assert second.pending_step(20, num_train_steps=100) is None


def test_resume_removes_what_a_kill_left_in_best(tmp_path):
  first = _evaluation(tmp_path)
  first.resume(0)
  first.record(10, {"m": 0.5}, seconds=0.1)
  first.record(20, {"m": 0.9}, seconds=0.1)
  best = tmp_path / "best"
  # A kill inside SaveV2 of a later best, and one part-way through deleting an older best.
  (best / "model.ckpt-30.tmp-999999.data-00000-of-00001.tempstate123").write_bytes(b"")
  (best / "model.ckpt-10.data-00000-of-00001").write_bytes(b"\0" * 8)
  (best / "model.ckpt-5.index").write_bytes(b"\0" * 8)
  second = _evaluation(tmp_path)
  second.resume(20)
  assert sorted(p.name for p in best.iterdir()) == [
      "best.json", "checkpoint", "model.ckpt-20.data-00000-of-00001", "model.ckpt-20.index"]
  assert second.best_step == 20


def test_resume_keeps_the_historys_best_when_best_json_names_a_worse_one(tmp_path):
  evaluation = _evaluation(tmp_path, value=3.0)
  evaluation.resume(0)
  evaluation.record(10, {"m": 0.5}, seconds=0.1)
  # A history that names a better step 20 than best.json's step 10, whose training checkpoint
  # is still in the output directory.
  checkpoint_io.write_checkpoint(str(tmp_path / "model.ckpt-20"), {"w": tf.constant(7.0)})
  with open(tmp_path / periodic_evaluation.HISTORY_FILENAME, "a") as f:
    f.write(json.dumps({"step": 20, "metrics": {"m": 0.9}, "seconds": 0.1}) + "\n")
  resumed = _evaluation(tmp_path)
  resumed.resume(20)
  assert (resumed.best_step, resumed.best_value) == (20, 0.9)
  assert _best_state(tmp_path)["step"] == 20
  assert checkpoint_io.read_checkpoint(str(tmp_path / "best" / "model.ckpt-20"))["w"] == 7.0
  assert not (tmp_path / "best" / "model.ckpt-10.index").exists()


@pytest.mark.parametrize("name, content, message", [
    ("best/best.json", b"{\"step\": 1", r"best\.json: not a JSON object"),
    ("best/best.json", b"{\"step\": \"10\", \"metric\": \"m\", \"mode\": \"max\", "
     b"\"value\": 1, \"checkpoint\": \"model.ckpt-10\"}", r"best\.json: 'step' must be an integer"),
    ("eval_history.jsonl", b"{\"step\": 10, \"metrics\": {}}\n[1]\n",
     r"eval_history\.jsonl:2: expected a JSON object"),
    ("eval_history.jsonl", b"{\"step\": 10, \"metrics\": {\"m\": \"high\"}}\n",
     r"eval_history\.jsonl:1: 'm' must be a number"),
    ("eval_history.jsonl", b"\xff\xfe", r"eval_history\.jsonl:1: not UTF-8"),
])
def test_a_damaged_state_file_is_one_error_naming_it(tmp_path, name, content, message):
  (tmp_path / "best").mkdir()
  (tmp_path / name).write_bytes(content)
  with pytest.raises(periodic_evaluation.EvaluationStateError, match=message):
    _evaluation(tmp_path).resume(10)


def test_the_engine_evaluates_again_the_step_a_killed_evaluation_did_not_record(tmp_path):
  data_path = toy_task.write_records(tmp_path / "toy.tfrecord", 64)
  input_fn = input_pipeline.make_input_fn([data_path], toy_task.FEATURE_SPEC, 8, True,
                                          shuffle_buffer_size=0, seed=0)
  config = periodic_evaluation.EvaluationConfig(every_steps=3, metric="score")
  evaluated = []

  def evaluate_killed_at_6():
    step = int(trainer.global_step.numpy())
    if step == 6:
      raise KeyboardInterrupt("killed during the evaluation of step 6")
    evaluated.append(step)
    return {"score": step / 10}

  trainer = _trainer(tmp_path / "out", num_train_steps=9)
  with pytest.raises(KeyboardInterrupt):
    trainer.train(input_fn, config, evaluate_killed_at_6)
  # Step 6 is not a multiple of save_checkpoints_steps=4; its checkpoint is saved for its
  # evaluation.
  assert tf.train.latest_checkpoint(str(tmp_path / "out")).endswith("model.ckpt-6")
  trainer = _trainer(tmp_path / "out", num_train_steps=9)

  def evaluate():
    step = int(trainer.global_step.numpy())
    evaluated.append(step)
    return {"score": step / 10}

  trainer.train(input_fn, config, evaluate)
  assert evaluated == [3, 6, 9]
  assert _history_steps(tmp_path / "out") == [3, 6, 9]
  assert _best_state(tmp_path / "out")["step"] == 9


def test_deleting_a_checkpoint_removes_its_index_first_and_orphans_are_removed(tmp_path):
  prefix = checkpoint_io.write_checkpoint(str(tmp_path / "model.ckpt-3"), {"w": tf.constant(1.0)})
  removed = []
  real_remove = tf.io.gfile.remove
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(tf.io.gfile, "remove", lambda path: removed.append(path) or real_remove(path))
    checkpointing.delete_checkpoint(prefix)
  assert removed[0].endswith(".index") and len(removed) == 2
  orphan = tmp_path / "model.ckpt-4.data-00000-of-00001"
  orphan.write_bytes(b"\0")
  checkpoint_io.write_checkpoint(str(tmp_path / "model.ckpt-5"), {"w": tf.constant(1.0)})
  assert checkpointing.remove_orphan_data(str(tmp_path)) == [str(orphan)]
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      "model.ckpt-5.data-00000-of-00001", "model.ckpt-5.index"]
