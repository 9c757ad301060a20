r"""A signal to `create_pretraining_data.py` at random moments: do its worker processes die with
it, and does it leave no temporary behind?

For each trial the script runs with `--num_workers` workers in a new session (so that its workers,
which share the session's process group, can be found after it ends) and its own `TMPDIR` (where
the workers' part files go), and the signal is sent to the main process alone once its workers
have started, after a further delay drawn uniformly over the time an uninterrupted run spends
from its workers' start to its end (shards in flight, the last shards, the final renames and the
exit are all hit; before the workers start, there is nothing to leave). A trial passes if, within
`--grace_seconds` of the main process ending, no process of its group is left alive and, for
SIGTERM and SIGINT, no temporary is left: no part
directory in `TMPDIR` and no `<output>.tmp-<pid>`. A SIGKILL cannot be handled: its temporaries
are the next run's to remove (`tests/test_killed_runs.py`), so only the processes count there.

The input is the sample corpus repeated `--repeat` times (about 9 MB by default), in shards of
`--shard_documents` documents, so that many shards are in flight.

Usage:
  python benchmarks/signal_data_creation.py --signal=TERM --trials=10
  python benchmarks/signal_data_creation.py --signal=KILL --trials=5
"""

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

FLAGS = flags.FLAGS
flags.DEFINE_enum("signal", "TERM", ["TERM", "INT", "HUP", "KILL"], "The signal sent.")
flags.DEFINE_integer("trials", 10, "Signals sent, one per run.")
flags.DEFINE_integer("seed", 0, "Seed of the delays.")
flags.DEFINE_integer("num_workers", 2, "The runs' --num_workers.")
flags.DEFINE_integer("repeat", 500, "Times the sample corpus is repeated in the input.")
flags.DEFINE_integer("shard_documents", 20, "The runs' --shard_documents.")
flags.DEFINE_float("grace_seconds", 10, "Time the main process and then its workers have to end.")
flags.DEFINE_string("work_dir", None, "Scratch directory (default: a new temporary one).")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT / "samples"
PARTS_PREFIX = "create_pretraining_data-parts-"


def _env(tmpdir=None):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  if tmpdir is not None:
    env["TMPDIR"] = str(tmpdir)
  return env


def prepare(work, repeat):
  """The vocab and the input the trials share."""
  vocab = work / "vocab.txt"
  result = subprocess.run(
      [sys.executable, "learn_vocab.py", f"--input_file={SAMPLES / 'sample_corpus.txt'}",
       f"--vocab_file={vocab}", "--vocab_size=400"],
      cwd=REPO_ROOT, capture_output=True, text=True, env=_env(), check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  corpus = work / "corpus.txt"
  text = (SAMPLES / "sample_corpus.txt").read_text(encoding="utf-8").rstrip("\n")
  corpus.write_text("\n\n".join([text] * repeat) + "\n", encoding="utf-8")
  return vocab, corpus


def command(corpus, vocab, output, num_workers, shard_documents):
  """The `create_pretraining_data.py` command line of a trial."""
  return [sys.executable, "create_pretraining_data.py", f"--input_file={corpus}",
          f"--output_file={output}", f"--vocab_file={vocab}", "--max_seq_length=64",
          "--max_predictions_per_seq=10", "--dupe_factor=5", f"--num_workers={num_workers}",
          f"--shard_documents={shard_documents}"]


def group_members(pgid):
  """The pids of the live (not zombie) processes of process group `pgid`."""
  members = []
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
        # The command name, in parentheses, may hold spaces: the fields follow its last ')'.
        fields = f.read().rsplit(")", 1)[1].split()
    except OSError:  # ended while listed
      continue
    state, process_group = fields[0], int(fields[2])
    if process_group == pgid and state != "Z":
      members.append(int(entry))
  return members


def temporaries(output_dir, tmpdir):
  """The temporaries a run left: its outputs' `.tmp-<pid>` files and its part directories."""
  return ([p.name for p in output_dir.iterdir() if ".tmp-" in p.name]
          + [p.name for p in tmpdir.iterdir() if p.name.startswith(PARTS_PREFIX)])


def trial(run_command, output_dir, tmpdir, signum, delay, grace_seconds):
  """Runs `run_command` and sends `signum` to its main process `delay` seconds after its workers
  appear (None: lets it finish).

  Returns:
    dict: `state` ("signalled" or "finished first"), `workers_started` and `seconds` (when its
    workers appeared and when it ended, in seconds from its start; None if not seen), `workers`
    (alive when signalled), `exit` (the main process's status), `exit_seconds` (from the signal
    to its end), `left` (processes of its group alive `grace_seconds` after), `temporaries`,
    `complete` (the output exists), `last_line` (of stderr).
  """
  output_dir.mkdir(parents=True)
  tmpdir.mkdir(parents=True)
  with open(output_dir / "stderr.txt", "w", encoding="utf-8") as stderr:
    process = subprocess.Popen(run_command, cwd=REPO_ROOT, env=_env(tmpdir),
                               stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
  result = {"state": "finished first", "workers_started": None, "seconds": None, "workers": 0,
            "exit_seconds": 0.0}
  started = time.monotonic()
  signal_at = None
  while process.poll() is None and (signal_at is None or time.monotonic() < signal_at):
    if result["workers_started"] is None and len(group_members(process.pid)) > 1:
      result["workers_started"] = time.monotonic() - started
      signal_at = None if delay is None else time.monotonic() + delay
    time.sleep(0.05)
  if process.poll() is None:
    result.update(state="signalled", workers=len(group_members(process.pid)) - 1)
    signalled = time.monotonic()
    process.send_signal(signum)
    try:
      process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
      pass
    result["exit_seconds"] = time.monotonic() - signalled
  else:
    result["seconds"] = time.monotonic() - started
  deadline = time.monotonic() + grace_seconds
  while group_members(process.pid) and time.monotonic() < deadline:
    time.sleep(0.05)
  result["left"] = len(group_members(process.pid))
  if result["left"]:
    os.killpg(process.pid, signal.SIGKILL)  # not to disturb the next trials
  process.wait()
  result["exit"] = process.returncode
  result["temporaries"] = temporaries(output_dir, tmpdir)
  result["complete"] = (output_dir / "data.tfrecord").exists()
  lines = (output_dir / "stderr.txt").read_text(encoding="utf-8").strip().splitlines()
  result["last_line"] = lines[-1] if lines else ""
  return result


def main(argv):
  del argv
  rng = random.Random(FLAGS.seed)
  signum = getattr(signal, f"SIG{FLAGS.signal}")
  work = pathlib.Path(FLAGS.work_dir or tempfile.mkdtemp(prefix="signal_data_creation-"))
  work.mkdir(parents=True, exist_ok=True)
  vocab, corpus = prepare(work, FLAGS.repeat)

  def run_command(out):
    return command(corpus, vocab, out / "data.tfrecord", FLAGS.num_workers,
                   FLAGS.shard_documents)

  baseline = trial(run_command(work / "baseline"), work / "baseline", work / "baseline-tmp",
                   signum, None, FLAGS.grace_seconds)
  assert baseline["exit"] == 0 and baseline["workers_started"], baseline["last_line"]
  work_seconds = baseline["seconds"] - baseline["workers_started"]
  print(f"an uninterrupted run: {baseline['seconds']:.1f} s, workers from "
        f"{baseline['workers_started']:.1f} s; SIG{FLAGS.signal} at a delay after the workers' "
        f"start uniform in [0, {work_seconds:.1f}] s")
  print(f"{'trial':>5} {'delay':>7} {'state':>14} {'workers':>7} {'exit':>5} {'to exit':>8} "
        f"{'left':>4} {'temps':>5} {'output':>8}  last line")
  passed = 0
  for index in range(FLAGS.trials):
    delay = rng.uniform(0, work_seconds)
    out = work / f"trial-{index}"
    result = trial(run_command(out), out, work / f"trial-{index}-tmp", signum, delay,
                   FLAGS.grace_seconds)
    clean = not result["temporaries"] or signum == signal.SIGKILL
    passed += not result["left"] and clean
    print(f"{index:>5} {delay:>6.1f}s {result['state']:>14} {result['workers']:>7} "
          f"{result['exit']:>5} {result['exit_seconds']:>7.2f}s {result['left']:>4} "
          f"{len(result['temporaries']):>5} {'complete' if result['complete'] else 'none':>8}  "
          f"{result['last_line'][-100:]}", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work / f"trial-{index}-tmp", ignore_errors=True)
  what = "no process left" + (", no temporary left" if signum != signal.SIGKILL else "")
  print(f"SIG{FLAGS.signal}: {passed}/{FLAGS.trials} trials with {what}", flush=True)
  if not FLAGS.work_dir:
    shutil.rmtree(work, ignore_errors=True)
  return 0 if passed == FLAGS.trials else 1


if __name__ == "__main__":
  app.run(main)
