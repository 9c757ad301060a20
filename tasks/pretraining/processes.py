"""The lifetime of pretraining-data creation's processes: workers that die with the main process,
however it ends, and a main process that a termination signal ends through its cleanup.

Without them, SIGTERM to `create_pretraining_data.py` ended the main process at once: its part
files and temporary outputs stayed, and in 2 of 7 trials both workers stayed too, blocked forever
on their queue of shards (each worker holds a copy of the write end of that queue's pipe, so it
never sees the pipe close).
"""

import ctypes
import os
import signal
import sys
import threading
import time

from base import errors

# The signals that end a run and that the main process turns into `TerminatedError`, a line
# where SIGINT's KeyboardInterrupt would print a traceback (SIGHUP: the terminal closed).
TERMINATION_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP")
                            if hasattr(signal, name))
# <linux/prctl.h>
_PR_SET_PDEATHSIG = 1
# How often a worker without PR_SET_PDEATHSIG (not Linux) looks for its parent.
_ORPHAN_CHECK_SECONDS = 1.0


class TerminatedError(errors.StoppedBySignal):
  """A termination signal ended the run before it completed (exit status 128 + the signal, as
  a training run that `training.preemption` stops)."""

  def __init__(self, signum):
    super().__init__(f"stopped by {signal.Signals(signum).name}: nothing written, no temporary "
                     "left", signum)


def die_with_parent(parent_pid):
  """Makes this worker process end when the main process `parent_pid` ends, whatever ends it,
  and leaves the termination signals to the main process.

  On Linux the kernel sends the worker SIGKILL when its parent ends (PR_SET_PDEATHSIG: strictly,
  when the thread that started it does; the pool starts its workers from the thread that submits
  the shards, which runs the whole `write_pretraining_data`). Elsewhere a thread watches the
  parent's id. A worker holds no state worth a cleanup: its part files are in the main process's
  temporary directory, which the main process or the next run removes.

  Args:
    parent_pid: the main process's id, taken before the worker started.
  """
  # A forked worker inherits the main process's handlers, which would raise TerminatedError here
  # (SIGTERM from the main process's cleanup must end a worker at once). A terminal's Ctrl-C
  # reaches the whole process group: the main process ends its workers itself.
  for signum in TERMINATION_SIGNALS:
    signal.signal(signum, signal.SIG_IGN if signum == signal.SIGINT else signal.SIG_DFL)
  if not _set_parent_death_signal(signal.SIGKILL):
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), name="orphan check",
                     daemon=True).start()
  # The parent may have ended before the death signal was set: the worker is an orphan already.
  if os.getppid() != parent_pid:
    os._exit(1)  # at once: nothing of the main process's state is this worker's to clean up


def _set_parent_death_signal(signum):
  """prctl(PR_SET_PDEATHSIG, signum); False where there is no such call."""
  if not sys.platform.startswith("linux"):
    return False
  try:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
  except (OSError, AttributeError):  # a libc without prctl
    return False


def _exit_when_orphaned(parent_pid):
  """Ends this process once its parent `parent_pid` has ended (it then has another parent)."""
  while os.getppid() == parent_pid:
    time.sleep(_ORPHAN_CHECK_SECONDS)
  os._exit(1)


class TerminationSignals:
  """While its `with` block runs in the main thread, the first termination signal raises
  `TerminatedError` there, so that the block's `finally` clauses end the workers and remove the
  temporaries (the default action would end the process at once, leaving both); later ones are
  ignored, the run ending already.

  After `hold()` (the outputs being renamed, a cleanup: work that a signal must not cut short),
  a signal is remembered instead: when the block ends, the previous handlers are restored and the
  remembered signals sent again, so that the caller's own handling, or the default end of the
  process, follows the completed work. Outside the main thread, where Python runs no signal
  handler, nothing changes.
  """

  def __init__(self):
    self._previous = {}
    self._raised = False
    self._holding = False
    self._held = []

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous = {signum: signal.signal(signum, self._handle)
                        for signum in TERMINATION_SIGNALS}
    return self

  def __exit__(self, *exc_info):
    for signum, handler in self._previous.items():
      # None: a handler set outside Python, which cannot be set back from it.
      signal.signal(signum, signal.SIG_DFL if handler is None else handler)
    for signum in self._held:
      signal.raise_signal(signum)

  def _handle(self, signum, frame):
    del frame
    if self._raised:
      return
    if self._holding:
      self._held.append(signum)
      return
    self._raised = True
    raise TerminatedError(signum)

  def hold(self):
    """Remembers the signals from now until the block ends, instead of raising."""
    self._holding = True
