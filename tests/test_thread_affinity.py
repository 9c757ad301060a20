"""serving/thread_affinity.py: which threads it finds, and that it pins them one per CPU."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from serving import thread_affinity
from tests.conftest import CHILD_PYTHONPATH

linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                                reason="per-thread run times are Linux's /proc/self/task")


def _spinning_thread(seconds, started, release):
  """A thread that runs on a CPU for `seconds` once `started` is set, then waits for `release`;
  returns it and its id."""
  thread_id = []

  def body():
    thread_id.append(threading.get_native_id())
    started.wait()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
      pass
    release.wait()

  thread = threading.Thread(target=body, daemon=True)
  thread.start()
  while not thread_id:
    time.sleep(0.001)
  return thread, thread_id[0]


@linux_only
def test_threads_running_finds_the_thread_that_computed_and_not_the_caller():
  started, release = threading.Event(), threading.Event()
  idle, _ = _spinning_thread(0, started, release)  # started, does nothing: not found
  busy, busy_id = _spinning_thread(0.2, started, release)

  def probe():  # the caller computes too
    started.set()
    end = time.perf_counter() + 0.25
    while time.perf_counter() < end:
      pass

  try:
    assert thread_affinity.threads_running(probe) == [busy_id]
  finally:
    release.set()
    busy.join()
    idle.join()


@linux_only
def test_pin_threads_gives_each_thread_one_cpu_in_turn_and_unpin_restores():
  started, release = threading.Event(), threading.Event()
  thread, thread_id = _spinning_thread(0, started, release)
  started.set()
  cpus = sorted(os.sched_getaffinity(0))
  try:
    assert thread_affinity.pin_threads([thread_id]) == {thread_id: cpus[0]}
    assert os.sched_getaffinity(thread_id) == {cpus[0]}
    assert thread_affinity.pin_threads([thread_id], cpus=cpus[-1:]) == {thread_id: cpus[-1]}
    assert os.sched_getaffinity(thread_id) == {cpus[-1]}
    thread_affinity.unpin_threads([thread_id])
    assert os.sched_getaffinity(thread_id) == set(cpus)
  finally:
    release.set()
    thread.join()


def test_pinning_without_per_thread_run_times_is_refused_in_one_line(monkeypatch, tmp_path):
  monkeypatch.setattr(thread_affinity, "_TASK_DIR", str(tmp_path / "no_such_dir"))
  with pytest.raises(thread_affinity.PinningError, match=r"^thread pinning needs Linux"):
    thread_affinity.pin_intra_op_threads()


# A fresh process: the intra-op pool's size is fixed when TensorFlow's runtime starts, and the
# test processes run one intra-op thread each (tests/conftest.py).
_PIN_AND_CHECK = """
import json, os, sys, time
import base
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(2)
from serving import thread_affinity
placement = thread_affinity.pin_intra_op_threads()
matrix = tf.ones([512, 512])
before = thread_affinity.thread_run_times()
start = time.perf_counter()
for _ in range(20):
  tf.linalg.matmul(matrix, matrix).numpy()
wall_ns = (time.perf_counter() - start) * 1e9
after = thread_affinity.thread_run_times()
print(json.dumps({
    "placement": {str(thread): cpu for thread, cpu in placement.items()},
    "affinity": {str(thread): sorted(os.sched_getaffinity(thread)) for thread in placement},
    "share_of_wall": {str(thread): (after[thread] - before[thread]) / wall_ns
                      for thread in placement}}))
"""


@pytest.mark.slow
@linux_only
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity")
                    else True, reason="one CPU: nothing to spread the threads over")
def test_pin_intra_op_threads_pins_the_threads_that_compute_one_per_cpu():
  environment = dict(os.environ, TF_NUM_INTRAOP_THREADS="2",
                     PYTHONPATH=CHILD_PYTHONPATH)
  result = subprocess.run([sys.executable, "-c", _PIN_AND_CHECK], env=environment,
                          capture_output=True, text=True, timeout=300, check=True)
  report = json.loads(result.stdout.strip().splitlines()[-1])
  placement = report["placement"]
  assert len(placement) == 2
  assert len(set(placement.values())) == 2
  for thread, cpu in placement.items():
    assert report["affinity"][thread] == [cpu]
    # The pinned threads are the ones TensorFlow's products run on.
    assert report["share_of_wall"][thread] > 0.2
