"""Preemption: a training run that receives SIGTERM saves a checkpoint at the step it reached and
stops within a grace period, so that the same command resumes it (on this machine or another).

Cloud TPU VMs, spot and preemptible VMs and Kubernetes send SIGTERM about 30 s before they stop a
machine (`--preemption_grace_seconds`). A compiled training loop cannot be interrupted, so while a
`TerminationWatch` is active the engine keeps each loop shorter than a quarter of the grace
period, checks the watch between loops, and on a signal saves and raises
`errors.StoppedBySignal`. The handler is installed only in the main thread (Python delivers
signals there) and the previous handler is put back when the watch ends.
"""

import signal
import threading
import time

from absl import logging

# The share of the grace period a training loop may take: the loop under way when the signal
# comes, then the checkpoint, must both fit in it.
LOOP_SHARE_OF_GRACE = 0.25


class TerminationWatch:
  """Records a SIGTERM received while it is active (a `with` block) instead of ending the process.

  Args:
    grace_seconds: the time between the signal and the process being killed.

  Example:
    >>> import os, signal
    >>> from training import preemption
    >>> with preemption.TerminationWatch(grace_seconds=30) as watch:
    ...   os.kill(os.getpid(), signal.SIGTERM)
    ...   watch.requested
    True
  """

  def __init__(self, grace_seconds):
    self.grace_seconds = grace_seconds
    self.signal_number = None
    self.received_at = None
    self._previous_handler = None

  @property
  def requested(self):
    """Whether a termination signal has come."""
    return self.signal_number is not None

  @property
  def loop_seconds(self):
    """The longest time a training loop should take."""
    return LOOP_SHARE_OF_GRACE * self.grace_seconds

  def seconds_left(self):
    """Seconds of the grace period left since the signal (the whole period before one)."""
    if self.received_at is None:
      return self.grace_seconds
    return self.grace_seconds - (time.monotonic() - self.received_at)

  def _handle(self, signal_number, frame):
    del frame
    if self.signal_number is None:
      self.signal_number = signal_number
      self.received_at = time.monotonic()
      logging.warning("Received %s: saving a checkpoint after the loop under way, then stopping "
                      "(grace period %g s)", signal.Signals(signal_number).name,
                      self.grace_seconds)

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous_handler = signal.signal(signal.SIGTERM, self._handle)
    return self

  def __exit__(self, *exc_info):
    if self._previous_handler is not None:
      signal.signal(signal.SIGTERM, self._previous_handler)
      self._previous_handler = None
