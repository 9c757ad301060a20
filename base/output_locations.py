"""Checks of the places a script will write, made before any work: a run that would end in a
file-system error after minutes of data processing or training ends at once instead, with one line
naming the flag.

Paths go through `tf.io.gfile`, so `gs://`, `s3://` (with tensorflow-io) and `hdfs://` outputs are
checked for their kind (file or directory); writability is probed on local paths only, where a
probe leaves nothing behind and costs nothing.
"""

import atexit
import contextlib
import functools
import json
import os
import socket
import tempfile
import threading
import time

from absl import logging
import tensorflow as tf

from base import atomic_files
from base import errors

LOCK_FILENAME = ".lock"
# A live run rewrites its lock's heartbeat this often (a small write, even on gs://)...
LEASE_RENEWAL_SECONDS = 30
# ...and a lock not renewed for this long is another run's to take over, from any host: ten
# renewals missed, far above a slow write or the clock skew between machines, and still short
# beside the minutes a preempted machine takes to be replaced.
LEASE_EXPIRY_SECONDS = 300


class OutputLocationError(errors.UserError, ValueError):
  """An output flag names a place that cannot be written."""


def is_local(path):
  """True for paths of the local file system (no `scheme://` prefix)."""
  return "://" not in path


def check_output_dir(flag_name, path):
  """Raises `OutputLocationError` unless `path` is a directory that exists or can be created
  (with its missing parents), and, locally, can be written in.

  Args:
    flag_name: the flag that named `path`, for the message.
    path: the directory.
  """
  if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    raise OutputLocationError(f"--{flag_name}={path}: is a file, expected a directory")
  _check_can_create_in(flag_name, path, path)


def check_output_file(flag_name, path):
  """Raises `OutputLocationError` unless `path` can be written as a file: not a directory, and,
  locally, in a directory that exists and can be written in (a temporary file beside the output is
  renamed over it, so the directory must be writable even if the file is)."""
  if tf.io.gfile.isdir(path):
    raise OutputLocationError(f"--{flag_name}={path}: is a directory, expected a file")
  directory = os.path.dirname(path)
  # Object stores (gs://, s3://) have no directories to create: a file can be written under any
  # prefix.
  if is_local(path) and directory and not tf.io.gfile.isdir(directory):
    kind = "is not a directory" if tf.io.gfile.exists(directory) else "does not exist"
    raise OutputLocationError(f"--{flag_name}={path}: directory {directory} {kind}")
  _check_can_create_in(flag_name, path, directory or ".")


def _check_can_create_in(flag_name, path, directory):
  """Checks that the nearest existing ancestor of `directory` (itself included) is a directory
  and, for a local path, that a file can be created in it."""
  ancestor = directory
  while not tf.io.gfile.exists(ancestor):
    parent = os.path.dirname(ancestor.rstrip("/"))
    if not parent or parent == ancestor:
      return
    ancestor = parent
  if not tf.io.gfile.isdir(ancestor):
    raise OutputLocationError(f"--{flag_name}={path}: {ancestor} is a file, not a directory")
  if is_local(ancestor):
    try:
      with tempfile.TemporaryFile(dir=ancestor):
        pass
    except OSError as error:
      raise OutputLocationError(
          f"--{flag_name}={path}: cannot create files in {ancestor} ({error.strerror})") from None


def claim_output_dir(flag_name, path, renewal_seconds=LEASE_RENEWAL_SECONDS,
                     expiry_seconds=LEASE_EXPIRY_SECONDS):
  """Makes `path` this run's own until the process ends: refuses a directory that a live run
  holds, takes over the lock of a killed run, and removes the temporaries killed runs left in it.

  Two runs on one directory would overwrite each other's record files and delete each other's
  checkpoints. The lock, `<path>/.lock`, is a lease: it names the host, the process id and the
  start time, and holds a heartbeat (UTC epoch seconds) that a daemon thread rewrites every
  `renewal_seconds` while the run lives. Another run takes the lock over

  - at once, if the lock names a process of this host that no longer runs;
  - from any host, once the heartbeat is more than `expiry_seconds` old: its holder is dead, or
    stopped (a preempted machine whose output directory is on `gs://`), or cannot write any more.

  A live lease of another host is refused. Hosts compare their own clocks with the heartbeat, so
  the expiry must be well above the clock skew between them. A lock without a heartbeat (written
  before leases) counts as renewed when last modified. The lock is removed when the claim is
  released or the process exits, with the directory if the claim created it and the run wrote
  nothing there.

  Args:
    flag_name: the flag that named `path`, for the messages.
    path: the output directory.
    renewal_seconds: seconds between two heartbeats.
    expiry_seconds: age of a heartbeat after which another run takes the lease over.

  Returns:
    a function that releases the claim now (otherwise it is released when the process exits).

  Raises:
    OutputLocationError: another process holds the directory.
  """
  created = not tf.io.gfile.isdir(path)
  tf.io.gfile.makedirs(path)
  lock_path = os.path.join(path, LOCK_FILENAME)
  now = time.time()
  lease = {"host": socket.gethostname(), "pid": os.getpid(), "started": _utc(now),
           "heartbeat": now}
  holder = _read_lock(lock_path)
  if holder and not _same_holder(holder, lease):
    _check_can_take_over(flag_name, path, lock_path, holder, expiry_seconds)
  _write_lock(lock_path, lease)
  heartbeat = _Heartbeat(lock_path, lease, renewal_seconds)
  release = functools.partial(_release_lock, lock_path, lease, heartbeat,
                              path if created else None)
  atexit.register(release)
  atomic_files.remove_stale_temporaries(path)

  def release_now():
    atexit.unregister(release)
    release()
  return release_now


@contextlib.contextmanager
def claimed_output_dir(flag_name, path, claim=True):
  """`claim_output_dir` for the duration of a `with` block (a run in a process that goes on, as
  a notebook's): the lock is released when the block ends. With `claim` False (a worker that
  is not the chief), nothing is claimed."""
  if not claim:
    yield
    return
  release = claim_output_dir(flag_name, path)
  try:
    yield
  finally:
    release()




def _check_can_take_over(flag_name, path, lock_path, holder, expiry_seconds):
  """Returns if the lease `holder` (the lock's content, another run's) may be taken over, with a
  log line saying why; raises `OutputLocationError` if its run may still be live."""
  host, pid = holder.get("host"), holder.get("pid")
  same_host = host == socket.gethostname()
  if same_host and not _runs_here(pid):
    logging.info("taking over %s from process %s, which no longer runs", lock_path, pid)
    return
  renewed = _last_renewal(lock_path, holder)
  if time.time() - renewed > expiry_seconds:
    logging.warning("taking over %s from process %s on %s: its lease was last renewed at %s, "
                    "more than %d s ago", lock_path, pid, host, _utc(renewed), expiry_seconds)
    return
  if same_host:
    raise OutputLocationError(
        f"--{flag_name}={path} is in use by process {pid} (started "
        f"{holder.get('started', '?')}); wait for it to end or choose another --{flag_name}")
  raise OutputLocationError(
      f"--{flag_name}={path} is in use by process {pid} on {host}, whose lease was last renewed "
      f"at {_utc(renewed)} and expires at {_utc(renewed + expiry_seconds)} unless renewed; "
      f"wait for that run to end or choose another --{flag_name}")


def _runs_here(pid):
  """True if `pid` (a lock's, so possibly malformed) is a process running on this machine."""
  # Not a positive int: os.kill would signal a process group, or every process, and succeed.
  return isinstance(pid, int) and pid > 0 and atomic_files.process_exists(pid)


def _last_renewal(lock_path, holder):
  """When the lease `holder` read from `lock_path` was last renewed, in UTC epoch seconds."""
  heartbeat = holder.get("heartbeat")
  if isinstance(heartbeat, (int, float)):
    return heartbeat
  # A lock written before leases: its last write is its only sign of life.
  try:
    return tf.io.gfile.stat(lock_path).mtime_nsec / 1e9
  except tf.errors.NotFoundError:  # released since it was read
    return 0


def _same_holder(holder, lease):
  """True if the lock content `holder` names the run of `lease`: process ids repeat across
  hosts (a container's first process is 1 on every machine), so the host must match too."""
  return (holder.get("host"), holder.get("pid")) == (lease["host"], lease["pid"])


def _utc(seconds):
  """Epoch seconds as a time that reads the same on every host."""
  return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


class _Heartbeat:
  """Renews a lease: rewrites its lock with the time every `renewal_seconds`, in a daemon thread,
  until `stop()`, or until the lock no longer names this run (another run took an expired lease
  over, or a person deleted the lock: renewing would take the directory back from under it)."""

  def __init__(self, lock_path, lease, renewal_seconds):
    self._lock_path = lock_path
    self._lease = lease
    self._renewal_seconds = renewal_seconds
    self._stopped = threading.Event()
    self._thread = threading.Thread(target=self._run, name=f"lease of {lock_path}", daemon=True)
    self._thread.start()

  def _run(self):
    while not self._stopped.wait(self._renewal_seconds) and self._renew():
      pass

  def _renew(self):
    """Renews the lease once; returns False when it is no longer this run's."""
    try:
      holder = _read_lock(self._lock_path)
      if holder == {}:  # a failed read, or one racing a rename: tried again at the next renewal
        return True
      if holder is None or not _same_holder(holder, self._lease):
        logging.error("stopped renewing the lease %s: %s", self._lock_path,
                      f"it names process {holder.get('pid')} on {holder.get('host')} now"
                      if holder else "it was deleted")
        return False
      _write_lock(self._lock_path, dict(self._lease, heartbeat=time.time()))
    # Any error: a failed heartbeat must not end the run (in this daemon thread it would only end
    # the renewals), and the next one may succeed (a network file system back up, space freed).
    except Exception as error:  # pylint: disable=broad-except
      logging.warning("could not renew the lease %s (%s); trying again in %s s",
                      self._lock_path, error, self._renewal_seconds)
    return True

  def stop(self):
    """Stops the renewals, waiting for one under way (which could otherwise rewrite the lock
    after its release removed it)."""
    self._stopped.set()
    self._thread.join()


def _read_lock(lock_path):
  """The lock's content: None if there is none, {} if it cannot be read as a JSON object."""
  try:
    with tf.io.gfile.GFile(lock_path, "rb") as f:
      holder = json.loads(f.read().decode("utf-8"))
  except tf.errors.NotFoundError:
    return None
  except (tf.errors.OpError, ValueError):
    return {}
  return holder if isinstance(holder, dict) else {}


def _write_lock(lock_path, lease):
  """Writes the lock whole or not at all: a reader on any host never sees half a lease."""
  with atomic_files.open_for_writing(lock_path) as f:
    f.write(json.dumps(lease) + "\n")


def _release_lock(lock_path, lease, heartbeat, created_directory):
  """Stops the lease's renewals and removes its lock if it still names this run, and the
  directory the claim created if nothing else was written in it (a run that failed before any
  work leaves nothing)."""
  heartbeat.stop()
  if _same_holder(_read_lock(lock_path) or {}, lease):
    tf.io.gfile.remove(lock_path)
  if created_directory and not tf.io.gfile.listdir(created_directory):
    tf.io.gfile.rmtree(created_directory)
