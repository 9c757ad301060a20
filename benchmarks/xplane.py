"""The TensorFlow ops of a `tf.profiler.experimental` trace, read from its `.xplane.pb`.

Shared by `serving_profile.py` and `fine_tuning.py --profile`; no flags, so either can import it.
"""

import glob
import pathlib

from tensorflow.tsl.profiler.protobuf import xplane_pb2

# Host-plane events that contain other ops rather than being one (a function call, a loop or a
# conditional runs its body's ops, which have events of their own).
CONTAINERS = ("Process", "Run", "PartitionedCall", "StatefulPartitionedCall", "While",
              "StatelessWhile", "If", "StatelessIf")


def leaf_op_events(trace_dir):
  """The leaf TensorFlow op events of the host CPU plane of a trace.

  Args:
    trace_dir: the directory given to `tf.profiler.experimental.start`.

  Yields:
    `(op_name, op_type, seconds)` per event, containers (`CONTAINERS`, `__inference_*`
    functions) and events that are not ops left out.
  """
  path = glob.glob(f"{trace_dir}/**/*.xplane.pb", recursive=True)[0]
  space = xplane_pb2.XSpace()
  space.ParseFromString(pathlib.Path(path).read_bytes())
  for plane in space.planes:
    if plane.name != "/host:CPU":
      continue
    for line in plane.lines:
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        if ":" not in name:
          continue
        op_name, op_type = name.rsplit(":", 1)
        if op_type in CONTAINERS or op_type.strip().startswith("__inference"):
          continue
        yield op_name, op_type, event.duration_ps / 1e12
