"""What the cluster description in the `TF_CONFIG` environment variable says of this process,
known before any distribution strategy is built."""

import json
import os


def is_chief_process():
  """Whether this process is the chief of the cluster TF_CONFIG describes (True without one, or
  with a TF_CONFIG that is not valid: `training.distribution.strategy_from_flags` reports that)."""
  try:
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task, cluster = config.get("task") or {}, config.get("cluster") or {}
  except (ValueError, AttributeError):
    return True
  if not task.get("type") or task["type"] == "chief":
    return True
  return task["type"] == "worker" and int(task.get("index", 0)) == 0 and "chief" not in cluster
