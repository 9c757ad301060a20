"""Termination signals in pretraining-data creation's main process: the first one raises, so the
cleanup runs; one after `hold()` waits for the end of the work, then goes to the caller's handler.
(The workers' end with the main process: tests/test_create_pretraining_data.py.)"""

import os
import signal

import pytest

from tasks.pretraining import processes


@pytest.fixture
def received():
  """The SIGTERMs that reach the handler the test's process had before the block."""
  signals = []
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: signals.append(signum))
  yield signals
  signal.signal(signal.SIGTERM, previous)


def test_the_first_signal_raises_and_later_ones_are_ignored(received):
  with pytest.raises(processes.TerminatedError) as error:
    with processes.TerminationSignals():
      try:
        os.kill(os.getpid(), signal.SIGTERM)
      finally:
        os.kill(os.getpid(), signal.SIGTERM)  # in the cleanup: the run ends already
  assert str(error.value) == "stopped by SIGTERM: nothing written, no temporary left"
  assert not received


def test_a_signal_after_hold_is_sent_again_when_the_block_ends(received):
  with processes.TerminationSignals() as signals:
    signals.hold()
    os.kill(os.getpid(), signal.SIGTERM)
    assert not received
  assert received == [signal.SIGTERM]
  os.kill(os.getpid(), signal.SIGTERM)  # the caller's handler is back
  assert received == [signal.SIGTERM] * 2
