"""Matrix-multiply peak of this machine: TensorFlow, PyTorch and NumPy at BERT's shapes, one run.

Times `C = A x B` at the shapes of BERT's dense layers and attention, for every kernel within
reach, and prints GFLOP/s (2 * m * k * n per product) as the best and the median of `--repeats`
timed calls after `--warmup` untimed ones. The machine's peak per dtype is the best figure of all
rows at any shape: a measured best over the available kernels, against which every cell is given
as a fraction, so an efficiency figure is against the machine, not against one library.

Shapes (B*S = 1024 is batch 8 at seq 128; 4096 is batch 32):
  1024x768 . 768x3072     BERT-Base feed-forward in (also 4096 rows)
  1024x768 . 768x768      BERT-Base attention projections and output (also 4096 rows)
  1024x384 . 384x1536     MiniLM feed-forward in (also 4096 rows)
  1024x768 . (3072x768)^T the first shape with B given transposed (`transpose_b=True`)
  96x[128x64 . (128x64)^T] the attention scores of batch 8, 12 heads: a batched matmul

Rows (each group in a fresh process of its own, one after another, so environment variables read
at start-up and thread pools can differ, and no group's threads spin while another is timed):
  TF            `tf.linalg.matmul` eager, inside `tf.function`, and inside
                `tf.function(jit_compile=True)` (XLA), float32 and bfloat16 (inputs cast before
                timing), with `TF_ENABLE_ONEDNN_OPTS` unset (TensorFlow's default for this CPU),
                0 and 1, and with explicit intra-/inter-op thread counts.
  PyTorch       `torch.matmul`, float32 and bfloat16, `torch.set_num_threads(cores)`.
  NumPy         `np.matmul`, float32 (its bundled BLAS).

The header gives the CPU model, its matmul-relevant flags and the core count, and per group the
library's version, BLAS, thread settings and (TF) whether its oneDNN ops are on.

Usage:
  python benchmarks/matmul_peak.py [--repeats=7] [--warmup=1]
"""

import dataclasses
import json
import os
import re
import statistics
import subprocess
import sys
import time

from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 7, "Timed calls per kernel and shape; best and median reported.")
flags.DEFINE_integer("warmup", 1, "Untimed calls per kernel and shape first (tracing, XLA).")
flags.DEFINE_enum("worker", None, ["tf", "torch", "numpy"],
                  "Internal: time one library's kernels in this process and print JSON lines.")
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "Worker: dtypes to time.")
flags.DEFINE_list("modes", ["eager", "function", "xla"], "TF worker: eager, function, xla.")
flags.DEFINE_integer("intra_op_threads", 0, "TF worker: intra-op threads (0: TF's default).")
flags.DEFINE_integer("inter_op_threads", 0, "TF worker: inter-op threads (0: TF's default).")

KERNEL_NAMES = {"eager": "eager", "function": "tf.function", "xla": "XLA"}
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")


@dataclasses.dataclass(frozen=True)
class MatmulShape:
  """`[batch] x [m, k] . [k, n]`, B stored as `[n, k]` when `transpose_b`."""
  name: str
  m: int
  k: int
  n: int
  batch: int = 0
  transpose_b: bool = False

  @property
  def flops(self):
    return 2.0 * max(self.batch, 1) * self.m * self.k * self.n

  def operand_shapes(self):
    b = [self.n, self.k] if self.transpose_b else [self.k, self.n]
    prefix = [self.batch] if self.batch else []
    return prefix + [self.m, self.k], prefix + b


SHAPES = (
    MatmulShape("1024x768.768x3072", 1024, 768, 3072),
    MatmulShape("4096x768.768x3072", 4096, 768, 3072),
    MatmulShape("1024x768.768x768", 1024, 768, 768),
    MatmulShape("4096x768.768x768", 4096, 768, 768),
    MatmulShape("1024x384.384x1536", 1024, 384, 1536),
    MatmulShape("4096x384.384x1536", 4096, 384, 1536),
    MatmulShape("1024x768.(3072x768)T", 1024, 768, 3072, transpose_b=True),
    MatmulShape("96x[128x64.(128x64)T]", 128, 64, 128, batch=96, transpose_b=True),
)


@dataclasses.dataclass(frozen=True)
class Group:
  """One worker process: its label, worker flags and environment variables."""
  label: str
  args: tuple
  env: tuple = ()


_ALL_TF = ("--dtypes=float32,bfloat16", "--modes=eager,function,xla")
GROUPS = (
    Group("TF, ONEDNN_OPTS unset", ("--worker=tf",) + _ALL_TF),
    Group("TF, ONEDNN_OPTS=1", ("--worker=tf",) + _ALL_TF, (("TF_ENABLE_ONEDNN_OPTS", "1"),)),
    Group("TF, ONEDNN_OPTS=0", ("--worker=tf", "--dtypes=float32,bfloat16", "--modes=eager"),
          (("TF_ENABLE_ONEDNN_OPTS", "0"),)),
    Group("TF, ONEDNN_OPTS=0, intra 2 inter 1",
          ("--worker=tf", "--dtypes=float32", "--modes=eager", "--intra_op_threads=2",
           "--inter_op_threads=1"), (("TF_ENABLE_ONEDNN_OPTS", "0"),)),
    Group("TF, ONEDNN_OPTS=1, intra 2 inter 1",
          ("--worker=tf", "--dtypes=float32,bfloat16", "--modes=eager", "--intra_op_threads=2",
           "--inter_op_threads=1"), (("TF_ENABLE_ONEDNN_OPTS", "1"),)),
    Group("TF, ONEDNN_OPTS=1, intra 1 inter 1",
          ("--worker=tf", "--dtypes=float32", "--modes=eager", "--intra_op_threads=1",
           "--inter_op_threads=1"), (("TF_ENABLE_ONEDNN_OPTS", "1"),)),
    Group("PyTorch", ("--worker=torch", "--dtypes=float32,bfloat16")),
    Group("NumPy", ("--worker=numpy", "--dtypes=float32")),
)


def gflops(call, flops, warmup, repeats):
  """Best and median GFLOP/s of `repeats` timed calls of `call` after `warmup` untimed ones."""
  for _ in range(warmup):
    call()
  seconds = []
  for _ in range(repeats):
    start = time.perf_counter()
    call()
    seconds.append(time.perf_counter() - start)
  return flops / min(seconds) / 1e9, flops / statistics.median(seconds) / 1e9


# in_process_peak's `library` -> the kernel's name in the tables.
IN_PROCESS_LIBRARIES = {"tf": "TF tf.linalg.matmul", "torch": "PyTorch torch.matmul"}


def in_process_peak(dtype, library, shapes=SHAPES, warmup=1, repeats=3):
  """Best `dtype` GFLOP/s of one library's eager matmul (`library` "tf": `tf.linalg.matmul`,
  "torch": `torch.matmul`) over `shapes`, timed in the calling process with its thread settings,
  for a benchmark that times models beside it (this script's table times each library in a fresh
  process of its own).

  Returns:
    (best GFLOP/s, name of the shape it was reached at).
  """
  if library == "tf":
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    make = lambda shape: tf.cast(tf.random.normal(shape), dtype)
    matmul = lambda a, b, s: tf.linalg.matmul(a, b, transpose_b=s.transpose_b)
  else:
    import torch  # pylint: disable=g-import-not-at-top
    make = lambda shape: torch.randn(shape).to(getattr(torch, dtype))
    matmul = lambda a, b, s: torch.matmul(a, b.transpose(-1, -2) if s.transpose_b else b)
  best = (0.0, "")
  for shape in shapes:
    a, b = (make(operand) for operand in shape.operand_shapes())
    # Eager CPU kernels of both libraries return once the product is computed.
    best = max(best, (gflops(lambda: matmul(a, b, shape), shape.flops, warmup, repeats)[0],
                      shape.name))
  return best


def emit(**record):
  print(json.dumps(record), flush=True)


def time_kernels(kernel, make_operands, make_call, dtypes):
  """Times `make_call(a, b, shape)` for every dtype and shape and prints a JSON line for each."""
  for dtype in dtypes:
    for shape in SHAPES:
      a, b = make_operands(shape, dtype)
      best, median = gflops(make_call(a, b, shape), shape.flops, FLAGS.warmup, FLAGS.repeats)
      emit(kernel=kernel, dtype=dtype, shape=shape.name, best=best, median=median)


def tf_worker():
  """TensorFlow's kernels in this process (thread counts set before the runtime starts)."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op_threads)
  tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads)
  emit(note=f"TF {tf.__version__}, TF_ENABLE_ONEDNN_OPTS="
            f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}: oneDNN ops "
            f"{'on' if _pywrap_util_port.IsMklEnabled() else 'off'}; intra/inter-op threads "
            f"{FLAGS.intra_op_threads}/{FLAGS.inter_op_threads} (0: TF picks, the core count)")

  def make_operands(shape, dtype):
    a_shape, b_shape = shape.operand_shapes()
    return (tf.cast(tf.random.normal(a_shape), dtype), tf.cast(tf.random.normal(b_shape), dtype))

  for mode in FLAGS.modes:
    matmul = tf.linalg.matmul
    if mode != "eager":
      matmul = tf.function(tf.linalg.matmul, jit_compile=mode == "xla")

    def make_call(a, b, shape, matmul=matmul):
      return lambda: matmul(a, b, transpose_b=shape.transpose_b)

    time_kernels(KERNEL_NAMES[mode], make_operands, make_call, FLAGS.dtypes)


def torch_worker():
  """PyTorch's `torch.matmul` on every core."""
  import torch  # pylint: disable=g-import-not-at-top
  default_threads = torch.get_num_threads()
  torch.set_num_threads(os.cpu_count())
  blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
  emit(note=f"PyTorch {torch.__version__}: default threads {default_threads}, set to "
            f"{torch.get_num_threads()}; BLAS {blas.group(1) if blas else '?'}")

  def make_operands(shape, dtype):
    a_shape, b_shape = shape.operand_shapes()
    dtype = getattr(torch, dtype)
    return torch.randn(a_shape).to(dtype), torch.randn(b_shape).to(dtype)

  def make_call(a, b, shape):
    b = b.transpose(-1, -2) if shape.transpose_b else b
    return lambda: torch.matmul(a, b)

  time_kernels("torch.matmul", make_operands, make_call, FLAGS.dtypes)


def numpy_worker():
  """NumPy's `np.matmul` (its bundled BLAS, default threads)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
  emit(note=f"NumPy {np.__version__}: BLAS {blas['name']} {blas.get('version', '')}")
  rng = np.random.default_rng(0)

  def make_operands(shape, dtype):
    a_shape, b_shape = shape.operand_shapes()
    return (rng.standard_normal(a_shape, np.float32).astype(dtype),
            rng.standard_normal(b_shape, np.float32).astype(dtype))

  def make_call(a, b, shape):
    b = np.swapaxes(b, -1, -2) if shape.transpose_b else b
    return lambda: np.matmul(a, b)

  time_kernels("np.matmul", make_operands, make_call, FLAGS.dtypes)


WORKERS = {"tf": tf_worker, "torch": torch_worker, "numpy": numpy_worker}


def cpu_description():
  """The CPU model, clock and the matmul-relevant flags from /proc/cpuinfo, as one line."""
  fields = {}
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    for line in f:
      key, _, value = line.partition(":")
      fields.setdefault(key.strip(), value.strip())
  present = set(fields.get("flags", "").split())
  flag_text = " ".join(f"{name}={'yes' if name in present else 'no'}" for name in CPU_FLAGS)
  return (f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')} model "
          f"{fields.get('model', '?')}), {fields.get('cpu MHz', '?')} MHz, "
          f"{os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable); {flag_text}")


def run_group(group):
  """Runs one group's worker process and returns its JSON records."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **dict(group.env))
  command = [sys.executable, os.path.abspath(__file__), f"--repeats={FLAGS.repeats}",
             f"--warmup={FLAGS.warmup}", *group.args]
  # The worker's stderr (TensorFlow's start-up lines) is shown only if it fails.
  result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
  if result.returncode:
    sys.stderr.write(result.stderr)
    raise RuntimeError(f"{group.label}: worker exited with status {result.returncode}")
  return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def print_table(dtype, rows):
  """One dtype's table: a row per kernel, a column per shape, `best/median pct-of-peak`."""
  peak = max((r["best"], r["label"], r["shape"]) for r in rows)
  print(f"\n{dtype}: machine peak {peak[0]:.1f} GFLOP/s ({peak[1]}, {peak[2]}); "
        f"cells: best/median GFLOP/s and best as % of that peak")
  labels = list(dict.fromkeys(r["label"] for r in rows))
  cells = {(r["label"], r["shape"]): r for r in rows}
  width = max(len(label) for label in labels)
  print(f"{'kernel':{width}s} | " + " | ".join(f"{s.name:>21s}" for s in SHAPES))
  for label in labels:
    texts = []
    for shape in SHAPES:
      r = cells.get((label, shape.name))
      texts.append(f"{r['best']:6.1f}/{r['median']:6.1f} {100 * r['best'] / peak[0]:3.0f}%"
                   if r else "")
    print(f"{label:{width}s} | " + " | ".join(f"{t:>21s}" for t in texts))


def main(argv):
  del argv
  if FLAGS.worker:
    WORKERS[FLAGS.worker]()
    return
  if FLAGS.repeats < 1 or FLAGS.warmup < 0:
    raise app.UsageError("--repeats must be >= 1 and --warmup >= 0")
  print(cpu_description())
  print(f"best and median of {FLAGS.repeats} calls after {FLAGS.warmup} warm-up, GFLOP/s = "
        f"2*m*k*n / s; one process per group, one after another")
  start = time.perf_counter()
  rows = []
  for group in GROUPS:
    for record in run_group(group):
      if "note" in record:
        print(f"  {group.label}: {record['note']}")
      else:
        rows.append(dict(record, label=f"{group.label}: {record['kernel']}"))
  for dtype in FLAGS.dtypes:
    print_table(dtype, [r for r in rows if r["dtype"] == dtype])
  print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
  app.run(main)
