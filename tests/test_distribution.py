"""Strategy selection from the engine config; an unreachable TPU fails fast with a clear message."""

import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from training import distribution
from training import config as training_config

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def _parse(*argv):
  return training_config.EngineConfig.from_args(*argv)


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_original_tpu_flags_map_to_tpu():
  assert distribution.resolve_tpu(use_tpu=True, tpu_name="my-tpu") == "my-tpu"
  address = "grpc://10.0.0.2:8470"
  assert distribution.resolve_tpu(use_tpu=True, master=address) == address
  assert distribution.resolve_tpu(tpu="my-tpu") == "my-tpu"
  assert distribution.resolve_tpu() is None
  with pytest.raises(distribution.DistributionError, match="--use_tpu needs --tpu_name"):
    distribution.resolve_tpu(use_tpu=True)
  with pytest.raises(distribution.DistributionError, match="without --use_tpu"):
    distribution.resolve_tpu(tpu_name="my-tpu")
  with pytest.raises(distribution.DistributionError, match="disagree"):
    distribution.resolve_tpu(tpu="a", use_tpu=True, tpu_name="b")


def test_configs_build_cpu_strategies_and_aliases():
  flag_values = _parse("--distribution_strategy=one_device", "--iterations_per_loop=7")
  assert flag_values.steps_per_loop == 7
  strategy = distribution.strategy_from_config(flag_values)
  assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
  assert distribution.is_chief(strategy)
  mirrored = distribution.strategy_from_config(_parse())
  assert isinstance(mirrored, tf.distribute.MirroredStrategy)
  assert mirrored.num_replicas_in_sync == 1
  with pytest.raises(distribution.DistributionError, match="--num_gpus=2 but only 0 GPU"):
    distribution.strategy_from_config(_parse("--num_gpus=2"))
  with pytest.raises(distribution.DistributionError,
                     match="a TPU is given but --distribution_strategy=mirrored"):
    distribution.strategy_from_config(_parse("--distribution_strategy=mirrored", "--tpu=x"))


def test_unreachable_tpu_address_fails_fast():
  port = _free_port()
  start = time.monotonic()
  with pytest.raises(distribution.DistributionError,
                     match=rf"cannot reach TPU 'grpc://127\.0\.0\.1:{port}' at "
                           rf"127\.0\.0\.1:{port}"):
    distribution.strategy_from_config(_parse("--use_tpu", f"--master=grpc://127.0.0.1:{port}"))
  assert time.monotonic() - start < 15


def test_unknown_tpu_name_fails_fast():
  start = time.monotonic()
  with pytest.raises(distribution.DistributionError, match="TPU 'no-such-tpu'"):
    distribution.connect_tpu("no-such-tpu", timeout_seconds=10)
  assert time.monotonic() - start < 15


def test_bad_tf_config_is_named(monkeypatch):
  monkeypatch.setitem(os.environ, "TF_CONFIG", "{not json")
  with pytest.raises(distribution.DistributionError, match="TF_CONFIG is not valid JSON"):
    distribution.get_strategy("multi_worker_mirrored")
  monkeypatch.setitem(os.environ, "TF_CONFIG", '{"cluster": {}}')
  with pytest.raises(distribution.DistributionError, match="TF_CONFIG needs 'cluster' and 'task'"):
    distribution.get_strategy("multi_worker_mirrored")


@pytest.mark.slow
def test_silent_tpu_endpoint_hits_the_deadline_instead_of_hanging():
  # TensorFlow's connect call waits forever on an endpoint that accepts TCP but never speaks gRPC;
  # it runs in a subprocess because the abandoned connection attempt stays in its eager context.
  script = """
import socket, sys, time
from training import distribution
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(8)
address = f"grpc://127.0.0.1:{server.getsockname()[1]}"
start = time.monotonic()
try:
  distribution.connect_tpu(address, timeout_seconds=3)
except distribution.DistributionError as error:
  print("ERROR:", error, "AFTER:", round(time.monotonic() - start, 1))
"""
  completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=60, cwd=REPO_ROOT)
  assert completed.returncode == 0, completed.stderr[-2000:]
  line = next(l for l in completed.stdout.splitlines() if l.startswith("ERROR:"))
  assert "connecting to TPU 'grpc://127.0.0.1:" in line and "no answer after 3 s" in line
  assert float(line.rsplit("AFTER:", 1)[1]) < 10
