"""The engine across processes: 2 replicas agree with 1, 2 workers agree, SIGKILL then resume."""

import json
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

from tests import scripts
from tests import toy_task
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

# Runs in a fresh process: logical devices must be configured before TensorFlow initialises.
TWO_REPLICA_SCRIPT = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from modeling import optimization
from tests import toy_task
from training import engine, input_pipeline

data_path, output_dir = sys.argv[1], sys.argv[2]
optimizers = {
    "adamw": lambda: optimization.create_optimizer(0.05, 5, 2),
    # Huge epsilon, no clipping: the update is ~0.01 * gradient, so a gradient scaled wrongly
    # across replicas shows in the weights (Adam and clipping would hide it).
    "linear": lambda: optimization.AdamWeightDecay(1.0, epsilon=10.0, clip_norm=None),
}
runs = {
    "one_device": (tf.distribute.OneDeviceStrategy("/cpu:0"), {}),
    "mirrored": (tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), {}),
    "mirrored_accumulate_jit": (tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
                                {"gradient_accumulation_steps": 2, "jit_compile": True}),
}
results = {}
for optimizer_name, optimizer_fn in optimizers.items():
  for run_name, (strategy, extra) in runs.items():
    config = engine.RunConfig(output_dir=f"{output_dir}/{optimizer_name}/{run_name}",
                              num_train_steps=5, train_batch_size=8, steps_per_loop=5,
                              save_checkpoints_steps=5, **extra)
    trainer = engine.Trainer(strategy, toy_task.ToyTask(), config, optimizer_fn)
    input_fn = input_pipeline.make_input_fn([data_path], toy_task.FEATURE_SPEC, 8, True,
                                            shuffle_buffer_size=0, seed=0)
    history = trainer.train(input_fn)["history"]
    eval_fn = input_pipeline.make_input_fn([data_path], toy_task.FEATURE_SPEC, 8, False)
    evaluation = trainer.evaluate(eval_fn, max_eval_steps=4)
    weights = {n: v.numpy().tolist() for n, v in trainer.model_variables.items()}
    results[f"{optimizer_name}/{run_name}"] = {
        "replicas": strategy.num_replicas_in_sync, "losses": [l for _, l in history],
        "eval": evaluation, "weights": weights}
print("RESULTS " + json.dumps(results))
"""


def _free_ports(count):
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def test_two_replicas_give_the_same_losses_as_one_device(tmp_path):
  data_path = toy_task.write_records(tmp_path / "toy.tfrecord", 64)
  completed = subprocess.run(
      [sys.executable, "-c", TWO_REPLICA_SCRIPT, data_path, str(tmp_path / "out")],
      capture_output=True, text=True, timeout=180, env=scripts.child_env(), cwd=REPO_ROOT)
  assert completed.returncode == 0, completed.stderr[-3000:]
  line = next(l for l in completed.stdout.splitlines() if l.startswith("RESULTS "))
  results = json.loads(line[len("RESULTS "):])
  for optimizer_name in ("adamw", "linear"):
    reference = results[f"{optimizer_name}/one_device"]
    assert reference["replicas"] == 1 and len(reference["losses"]) == 5
    for run_name in ("mirrored", "mirrored_accumulate_jit"):
      run = results[f"{optimizer_name}/{run_name}"]
      assert run["replicas"] == 2
      np.testing.assert_allclose(run["losses"], reference["losses"], rtol=1e-4,
                                 err_msg=f"{optimizer_name}/{run_name}")
      for name, value in reference["weights"].items():
        np.testing.assert_allclose(run["weights"][name], value, rtol=1e-4, atol=1e-6,
                                   err_msg=f"{optimizer_name}/{run_name} {name}")
      assert run["eval"] == pytest.approx(reference["eval"], rel=1e-4)


@pytest.mark.parametrize("worker_1_flags", [
    [],
    # Worker 1 plans other loop lengths than worker 0 (as two clocks can): both must run worker
    # 0's, or their all-reduces would pair up across different loops.
    ["--max_loop_length=1"],
])
def test_two_workers_train_in_lockstep(tmp_path, worker_1_flags):
  # Two files, read through the glob below.
  for i in range(2):
    toy_task.write_records(tmp_path / f"toy-{i}.tfrecord", 32, seed=i)
  ports = _free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
  output_dir = tmp_path / "out"
  processes = []
  for index in range(2):
    worker_tmp = tmp_path / f"tmp-{index}"
    worker_tmp.mkdir()
    tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    args = [f"--input_file={tmp_path}/toy-*.tfrecord", f"--output_dir={output_dir}",
            f"--result_file={tmp_path}/result-{index}.json",
            "--distribution_strategy=multi_worker_mirrored", "--train_batch_size=8",
            "--num_train_steps=6", "--save_checkpoints_steps=3", "--steps_per_loop=3",
            "--keep_checkpoint_max=0", "--do_eval", "--max_eval_steps=2",
            "--eval_every_steps=2", "--scripted_scores=2:0.5,4:0.9,6:0.7"]
    if index == 1:
      args += worker_1_flags
    processes.append(subprocess.Popen(
        [sys.executable, str(scripts.TOY_RUNNER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=scripts.child_env(TF_CONFIG=tf_config, TMPDIR=str(worker_tmp)), cwd=REPO_ROOT))
  try:
    outputs = [p.communicate(timeout=120) for p in processes]
  finally:
    for p in processes:
      if p.poll() is None:
        p.kill()
  for p, (_, stderr) in zip(processes, outputs):
    assert p.returncode == 0, stderr[-3000:]
  chief, worker = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(2)]
  assert chief["is_chief"] and not worker["is_chief"]
  assert chief["global_step"] == worker["global_step"] == 6
  assert [s for s, _ in chief["history"]] == list(range(1, 7))
  assert chief["history"] == worker["history"]
  assert chief["eval"] == worker["eval"]
  # Every 3 steps, and at each evaluation (every 2), saved before it.
  assert sorted(f.name for f in output_dir.glob("model.ckpt-*.index")) == [
      "model.ckpt-2.index", "model.ckpt-3.index", "model.ckpt-4.index", "model.ckpt-6.index"]
  assert not list((tmp_path / "tmp-1").iterdir()), "the worker left its temporary files"
  # Evaluation while training: both workers evaluate and agree on the best; the chief alone wrote
  # the history and the best checkpoint.
  assert chief["best_checkpoint"] == worker["best_checkpoint"] == str(
      output_dir / "best" / "model.ckpt-4")
  assert [json.loads(line)["step"] for line in
          (output_dir / "eval_history.jsonl").read_text().splitlines()] == [2, 4, 6]
  assert sorted(f.name for f in (output_dir / "best").iterdir()) == [
      "best.json", "checkpoint", "model.ckpt-4.data-00000-of-00001", "model.ckpt-4.index"]


def test_sigkill_then_resume_finishes_like_an_uninterrupted_run(tmp_path):
  # One batch of data: every step sees the same examples even though the input restarts on
  # resume (as with the original's Estimator), so the losses depend only on the restored state.
  data_path = toy_task.write_records(tmp_path / "toy.tfrecord", 8)
  common = [f"--input_file={data_path}", "--distribution_strategy=one_device",
            "--train_batch_size=8", "--num_train_steps=10", "--num_warmup_steps=3",
            "--save_checkpoints_steps=2", "--steps_per_loop=2", "--keep_checkpoint_max=0"]
  reference = scripts.run_toy_runner(*common, f"--output_dir={tmp_path}/reference",
                                     f"--result_file={tmp_path}/reference.json")
  assert reference.returncode == 0, reference.stderr[-3000:]
  output_dir = tmp_path / "killed"
  killed = scripts.run_toy_runner(*common, f"--output_dir={output_dir}",
                                  f"--result_file={tmp_path}/killed.json",
                                  "--sigkill_after_checkpoint=4")
  assert killed.returncode == -signal.SIGKILL
  assert not (tmp_path / "killed.json").exists()
  before = {f.name: f.stat().st_mtime_ns for f in output_dir.glob("model.ckpt-*")}
  assert sorted(f for f in before if f.endswith(".index")) == ["model.ckpt-2.index",
                                                                "model.ckpt-4.index"]
  resumed = scripts.run_toy_runner(*common, f"--output_dir={output_dir}",
                                   f"--result_file={tmp_path}/resumed.json")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "Resuming at global step 4" in resumed.stderr
  result = json.loads((tmp_path / "resumed.json").read_text())
  expected = json.loads((tmp_path / "reference.json").read_text())
  assert result["global_step"] == 10
  assert [s for s, _ in result["history"]] == [5, 6, 7, 8, 9, 10]
  np.testing.assert_allclose([l for _, l in result["history"]],
                             [l for _, l in expected["history"][4:]], rtol=1e-5)
  state = (output_dir / "checkpoint").read_text()
  assert [l.split('"')[1] for l in state.splitlines() if l.startswith("all_model")] == [
      f"model.ckpt-{step}" for step in (2, 4, 6, 8, 10)]
  # Checkpoints 2 and 4 were not written again.
  assert {name: (output_dir / name).stat().st_mtime_ns for name in before} == before
