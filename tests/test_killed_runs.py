"""What a run killed with SIGKILL leaves, and what the next run does with it: temporaries of dead
processes removed, checkpoint pruning that converges, and one run at a time per --output_dir."""

import json
import os
import pathlib
import socket
import subprocess
import tempfile

import pytest
import tensorflow as tf

from base import atomic_files
from modeling import checkpoint_io
from tests import scripts
from tests import toy_task
from serving import saved_model_export
from tests.conftest import SAMPLES_DIR
from training import checkpointing


def _dead_pid():
  process = subprocess.Popen(["true"])
  process.wait()
  return process.pid


def _run_toy(tmp_path, *flags):
  return scripts.run_toy_runner("--distribution_strategy=one_device",
                                f"--result_file={tmp_path / 'result.json'}", *flags)


def test_only_temporaries_of_dead_processes_are_removed(tmp_path):
  dead, alive = _dead_pid(), os.getppid()
  for name in (f"train.tf_record.tmp-{dead}", f"model.ckpt-5.tmp-{dead}.index",
               f"train.tf_record.tmp-{alive}", "notes.tmp-x", "model.ckpt-5.index"):
    (tmp_path / name).write_text("x")
  (tmp_path / f"7.tmp-{dead}").mkdir()
  (tmp_path / f"7.tmp-{dead}" / "saved_model.pb").write_text("x")
  removed = atomic_files.remove_stale_temporaries(str(tmp_path))
  assert sorted(os.path.basename(p) for p in removed) == sorted(
      [f"train.tf_record.tmp-{dead}", f"model.ckpt-5.tmp-{dead}.index", f"7.tmp-{dead}"])
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
      [f"train.tf_record.tmp-{alive}", "notes.tmp-x", "model.ckpt-5.index"])


def test_pruning_converges_after_a_kill_between_state_file_and_deletion(tmp_path):
  variables = {"bert/w": tf.Variable([1.0, 2.0])}
  manager = checkpointing.CheckpointManager(str(tmp_path), variables, keep_checkpoint_max=2)
  for step in (1, 2, 3):
    manager.save(step)
  # Checkpoints that a killed run wrote but never pruned, missing from the state file, and a
  # temporary bundle of a dead writer, which is never taken for a checkpoint.
  for step in (4, 5):
    checkpoint_io.write_checkpoint(str(tmp_path / f"model.ckpt-{step}"), variables)
  (tmp_path / f"model.ckpt-9.tmp-{_dead_pid()}.index").write_text("partial")
  manager.save(6)
  complete = sorted(p.name for p in tmp_path.glob("model.ckpt-*.index") if ".tmp-" not in p.name)
  assert complete == ["model.ckpt-5.index", "model.ckpt-6.index"]
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-6")


@pytest.mark.slow
def test_a_second_run_on_a_busy_output_dir_is_refused_and_a_dead_runs_lock_taken_over(tmp_path):
  data = toy_task.write_records(tmp_path / "toy.tfrecord", 16)
  output_dir = tmp_path / "out"
  output_dir.mkdir()
  lock = output_dir / ".lock"
  holder = subprocess.Popen(["sleep", "60"])
  try:
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": holder.pid,
                                "started": "2026-01-01 00:00:00"}))
    busy = _run_toy(tmp_path, f"--input_file={data}", f"--output_dir={output_dir}")
  finally:
    holder.kill()
    holder.wait()
  assert busy.returncode == 1
  assert busy.stderr.strip().splitlines()[-1] == (
      f"toy_runner.py: error: --output_dir={output_dir} is in use by process {holder.pid} "
      "(started 2026-01-01 00:00:00); wait for it to end or choose another --output_dir")
  assert not list(output_dir.glob("model.ckpt-*"))

  other_host = _run_toy(tmp_path, f"--input_file={data}", f"--output_dir={output_dir}")
  assert other_host.returncode == 0, other_host.stderr[-3000:]  # the sleeping holder is dead
  assert not lock.exists()

  lock.write_text(json.dumps({"host": "another-machine", "pid": 1}))
  remote = _run_toy(tmp_path, f"--input_file={data}", f"--output_dir={output_dir}")
  assert remote.returncode == 1
  # Written just now and without a heartbeat: a lease renewed when the lock was last written.
  message = remote.stderr.strip().splitlines()[-1]
  assert "is in use by process 1 on another-machine, whose lease was last renewed at " in message
  assert message.endswith("unless renewed; wait for that run to end or choose another "
                          "--output_dir")


@pytest.mark.slow
def test_a_killed_trainings_leftovers_are_removed_by_the_next_run(tmp_path):
  data = toy_task.write_records(tmp_path / "toy.tfrecord", 16)
  output_dir = tmp_path / "out"
  killed = _run_toy(tmp_path, f"--input_file={data}", f"--output_dir={output_dir}",
                    "--num_train_steps=6", "--save_checkpoints_steps=2",
                    "--sigkill_after_checkpoint=4")
  assert killed.returncode == -9
  assert (output_dir / ".lock").exists()
  dead = json.loads((output_dir / ".lock").read_text())["pid"]
  (output_dir / f"model.ckpt-5.tmp-{dead}.data-00000-of-00001.tempstate123").write_text("x")
  resumed = _run_toy(tmp_path, f"--input_file={data}", f"--output_dir={output_dir}",
                     "--num_train_steps=6", "--save_checkpoints_steps=2")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert tf.train.latest_checkpoint(str(output_dir)).endswith("model.ckpt-6")
  assert not [p.name for p in output_dir.iterdir() if ".tmp-" in p.name or p.name == ".lock"]


@pytest.mark.slow
def test_data_creation_removes_what_a_killed_run_left(tmp_path, sample_vocab):
  output = tmp_path / "data.tfrecord"
  dead = _dead_pid()
  stale_output = tmp_path / f"data.tfrecord.tmp-{dead}"
  stale_output.write_bytes(b"truncated")
  parts = pathlib.Path(tempfile.gettempdir()) / f"create_pretraining_data-parts-xyz.tmp-{dead}"
  parts.mkdir()
  (parts / "part-0").write_bytes(b"x")
  result = scripts.run_script(
      "create_pretraining_data.py", f"--input_file={SAMPLES_DIR / 'sample_corpus.txt'}",
      f"--output_file={output}", f"--vocab_file={sample_vocab}", "--max_seq_length=64",
      "--max_predictions_per_seq=10", "--num_workers=1", timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert output.exists() and not stale_output.exists() and not parts.exists()


def test_an_export_removes_a_killed_exports_temporary_directory(tmp_path):
  export_dir = tmp_path / "export"
  stale = export_dir / f"3.tmp-{_dead_pid()}"
  stale.mkdir(parents=True)
  (stale / "saved_model.pb").write_bytes(b"partial")
  module = tf.Module()
  module.v = tf.Variable(1.0)
  module.f = tf.function(lambda x: x * module.v, input_signature=[tf.TensorSpec([], tf.float32)])
  saved_model_export.export(module, str(export_dir),
                            {"serving_default": module.f.get_concrete_function()}, 4)
  assert sorted(p.name for p in export_dir.iterdir()) == ["4"]
