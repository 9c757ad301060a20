"""Pins TensorFlow's intra-op threads one per CPU, for a process that serves an export.

TensorFlow leaves its threads' placement to the kernel. Its intra-op threads sleep between
kernels, about a thousand times in a BERT-Base call at batch 1. Some schedulers (that of the
virtual machine measured) place a thread that wakes after idling a moment on a CPU already busy,
to leave the others idle: a call after a pause then runs at one thread's speed (docs/serving.md, "Pinning TensorFlow's threads"). Pinned, each
thread wakes on its own CPU. PyTorch's OpenMP threads spin between kernels and stay where they
are.

`pin_intra_op_threads()` finds the threads by what they do: it runs a few matrix products and
takes the threads other than the caller that ran them (Linux's per-thread run time,
`/proc/self/task/*/schedstat`), then pins each to one CPU of the process's CPU set in turn. Call
it once the model is loaded and before serving, while nothing else in the process computes.
Pinned threads cannot move away from a CPU another process keeps busy: for a process that has
its CPUs to itself. Linux only; TensorFlow Serving itself has no such setting.

Usage:
  model = tf.saved_model.load(export_dir)
  thread_affinity.pin_intra_op_threads()   # {thread id: CPU}
"""

import os
import threading
import time

from base import errors

# A thread counts as a probe's worker when it ran at least this share of the probe's wall time.
_WORKER_SHARE = 0.1
_PROBE_PRODUCTS = 20
_PROBE_SIZE = 512
_TASK_DIR = "/proc/self/task"


class PinningError(errors.UserError, RuntimeError):
  """Threads cannot be pinned here (not Linux, or no per-thread run times)."""


def thread_run_times():
  """Returns {thread id: nanoseconds it has run on a CPU} for this process's threads."""
  run_times = {}
  for name in os.listdir(_TASK_DIR):
    try:
      with open(os.path.join(_TASK_DIR, name, "schedstat")) as stat:
        run_times[int(name)] = int(stat.read().split()[0])
    except (OSError, ValueError, IndexError):
      pass  # the thread ended, or the kernel keeps no schedstat
  return run_times


def _check_platform():
  if not hasattr(os, "sched_setaffinity") or not os.path.isdir(_TASK_DIR):
    raise PinningError("thread pinning needs Linux (/proc/self/task and sched_setaffinity)")
  if not thread_run_times():
    raise PinningError("thread pinning needs per-thread run times "
                       "(/proc/self/task/*/schedstat, a kernel with CONFIG_SCHEDSTATS)")


def threads_running(probe):
  """Runs `probe()` and returns the ids of this process's threads, other than the caller, that
  ran on a CPU for at least `_WORKER_SHARE` of its wall time, in ascending order."""
  caller = threading.get_native_id()
  before = thread_run_times()
  start = time.perf_counter()
  probe()
  wall_ns = (time.perf_counter() - start) * 1e9
  after = thread_run_times()
  return sorted(thread for thread, run_time in after.items()
                if thread != caller and thread in before
                and run_time - before[thread] >= _WORKER_SHARE * wall_ns)


def pin_threads(threads, cpus=None):
  """Pins `threads[i]` to `cpus[i % len(cpus)]`.

  Args:
    threads: thread ids of this process.
    cpus: CPU numbers; default the process's CPU set (`os.sched_getaffinity(0)`), ascending.

  Returns:
    {thread id: CPU}.
  """
  cpus = sorted(os.sched_getaffinity(0)) if cpus is None else list(cpus)
  placement = {thread: cpus[i % len(cpus)] for i, thread in enumerate(threads)}
  for thread, cpu in placement.items():
    os.sched_setaffinity(thread, {cpu})
  return placement


def unpin_threads(threads):
  """Lets `threads` run on every CPU of the process's CPU set again."""
  cpus = os.sched_getaffinity(0)
  for thread in threads:
    try:
      os.sched_setaffinity(thread, cpus)
    except ProcessLookupError:
      pass  # the thread ended


def pin_intra_op_threads():
  """Pins TensorFlow's intra-op threads one per CPU of the process's CPU set.

  Returns:
    {thread id: CPU}; empty when the matrix products ran on the caller alone (one intra-op
    thread).

  Raises:
    PinningError: not on Linux, or the kernel keeps no per-thread run times.
  """
  _check_platform()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  matrix = tf.ones([_PROBE_SIZE, _PROBE_SIZE])

  def products():
    for _ in range(_PROBE_PRODUCTS):
      tf.linalg.matmul(matrix, matrix).numpy()

  products()  # the first call builds the kernel
  return pin_threads(threads_running(products))
