"""The TensorFlow ops of a `tf.profiler.experimental` trace, read from its `.xplane.pb`.

Shared by `serving_profile.py` and `fine_tuning.py --profile`; no flags, so either can import it.
"""

import glob
import pathlib
import re

from tensorflow.tsl.profiler.protobuf import xplane_pb2

# Ops that run other ops, which have events of their own: function calls, loops, conditionals.
CONTAINERS = ("PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If",
              "StatelessIf")
# The runtime's event of one run of an XLA-compiled function (`jit_compile=True`, as
# `modeling/activations.py`'s GELU): the op that calls it has no event of its own.
XLA_EVENT = "CpuExecutable::ExecuteAsyncOnStream"
XLA_OP_TYPE = "XLA computation"
# An op's event is `op name:op type`; the runtime's own events (`ExecutorState::Process`,
# `KernelAndDeviceFunc::Run`, ...) wrap ops, and XLA's (`end: fusion`) are inside `XLA_EVENT`.
OP_EVENT = re.compile(r"([^:]+):(\w+)")


def leaf_op_events(trace_dir):
  """The leaf TensorFlow op events of the host CPU plane of a trace.

  Args:
    trace_dir: the directory given to `tf.profiler.experimental.start`.

  Yields:
    `(op_name, op_type, seconds)` per event: each op outside `CONTAINERS` and `__inference_*`
    functions, and each run of an XLA computation as op type `XLA_OP_TYPE`.
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
        seconds = event.duration_ps / 1e12
        if name == XLA_EVENT:
          yield name, XLA_OP_TYPE, seconds
          continue
        match = OP_EVENT.fullmatch(name)
        if match is None:
          continue
        op_name, op_type = match.groups()
        if op_type in CONTAINERS or op_type.startswith("__inference"):
          continue
        yield op_name, op_type, seconds
