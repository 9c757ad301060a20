r"""SIGKILL at random moments, then resume: does every run reach its final step with readable
checkpoints and nothing left behind?

For each trial a run starts in a fresh --output_dir, is killed with SIGKILL after a random delay
(uniform over the length of an uninterrupted run, so start-up, record writing, training, checkpoint
writes and the final export are all hit), then the same command runs again to the end. A trial
passes if the second run exits 0, its latest checkpoint is the requested final step, every
checkpoint the directory holds reads completely, no more than --keep_checkpoint_max are kept, and
no temporary or lock file is left.

Tasks: pretraining (run_pretraining.py on records of the sample corpus) and fine-tuning
(run_classifier.py on the sample classification task, with an export), tiny models.

Usage:
  python benchmarks/kill_and_resume.py --trials=10
"""

import json
import os
import pathlib
import random
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
flags.DEFINE_integer("trials", 10, "Kills per task.")
flags.DEFINE_integer("seed", 0, "Seed of the kill delays.")
flags.DEFINE_string("work_dir", None, "Scratch directory (default: a new temporary one).")

SAMPLES = REPO_ROOT / "samples"
KEEP = 2
CONFIG = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2}


def _run(command, timeout=600):
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


def _commands(work, vocab, config):
  """Task name -> (command for an output directory, final step)."""
  # Long enough that training, not start-up, fills most of a run: most kills land between
  # checkpoints, in a checkpoint write, or in the pruning.
  pretraining_steps, classifier_epochs = 600, 80
  return {
      "pretraining": (lambda out: [
          "run_pretraining.py", f"--input_file={work / 'pretraining.tfrecord'}",
          f"--output_dir={out}", f"--bert_config_file={config}", "--do_train",
          f"--num_train_steps={pretraining_steps}", "--train_batch_size=8",
          "--max_seq_length=32", "--max_predictions_per_seq=5", "--save_checkpoints_steps=50",
          f"--keep_checkpoint_max={KEEP}", "--learning_rate=1e-3",
          "--distribution_strategy=one_device"], pretraining_steps),
      "fine-tuning": (lambda out: [
          "run_classifier.py", "--task_name=tsv", f"--data_dir={SAMPLES / 'classification'}",
          f"--vocab_file={vocab}", f"--bert_config_file={config}", f"--output_dir={out}",
          "--do_train", "--do_eval", "--max_seq_length=32", "--train_batch_size=8",
          f"--num_train_epochs={classifier_epochs}", "--learning_rate=1e-3",
          "--save_checkpoints_steps=50", f"--keep_checkpoint_max={KEEP}",
          f"--export_dir={out}/export",
          "--distribution_strategy=one_device"], int(42 / 8 * classifier_epochs)),
  }


def _check(out, final_step):
  """Problems found in a finished output directory (empty if none)."""
  problems = []
  latest = tf.train.latest_checkpoint(str(out))
  if latest is None or not latest.endswith(f"model.ckpt-{final_step}"):
    problems.append(f"latest checkpoint {latest}")
  indexes = [p for p in out.glob("model.ckpt-*.index") if ".tmp-" not in p.name]
  if len(indexes) > KEEP:
    problems.append(f"{len(indexes)} checkpoints kept")
  for index in indexes:
    try:
      checkpoint_io.read_checkpoint(str(index)[:-len(".index")])
    except Exception as error:  # pylint: disable=broad-except
      problems.append(f"{index.name} unreadable: {error}")
  left = [str(p.relative_to(out)) for p in out.rglob("*")
          if ".tmp-" in p.name or "tempstate" in p.name or p.name == ".lock"]
  if left:
    problems.append(f"left behind: {left}")
  return problems


def main(argv):
  del argv
  rng = random.Random(FLAGS.seed)
  work = pathlib.Path(FLAGS.work_dir or tempfile.mkdtemp(prefix="kill_and_resume-"))
  work.mkdir(parents=True, exist_ok=True)
  vocab, config = _prepare(work)
  print(f"{'task':12} {'trial':>5} {'killed at':>10} {'state at kill':>24} {'resume':>8}  result")
  totals = {}
  for task, (command, final_step) in _commands(work, vocab, config).items():
    baseline_dir = work / f"{task}-baseline"
    start = time.monotonic()
    result = _run(command(baseline_dir))
    run_seconds = time.monotonic() - start
    assert result.returncode == 0, result.stderr[-2000:]
    passed = 0
    for trial in range(FLAGS.trials):
      out = work / f"{task}-{trial}"
      delay = rng.uniform(0.5, run_seconds)
      env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
      process = subprocess.Popen([sys.executable, *command(out)], cwd=REPO_ROOT, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
      try:
        process.wait(timeout=delay)
        state = "finished first"
      except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
        latest = tf.train.latest_checkpoint(str(out)) if out.exists() else None
        state = os.path.basename(latest) if latest else "no checkpoint"
      start = time.monotonic()
      resumed = _run(command(out))
      resume_seconds = time.monotonic() - start
      problems = ([f"exit {resumed.returncode}: {resumed.stderr.strip().splitlines()[-1:]}"]
                  if resumed.returncode else _check(out, final_step))
      passed += not problems
      print(f"{task:12} {trial:>5} {delay:>9.1f}s {state:>24} {resume_seconds:>7.1f}s  "
            f"{'ok' if not problems else '; '.join(problems)}", flush=True)
      shutil.rmtree(out, ignore_errors=True)
    totals[task] = passed
    print(f"{task}: {passed}/{FLAGS.trials} trials resumed to step {final_step} cleanly "
          f"(an uninterrupted run: {run_seconds:.1f} s)", flush=True)
  if not FLAGS.work_dir:
    shutil.rmtree(work, ignore_errors=True)
  return 0 if all(passed == FLAGS.trials for passed in totals.values()) else 1


if __name__ == "__main__":
  app.run(main)
