"""The tf.distribute strategy of a run, from the distribution fields of its config.

`--distribution_strategy` picks one of one_device, mirrored (the local GPUs), multi_worker_mirrored
(several hosts, described by the TF_CONFIG environment variable) and tpu. The original's TPU flags
are accepted too: `--use_tpu --tpu_name=X` means `--distribution_strategy=tpu --tpu=X`, and
`--use_tpu --master=grpc://...` addresses a TPU by its gRPC endpoint.

A TPU is reached in three bounded stages so that a wrong name or address fails in seconds with a
message instead of hanging: name resolution (TPUClusterResolver; queries the Cloud TPU API for a
name) in a thread with a deadline, a TCP probe of the resolved gRPC endpoint, then the connection
and TPU initialisation, again with a deadline (TensorFlow's own connect call waits forever on an
unreachable endpoint).
"""

import json
import os
import queue
import socket
import threading
import urllib.parse

from absl import logging
import tensorflow as tf

from base import errors

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
_PROBE_TIMEOUT_SECONDS = 10.0


class DistributionError(errors.UserError, ValueError):
  """The requested strategy cannot be built (bad flags, missing devices, unreachable TPU)."""


def resolve_tpu(tpu=None, use_tpu=False, tpu_name=None, master=None):
  """Returns the TPU to use (name or grpc:// address) from the new and the original flags.

  Args:
    tpu: `--tpu`, a Cloud TPU name, "local", or a grpc:// address.
    use_tpu, tpu_name, master: the original's `--use_tpu`, `--tpu_name`, `--master`.

  Returns:
    the TPU name/address, or None when no TPU is requested.
  """
  if tpu and tpu_name and tpu != tpu_name:
    raise DistributionError(f"--tpu={tpu} and --tpu_name={tpu_name} disagree; give one of them")
  if tpu_name and not use_tpu and not tpu:
    raise DistributionError("--tpu_name is given without --use_tpu (or use --tpu)")
  if use_tpu:
    chosen = tpu or tpu_name or master
    if not chosen:
      raise DistributionError("--use_tpu needs --tpu_name (or --master / --tpu)")
    return chosen
  return tpu or None


def _call_with_deadline(fn, timeout_seconds, what):
  """Runs `fn()` in a daemon thread; returns its result or raises DistributionError on timeout."""
  results = queue.Queue(maxsize=1)

  def target():
    try:
      results.put((True, fn()))
    except Exception as error:  # re-raised in the caller's thread
      results.put((False, error))

  threading.Thread(target=target, daemon=True, name=what).start()
  try:
    ok, value = results.get(timeout=timeout_seconds)
  except queue.Empty:
    raise DistributionError(f"{what}: no answer after {timeout_seconds:.0f} s") from None
  if not ok:
    raise value
  return value


def _probe_grpc_endpoint(tpu, master, timeout_seconds):
  """Raises DistributionError if nothing listens at the grpc://host:port endpoint `master`."""
  address = urllib.parse.urlparse(master)
  if address.scheme != "grpc" or not address.hostname or not address.port:
    return
  try:
    with socket.create_connection((address.hostname, address.port), timeout=timeout_seconds):
      pass
  except OSError as error:
    raise DistributionError(
        f"cannot reach TPU {tpu!r} at {address.hostname}:{address.port}: {error}") from None


def connect_tpu(tpu, zone=None, project=None, timeout_seconds=300.0,
                probe_timeout_seconds=_PROBE_TIMEOUT_SECONDS):
  """Resolves, probes, connects to and initialises a TPU; returns a `tf.distribute.TPUStrategy`.

  Raises:
    DistributionError: the name does not resolve, the endpoint does not answer, or the connection
      does not complete within `timeout_seconds`.
  """
  def resolve():
    return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu, zone=zone, project=project)

  try:
    resolver = _call_with_deadline(resolve, min(timeout_seconds, 60.0), f"resolving TPU {tpu!r}")
  except DistributionError:
    raise
  except Exception as error:  # the resolver raises ValueError, URLError, HttpError, ...
    raise DistributionError(
        f"cannot resolve TPU {tpu!r} (zone={zone}, project={project}): {error}") from None
  master = resolver.master()
  _probe_grpc_endpoint(tpu, master, probe_timeout_seconds)

  def connect():
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)

  try:
    _call_with_deadline(connect, timeout_seconds, f"connecting to TPU {tpu!r} at {master}")
  except DistributionError:
    raise
  except Exception as error:  # the endpoint answers but is not a TPU worker
    message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    raise DistributionError(f"cannot connect to TPU {tpu!r} at {master}: {message}") from None
  logging.info("Connected to TPU %s (%s)", tpu, master)
  return tf.distribute.TPUStrategy(resolver)


def _check_tf_config():
  """Raises DistributionError if TF_CONFIG is set but is not a usable cluster description."""
  raw = os.environ.get("TF_CONFIG")
  if not raw:
    logging.warning("multi_worker_mirrored without TF_CONFIG: running as a single worker")
    return
  try:
    config = json.loads(raw)
  except json.JSONDecodeError as error:
    raise DistributionError(f"TF_CONFIG is not valid JSON: {error}") from None
  task = config.get("task", {})
  if "cluster" not in config or "type" not in task or "index" not in task:
    raise DistributionError(
        "TF_CONFIG needs 'cluster' and 'task': {'type': ..., 'index': ...}, got " + raw)


def get_strategy(distribution_strategy="mirrored", num_gpus=None, tpu=None, tpu_zone=None,
                 gcp_project=None, devices=None, tpu_timeout_seconds=300.0):
  """Builds a strategy.

  Args:
    distribution_strategy: one of `STRATEGIES`.
    num_gpus: GPUs to use (one_device/mirrored); None = all visible GPUs (the CPU when none).
    tpu: TPU name or grpc:// address (tpu strategy only).
    tpu_zone, gcp_project: passed to the TPU resolver.
    devices: explicit device list for mirrored (e.g. logical CPUs in tests); overrides num_gpus.
    tpu_timeout_seconds: deadline of the TPU connection.

  Returns:
    a `tf.distribute.Strategy`.
  """
  if distribution_strategy not in STRATEGIES:
    raise DistributionError(
        f"--distribution_strategy must be one of {STRATEGIES}, got {distribution_strategy!r}")
  if distribution_strategy == "tpu":
    if not tpu:
      raise DistributionError("--distribution_strategy=tpu needs --tpu (or --use_tpu --tpu_name)")
    return connect_tpu(tpu, tpu_zone, gcp_project, tpu_timeout_seconds)
  if tpu:
    raise DistributionError(f"a TPU is given but --distribution_strategy={distribution_strategy}")
  if distribution_strategy == "multi_worker_mirrored":
    _check_tf_config()
    return tf.distribute.MultiWorkerMirroredStrategy()
  available_gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
  if num_gpus is not None and num_gpus > len(available_gpus):
    raise DistributionError(
        f"--num_gpus={num_gpus} but only {len(available_gpus)} GPU(s) are visible")
  gpus = available_gpus if num_gpus is None else available_gpus[:num_gpus]
  if distribution_strategy == "one_device":
    return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else "/cpu:0")
  return tf.distribute.MirroredStrategy(devices or gpus or ["/cpu:0"])


def strategy_from_config(run_config):
  """Builds the strategy of a `training.config.EngineConfig`'s distribution fields."""
  tpu = resolve_tpu(run_config.tpu, run_config.use_tpu, run_config.tpu_name, run_config.master)
  name = run_config.distribution_strategy
  if tpu and name != "tpu":
    if "distribution_strategy" in run_config.given_flags:
      raise DistributionError(f"a TPU is given but --distribution_strategy={name}")
    name = "tpu"
  strategy = get_strategy(name, run_config.num_gpus, tpu, run_config.tpu_zone,
                          run_config.gcp_project)
  if name == "tpu" and strategy.num_replicas_in_sync != run_config.num_tpu_cores:
    logging.warning("--num_tpu_cores=%d but the TPU has %d cores; using %d",
                    run_config.num_tpu_cores, strategy.num_replicas_in_sync,
                    strategy.num_replicas_in_sync)
  logging.info("Distribution: %s with %d replica(s)", name, strategy.num_replicas_in_sync)
  return strategy


def is_chief(strategy):
  """Whether this process writes checkpoints and summaries (the chief, or worker 0 without one)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.task_type:
    return True
  if resolver.task_type == "chief":
    return True
  return (resolver.task_type == "worker" and resolver.task_id == 0
          and "chief" not in resolver.cluster_spec().as_dict())
