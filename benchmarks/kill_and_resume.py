r"""Kill runs at random moments, then resume: does every run reach its final step with readable
checkpoints, a best checkpoint that agrees with its history, and nothing left behind?

For each trial a run starts in a fresh --output_dir and gets --signal after a random delay from the
start of training (uniform over that part of an uninterrupted run, so training, evaluations,
checkpoint and best-checkpoint writes and the final export are all hit; --nofrom_training draws
it over the whole run, start-up included), then the same command runs again to the end. A trial passes if the second run exits 0 and the directory is sound: its
latest checkpoint is the final step (or the early-stopping step), every checkpoint index in it and
in `best/` has its data and reads completely, no more than --keep_checkpoint_max are kept, no
temporary or lock file is left, and with evaluation while training, `best/` holds exactly the
checkpoint of the history's best evaluation by the metric and mode (and nothing else),
`best.json` has its value, and `eval_results.txt` is that checkpoint's.

With --signal=TERM a trial also checks the preemption path: a run stopped during training exits
with status 143 within --grace_seconds, having saved a checkpoint of the step it names; a run
signalled before training started or after it ended exits as the signal's default says.

Tasks: pretraining (run_pretraining.py on records of the sample corpus), classifier
(run_classifier.py on the sample classification task, evaluating every 20 steps, with an export)
and squad (run_squad.py on the sample SQuAD files, evaluating every 10 steps), tiny models.

Usage:
  python benchmarks/kill_and_resume.py --trials=20 --tasks=classifier,squad
  python benchmarks/kill_and_resume.py --signal=TERM --trials=10 --tasks=pretraining,classifier
"""

import json
import math
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from modeling import checkpoint_io  # pylint: disable=wrong-import-position
import tensorflow as tf  # pylint: disable=wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_integer("trials", 20, "Signalled runs per task (a run that ends before its "
                     "signal is drawn again).")
flags.DEFINE_enum("signal", "KILL", ["KILL", "TERM"], "The signal sent.")
flags.DEFINE_list("tasks", ["pretraining", "classifier", "squad"], "The tasks to run.")
flags.DEFINE_float("grace_seconds", 30.0, "--preemption_grace_seconds of the runs.")
flags.DEFINE_integer("seed", 0, "Seed of the delays.")
flags.DEFINE_bool("from_training", True, "Draw the delays over the time from the start of "
                  "training to the end (checkpoints, evaluations, best-checkpoint writes, the "
                  "export); --nofrom_training draws them over the whole run, start-up included.")
flags.DEFINE_string("work_dir", None, "Scratch directory (default: a new temporary one).")

SAMPLES = REPO_ROOT / "samples"
KEEP = 2
CONFIG = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2}


def _run(command, timeout=900):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, *command], cwd=REPO_ROOT, capture_output=True,
                        text=True, timeout=timeout, env=env)


def _prepare(work):
  """The vocab, config and pretraining records the trials share."""
  vocab = work / "vocab.txt"
  result = _run(["learn_vocab.py", f"--input_file={SAMPLES / 'sample_corpus.txt'}",
                 f"--vocab_file={vocab}", "--vocab_size=400"])
  assert result.returncode == 0, result.stderr[-2000:]
  config = work / "bert_config.json"
  config.write_text(json.dumps(dict(CONFIG, vocab_size=sum(1 for _ in open(vocab)))))
  result = _run(["create_pretraining_data.py", f"--input_file={SAMPLES / 'sample_corpus.txt'}",
                 f"--output_file={work / 'pretraining.tfrecord'}", f"--vocab_file={vocab}",
                 "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=2"])
  assert result.returncode == 0, result.stderr[-2000:]
  return vocab, config


class Task:
  """A runner's command for an output directory, its final step, and what evaluation while
  training chooses the best checkpoint by (None without)."""

  def __init__(self, command, final_step, metric=None, mode="max"):
    self.command, self.final_step, self.metric, self.mode = command, final_step, metric, mode


def _tasks(work, vocab, config):
  """Task name -> `Task`. Long enough that training, not start-up, fills most of a run: most
  signals land between checkpoints, in a checkpoint or best-checkpoint write, or in the pruning."""
  common = [f"--bert_config_file={config}", "--do_train", "--train_batch_size=8",
            "--learning_rate=1e-3", "--save_checkpoints_steps=50", f"--keep_checkpoint_max={KEEP}",
            f"--preemption_grace_seconds={FLAGS.grace_seconds}",
            "--distribution_strategy=one_device"]
  pretraining_steps, classifier_epochs, squad_epochs = 600, 120, 12
  return {
      "pretraining": Task(lambda out: [
          "run_pretraining.py", f"--input_file={work / 'pretraining.tfrecord'}",
          f"--output_dir={out}", f"--num_train_steps={pretraining_steps}",
          "--max_seq_length=32", "--max_predictions_per_seq=5", *common], pretraining_steps),
      "classifier": Task(lambda out: [
          "run_classifier.py", "--task_name=tsv", f"--data_dir={SAMPLES / 'classification'}",
          f"--vocab_file={vocab}", f"--output_dir={out}", "--do_eval", "--max_seq_length=32",
          f"--num_train_epochs={classifier_epochs}", "--eval_every_steps=20",
          f"--export_dir={out}/export", *common],
                         int(42 / 8 * classifier_epochs), metric="eval_accuracy"),
      "squad": Task(lambda out: [
          "run_squad.py", f"--train_file={SAMPLES / 'squad' / 'train.json'}",
          f"--predict_file={SAMPLES / 'squad' / 'dev.json'}", "--version_2_with_negative",
          f"--vocab_file={vocab}", f"--output_dir={out}", "--do_predict", "--max_seq_length=64",
          "--doc_stride=32", "--max_query_length=16", f"--num_train_epochs={squad_epochs}",
          "--eval_every_steps=10", *common], None, metric="f1"),
  }


def _checkpoint_problems(directory):
  """Indexes in `directory` without their data, or unreadable."""
  problems = []
  for index in directory.glob("model.ckpt-*.index"):
    prefix = str(index)[:-len(".index")]
    if not pathlib.Path(prefix + ".data-00000-of-00001").exists():
      problems.append(f"{index.relative_to(directory.parent)} without its data")
      continue
    try:
      checkpoint_io.read_checkpoint(prefix)
    except Exception as error:  # pylint: disable=broad-except
      problems.append(f"{index.name} unreadable: {error}")
  return problems


def _best_problems(out, task):
  """Disagreements between `best/`, `best.json`, the history and `eval_results.txt`."""
  history = [json.loads(line) for line in (out / "eval_history.jsonl").read_text().splitlines()]
  steps = [entry["step"] for entry in history]
  problems = [] if steps == sorted(set(steps)) else [f"history steps {steps}"]
  values = [entry["metrics"][task.metric] for entry in history]
  best_value = (max if task.mode == "max" else min)(values)
  # A tie keeps the earlier step.
  best_step = steps[values.index(best_value)]
  state = json.loads((out / "best" / "best.json").read_text())
  if (state["step"], state["value"]) != (best_step, best_value):
    problems.append(f"best.json step {state['step']} = {state['value']}, the history's best "
                    f"step {best_step} = {best_value}")
  expected = {"best.json", "checkpoint", f"model.ckpt-{best_step}.index",
              f"model.ckpt-{best_step}.data-00000-of-00001"}
  held = {p.name for p in (out / "best").iterdir()}
  if held != expected:
    problems.append(f"best/ holds {sorted(held ^ expected)} besides or instead of step "
                    f"{best_step}'s checkpoint")
  results = dict(line.split(" = ") for line in
                 (out / "eval_results.txt").read_text().splitlines() if " = " in line)
  if int(results.get("global_step", -1)) != best_step or not math.isclose(
      float(results.get(task.metric, "nan")), best_value, rel_tol=1e-4, abs_tol=1e-4):
    problems.append(f"eval_results.txt step {results.get('global_step')} {task.metric} = "
                    f"{results.get(task.metric)}, not the best step's")
  return problems


def _check(out, task):
  """Problems found in a finished output directory (empty if none)."""
  problems = []
  latest = tf.train.latest_checkpoint(str(out))
  last_evaluated = None
  if task.metric is not None and (out / "eval_history.jsonl").exists():
    last_evaluated = json.loads(
        (out / "eval_history.jsonl").read_text().splitlines()[-1])["step"]
  final_steps = {task.final_step, last_evaluated} - {None}
  if latest is None or not any(latest.endswith(f"model.ckpt-{step}") for step in final_steps):
    problems.append(f"latest checkpoint {latest}")
  indexes = [p for p in out.glob("model.ckpt-*.index") if ".tmp-" not in p.name]
  if len(indexes) > KEEP:
    problems.append(f"{len(indexes)} checkpoints kept")
  problems += _checkpoint_problems(out)
  if task.metric is not None:
    problems += _checkpoint_problems(out / "best") + _best_problems(out, task)
  left = [str(p.relative_to(out)) for p in out.rglob("*")
          if ".tmp-" in p.name or "tempstate" in p.name or p.name == ".lock"]
  orphans = [str(p.relative_to(out)) for p in out.rglob("model.ckpt-*.data-*")
             if not pathlib.Path(str(p).split(".data-")[0] + ".index").exists()]
  if left or orphans:
    problems.append(f"left behind: {left + orphans}")
  return problems


def _training_started(out):
  """Whether the run in `out` has started training (its TensorBoard events file appears when the
  training loop is set up, with the SIGTERM handler)."""
  return out.is_dir() and any(out.glob("events.out.tfevents.*"))


def _start_and_wait_for_training(command, out, stderr):
  """Starts `command`; returns `(process, seconds to the start of training)`, the seconds None
  if the process ended first."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  start = time.monotonic()
  process = subprocess.Popen([sys.executable, *command], cwd=REPO_ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=stderr, text=True)
  while process.poll() is None:
    if not FLAGS.from_training or _training_started(out):
      return process, time.monotonic() - start
    time.sleep(0.05)
  return process, None


def _signal_run(command, out, delay):
  """Starts `command`, sends FLAGS.signal `delay` seconds after training started (after the
  start with --nofrom_training).

  Returns:
    (what happened, exit status, seconds from the signal to the exit, stderr).
  """
  with tempfile.TemporaryFile("w+") as stderr:
    process, _ = _start_and_wait_for_training(command, out, stderr)
    try:
      process.wait(timeout=delay)
      return "finished first", process.returncode, 0.0, ""
    except subprocess.TimeoutExpired:
      process.send_signal(getattr(signal, f"SIG{FLAGS.signal}"))
      sent = time.monotonic()
      try:
        process.wait(timeout=FLAGS.grace_seconds + 60)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
      exit_seconds = time.monotonic() - sent
      stderr.seek(0)
      return "signalled", process.returncode, exit_seconds, stderr.read()


def _termination_problems(status, exit_seconds, stderr, out):
  """What a SIGTERM trial's first run did wrong: a run stopped in training must exit 143 within
  the grace period with a checkpoint of the step it names; others die of the signal (-15) or
  end (0, e.g. the signal came in an evaluation after training and the run went on)."""
  problems = []
  if exit_seconds > FLAGS.grace_seconds:
    problems.append(f"exited {exit_seconds:.1f} s after SIGTERM")
  if status == 128 + signal.SIGTERM:
    stopped = re.search(r"stopped by SIGTERM at step (\d+) of \d+: saved (\S+);", stderr)
    if not stopped:
      problems.append("exit 143 without the one-line message")
    elif not tf.io.gfile.exists(stopped.group(2) + ".index") or not stopped.group(2).endswith(
        f"model.ckpt-{stopped.group(1)}") or str(out) not in stopped.group(2):
      problems.append(f"no checkpoint of step {stopped.group(1)}: {stopped.group(2)}")
  elif status not in (-signal.SIGTERM, 0):
    problems.append(f"exit {status}: {stderr.strip().splitlines()[-1:]}")
  return problems


def main(argv):
  del argv
  rng = random.Random(FLAGS.seed)
  work = pathlib.Path(FLAGS.work_dir or tempfile.mkdtemp(prefix="kill_and_resume-"))
  work.mkdir(parents=True, exist_ok=True)
  vocab, config = _prepare(work)
  print(f"SIG{FLAGS.signal}, {FLAGS.trials} trials per task")
  print(f"{'task':12} {'trial':>5} {'signal at':>10} {'exit':>5} {'exit after':>10} "
        f"{'state at signal':>24} {'resume':>8}  result")
  totals = {}
  tasks = _tasks(work, vocab, config)
  for name in FLAGS.tasks:
    task = tasks[name]
    baseline_dir = work / f"{name}-baseline"
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as stderr:
      process, setup_seconds = _start_and_wait_for_training(task.command(baseline_dir),
                                                            baseline_dir, stderr)
      process.wait()
      stderr.seek(0)
      assert process.returncode == 0, stderr.read()[-2000:]
    run_seconds = time.monotonic() - start
    # Signals are drawn over what follows the start of training (or the whole run).
    window_seconds = run_seconds - setup_seconds
    if task.final_step is None:
      task.final_step = int(tf.train.latest_checkpoint(str(baseline_dir)).rsplit("-", 1)[1])
    passed = failed = 0
    signalled, trial = 0, 0
    # A run that ends before its delay is no trial of the signal: it is counted apart, and
    # another is drawn (up to twice the trials asked for).
    while signalled < FLAGS.trials and trial < 2 * FLAGS.trials:
      out = work / f"{name}-{trial}"
      delay = rng.uniform(0.0 if FLAGS.from_training else 0.5, window_seconds)
      happened, status, exit_seconds, stderr = _signal_run(task.command(out), out, delay)
      signalled += happened == "signalled"
      latest = tf.train.latest_checkpoint(str(out)) if out.exists() else None
      state = (happened if happened == "finished first" else
               os.path.basename(latest) if latest else "no checkpoint")
      problems = (_termination_problems(status, exit_seconds, stderr, out)
                  if FLAGS.signal == "TERM" and happened == "signalled" else [])
      start = time.monotonic()
      resumed = _run(task.command(out))
      resume_seconds = time.monotonic() - start
      problems += ([f"exit {resumed.returncode}: {resumed.stderr.strip().splitlines()[-1:]}"]
                   if resumed.returncode else _check(out, task))
      passed += happened == "signalled" and not problems
      failed += bool(problems)
      print(f"{name:12} {trial:>5} {delay:>9.1f}s {status:>5} {exit_seconds:>9.1f}s "
            f"{state:>24} {resume_seconds:>7.1f}s  "
            f"{'ok' if not problems else '; '.join(problems)}", flush=True)
      shutil.rmtree(out, ignore_errors=True)
      trial += 1
    totals[name] = (passed, signalled, failed)
    print(f"{name}: {passed}/{signalled} signalled runs resumed to step {task.final_step} "
          f"cleanly ({trial - signalled} more ended before their signal; an uninterrupted run: "
          f"{run_seconds:.1f} s, {window_seconds:.1f} s of them "
          f"{'from the start of training' if FLAGS.from_training else 'in all'})", flush=True)
  if not FLAGS.work_dir:
    shutil.rmtree(work, ignore_errors=True)
  return 0 if all(passed == FLAGS.trials and not failed
                  for passed, _, failed in totals.values()) else 1


if __name__ == "__main__":
  app.run(main)
