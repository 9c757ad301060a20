"""The output directory's lock is a lease: renewed while its run lives, taken over once it is not,
from any host; a live run, here or on another host, keeps its directory."""

import json
import logging
import os
import socket
import subprocess
import threading
import time

import pytest
import tensorflow as tf

from base import output_locations
from base.output_locations import OutputLocationError


def _write_lock(output_dir, **lease):
  output_dir.mkdir(exist_ok=True)
  (output_dir / ".lock").write_text(json.dumps(lease))


def _lock(output_dir):
  return json.loads((output_dir / ".lock").read_text())


def _heartbeat_threads():
  return [thread for thread in threading.enumerate() if thread.name.startswith("lease of ")]


def _dead_pid():
  process = subprocess.Popen(["true"])
  process.wait()
  return process.pid


def _utc(seconds):
  return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def test_a_lease_of_another_host_not_renewed_is_taken_over(tmp_path, caplog):
  output_dir = tmp_path / "out"
  renewed = time.time() - 400
  _write_lock(output_dir, host="preempted-vm", pid=4242, started="2026-01-01 00:00:00 UTC",
              heartbeat=renewed)
  with caplog.at_level(logging.WARNING, logger="absl"):
    release = output_locations.claim_output_dir("output_dir", str(output_dir),
                                                expiry_seconds=300)
  try:
    lock = _lock(output_dir)
    assert (lock["host"], lock["pid"]) == (socket.gethostname(), os.getpid())
    assert lock["heartbeat"] >= renewed + 400
    assert (f"taking over {output_dir / '.lock'} from process 4242 on preempted-vm: its lease "
            f"was last renewed at {_utc(renewed)}, more than 300 s ago") in caplog.text
  finally:
    release()


def test_a_fresh_lease_of_another_host_is_refused_saying_until_when(tmp_path):
  output_dir = tmp_path / "out"
  renewed = time.time() - 10
  _write_lock(output_dir, host="other-vm", pid=4242, started="2026-01-01 00:00:00 UTC",
              heartbeat=renewed)
  with pytest.raises(OutputLocationError) as error:
    output_locations.claim_output_dir("output_dir", str(output_dir), expiry_seconds=300)
  assert str(error.value) == (
      f"--output_dir={output_dir} is in use by process 4242 on other-vm, whose lease was last "
      f"renewed at {_utc(renewed)} and expires at {_utc(renewed + 300)} unless renewed; wait for "
      "that run to end or choose another --output_dir")
  assert _lock(output_dir)["host"] == "other-vm"
  assert not _heartbeat_threads()


def test_a_lock_without_heartbeat_counts_as_renewed_when_last_written(tmp_path):
  output_dir = tmp_path / "out"
  _write_lock(output_dir, host="other-vm", pid=4242)
  with pytest.raises(OutputLocationError, match="in use by process 4242 on other-vm"):
    output_locations.claim_output_dir("output_dir", str(output_dir))
  an_hour_ago = time.time() - 3600
  os.utime(output_dir / ".lock", (an_hour_ago, an_hour_ago))
  output_locations.claim_output_dir("output_dir", str(output_dir))()


def test_a_same_host_lock_of_a_dead_process_is_taken_over_at_once(tmp_path):
  output_dir = tmp_path / "out"
  _write_lock(output_dir, host=socket.gethostname(), pid=_dead_pid(), heartbeat=time.time())
  release = output_locations.claim_output_dir("output_dir", str(output_dir))
  assert _lock(output_dir)["pid"] == os.getpid()
  release()


def test_the_heartbeat_is_renewed_until_release_which_removes_the_lock(tmp_path):
  output_dir = tmp_path / "out"
  output_dir.mkdir()
  release = output_locations.claim_output_dir("output_dir", str(output_dir),
                                              renewal_seconds=0.05)
  first = _lock(output_dir)["heartbeat"]
  deadline = time.monotonic() + 10
  while _lock(output_dir)["heartbeat"] == first and time.monotonic() < deadline:
    time.sleep(0.02)
  assert _lock(output_dir)["heartbeat"] > first
  assert len(_heartbeat_threads()) == 1
  release()
  assert not (output_dir / ".lock").exists()
  assert not _heartbeat_threads()
  time.sleep(0.2)  # a few renewal intervals: nothing writes the lock again
  assert not (output_dir / ".lock").exists()
  assert [p.name for p in output_dir.iterdir()] == []


def test_a_failed_renewal_is_a_warning_and_the_next_one_renews(tmp_path, monkeypatch, caplog):
  output_dir = tmp_path / "out"
  release = output_locations.claim_output_dir("output_dir", str(output_dir), renewal_seconds=0.05)
  first = _lock(output_dir)["heartbeat"]
  write_lock = output_locations._write_lock  # pylint: disable=protected-access
  failures = []

  def fail_once(lock_path, lease):
    if not failures:
      failures.append(lease)
      raise tf.errors.ResourceExhaustedError(None, None, "no space left on device")
    write_lock(lock_path, lease)

  with caplog.at_level(logging.WARNING, logger="absl"):
    monkeypatch.setattr(output_locations, "_write_lock", fail_once)
    deadline = time.monotonic() + 10
    while _lock(output_dir)["heartbeat"] == first and time.monotonic() < deadline:
      time.sleep(0.02)
    renewed = _lock(output_dir)["heartbeat"]
    release()
  assert failures and renewed > first
  assert f"could not renew the lease {output_dir / '.lock'} (no space left on device)" in (
      caplog.text)
  assert not (output_dir / ".lock").exists()


def test_a_run_whose_lease_was_taken_over_stops_renewing_and_leaves_the_lock(tmp_path, caplog):
  output_dir = tmp_path / "out"
  release = output_locations.claim_output_dir("output_dir", str(output_dir), renewal_seconds=0.05)
  _write_lock(output_dir, host="new-vm", pid=_dead_pid(), heartbeat=time.time())
  with caplog.at_level(logging.ERROR, logger="absl"):
    deadline = time.monotonic() + 10
    while _heartbeat_threads() and time.monotonic() < deadline:
      time.sleep(0.02)
  assert f"stopped renewing the lease {output_dir / '.lock'}: it names process" in caplog.text
  release()
  assert _lock(output_dir)["host"] == "new-vm"
