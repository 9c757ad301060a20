"""Pretraining step speed: this project's model beside keras-hub and HuggingFace, one run.

Times forward + backward steps (the pretraining loss and its gradients with respect to every
trainable variable; no optimizer update, as the training engine's compiled region) at two shapes,
float32, dropout on, random weights and one fixed random batch:

  base    L=12 H=768 A=12 I=3072   vocab 30522, seq 128, batch 8, 20 masked positions
  minilm  L=6  H=384 A=12 I=1536   same vocab, seq, batch and positions

Rows:
  project     `BertPretrainingModel` + `losses.pretraining_loss`, in `tf.function`, with and
              without `jit_compile`; its last layer computes the 21 positions the heads read
              alone (`last_layer_at_predictions`), as `run_pretraining.py` trains.
  keras-hub   `keras_hub.models.BertBackbone` + `keras_hub.layers.MaskedLMHead` tied to its token
              embedding + a 2-way `Dense` next-sentence head on the pooled output, same loss
              function, in `tf.function`, with and without `jit_compile`.
  HF          transformers' PyTorch `BertForPreTraining` (tanh GELU as the original, 2 threads),
              twice: its own `forward` (which scores the vocabulary at all `seq` positions), and its
              `bert` + `cls` modules with the vocabulary scored only at the masked positions, as the
              original and the two rows above do.

All rows of a shape are built first (one model per implementation); after the warm-up steps their
timed steps run in turn, one step of each row per round, so load from other processes on a shared
machine falls on every row alike. The median step time per row is reported.

Model FLOPs per step (multiply-add = 2 FLOPs; backward = 2 x forward, so training = 3 x forward):

  6 * batch * seq * layers * (4 * H^2 + 2 * H * I)      projections and feed-forward
  + 3 * 2 * 2 * batch * layers * seq^2 * H              attention scores and context
  + 6 * batch * scored * (H^2 + vocab * H)              masked-LM transform and tied output matmul
  + 6 * batch * (H^2 + 2 * H)                           pooler and next-sentence head

where `scored` is the number of positions whose vocabulary logits the row computes (20; `seq` for
HF's own forward). For the project's rows, whose last layer computes `r = 1 + 20` positions
(its keys and values every position), the last layer's other `seq - r` rows are taken off:

  - 6 * batch * (seq - r) * (2 * H^2 + 2 * H * I) - 3 * 2 * 2 * batch * (seq - r) * seq * H

Embedding lookups, LayerNorm, softmax, GELU and biases are not counted. MFU is achieved model
GFLOP/s over the machine's float32 matmul peak, measured in the same run (before and after the
models) as the best of TF's and PyTorch's square `matmul` (`--matmul_size`).

TensorFlow turns its oneDNN kernels on by default only on some CPUs; this benchmark, as the
project's scripts, turns them on on any x86-64 CPU unless `TF_ENABLE_ONEDNN_OPTS` is set
(`base/tensorflow_start.py`). The header says what the variable was; running once more with
`TF_ENABLE_ONEDNN_OPTS=0` compares the two (it applies to the keras-hub rows too).

Usage:
  python benchmarks/model_step.py [--shapes=base,minilm] [--steps=3] [--warmup_steps=1]
      [--implementations=project,keras_hub,huggingface]
"""

import dataclasses
import gc
import os
import statistics
import sys
import time
from typing import Callable

from absl import app
from absl import flags
from absl import logging
import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import base  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (TF as the scripts start it)
import keras  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from benchmarks import matmul_peak  # pylint: disable=g-import-not-at-top
from benchmarks import shapes  # pylint: disable=g-import-not-at-top
from modeling import bert_config as bert_config_lib  # pylint: disable=g-import-not-at-top
from modeling import losses  # pylint: disable=g-import-not-at-top
from modeling import pretraining_model  # pylint: disable=g-import-not-at-top

IMPLEMENTATIONS = ("project", "keras_hub", "huggingface")
# Untimed pause before each timed step (see `interleaved_median_seconds`).
PAUSE_SECONDS = 0.5

FLAGS = flags.FLAGS
flags.DEFINE_list("shapes", ["base", "minilm"], "Shapes to run: base, minilm.")
flags.DEFINE_list("implementations", list(IMPLEMENTATIONS),
                  f"Implementations to run: {', '.join(IMPLEMENTATIONS)}.")
flags.DEFINE_integer("steps", 3, "Timed steps per row, interleaved; the median is reported.")
flags.DEFINE_integer("warmup_steps", 1, "Untimed steps per row before timing (tracing, XLA).")
flags.DEFINE_integer("threads", 2, "Intra-op threads of TensorFlow and PyTorch.")
flags.DEFINE_integer("matmul_size", 4096, "Side of the square float32 matrices of the peak test.")
flags.DEFINE_integer("matmul_repeats", 3,
                     "Timed matmuls per library, before and after the models; the best is the peak.")


def model_flops_per_step(shape, scored_positions, last_layer_rows=None):
  """Training FLOPs of one step by the formula of the module docstring.

  Args:
    shape: a `shapes.Shape`.
    scored_positions: positions per example whose vocabulary logits are computed.
    last_layer_rows: None, or the positions per example the last layer computes alone.

  Returns:
    float FLOPs.
  """
  b, s, l = shape.batch_size, shape.seq_length, shape.num_layers
  h, i, v = shape.hidden_size, shape.intermediate_size, shape.vocab_size
  layers = 6 * b * s * l * (4 * h * h + 2 * h * i)
  attention = 3 * 2 * 2 * b * l * s * s * h
  if last_layer_rows is not None:
    layers -= 6 * b * (s - last_layer_rows) * (2 * h * h + 2 * h * i)
    attention -= 3 * 2 * 2 * b * (s - last_layer_rows) * s * h
  masked_lm = 6 * b * scored_positions * (h * h + v * h)
  pooler_and_next_sentence = 6 * b * (h * h + 2 * h)
  return float(layers + attention + masked_lm + pooler_and_next_sentence)


def make_batch(shape, seed=0):
  """A fixed random pretraining batch as numpy arrays.

  Returns:
    dict: `input_ids`, `input_mask`, `segment_ids` int32 `[batch_size, seq_length]`;
    `masked_lm_positions`, `masked_lm_ids` int32 and `masked_lm_weights` float32
    `[batch_size, num_predictions]`; `next_sentence_labels` int32 `[batch_size, 1]`.
  """
  rng = np.random.default_rng(seed)
  b, s, p = shape.batch_size, shape.seq_length, shape.num_predictions
  positions = np.stack([np.sort(rng.choice(np.arange(1, s), p, replace=False))
                        for _ in range(b)])
  return {
      "input_ids": rng.integers(1, shape.vocab_size, size=(b, s)).astype(np.int32),
      "input_mask": np.ones((b, s), np.int32),
      "segment_ids": (np.arange(s)[None] >= s // 2).repeat(b, axis=0).astype(np.int32),
      "masked_lm_positions": positions.astype(np.int32),
      "masked_lm_ids": rng.integers(1, shape.vocab_size, size=(b, p)).astype(np.int32),
      "masked_lm_weights": np.ones((b, p), np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=(b, 1)).astype(np.int32),
  }


@dataclasses.dataclass
class Row:
  """One implementation and compilation mode to time at one shape."""
  implementation: str
  jit: str
  scored_positions: int
  num_params: int
  step: Callable[[], float]
  last_layer_rows: int | None = None


def _tf_step(model_fn, variables, batch, jit_compile):
  """Wraps `model_fn(features) -> outputs` into a compiled loss-and-gradients step.

  Returns:
    A no-argument callable running one step and returning the float loss.
  """
  features = {name: tf.constant(value) for name, value in batch.items()}

  def forward_backward(features):
    with tf.GradientTape() as tape:
      total_loss, _, _ = losses.pretraining_loss(model_fn(features), features)
    return total_loss, tape.gradient(total_loss, variables)

  compiled = tf.function(forward_backward, jit_compile=jit_compile)

  def step():
    total_loss, _ = compiled(features)
    return float(total_loss)

  return step


def project_rows(shape, batch):
  """This project's `BertPretrainingModel`, one model timed without and with XLA."""
  config = bert_config_lib.BertConfig(
      vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
      num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_heads,
      intermediate_size=shape.intermediate_size, type_vocab_size=2)
  model = pretraining_model.BertPretrainingModel(config, last_layer_at_predictions=True)
  model({name: tf.constant(value) for name, value in batch.items()})
  return [Row("project BertPretrainingModel", "yes" if jit else "no", shape.num_predictions,
              model.count_params(),
              _tf_step(lambda features: model(features, training=True),
                       model.trainable_variables, batch, jit),
              last_layer_rows=1 + shape.num_predictions)
          for jit in (False, True)]


def keras_hub_rows(shape, batch):
  """keras-hub's `BertBackbone` + `MaskedLMHead` + a next-sentence `Dense`, without and with XLA."""
  import keras_hub  # pylint: disable=g-import-not-at-top
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=shape.vocab_size, num_layers=shape.num_layers, num_heads=shape.num_heads,
      hidden_dim=shape.hidden_size, intermediate_dim=shape.intermediate_size)
  initializer = keras.initializers.TruncatedNormal(stddev=0.02)
  masked_lm = keras_hub.layers.MaskedLMHead(
      token_embedding=backbone.token_embedding, intermediate_activation="gelu",
      kernel_initializer=initializer)
  next_sentence = keras.layers.Dense(2, kernel_initializer=initializer)

  def model_fn(features, training=True):
    outputs = backbone({"token_ids": features["input_ids"],
                        "segment_ids": features["segment_ids"],
                        "padding_mask": features["input_mask"]}, training=training)
    return {
        "masked_lm_logits": masked_lm(outputs["sequence_output"],
                                      features["masked_lm_positions"]),
        "next_sentence_logits": next_sentence(outputs["pooled_output"]),
    }

  model_fn({name: tf.constant(value) for name, value in batch.items()}, training=False)
  layers = (backbone, masked_lm, next_sentence)
  # The masked-LM head also tracks the tied token embedding; each variable is listed once.
  variables = list({id(v): v for layer in layers for v in layer.trainable_variables}.values())
  num_params = sum(int(np.prod(v.shape)) for v in variables)
  return [Row("keras-hub BertBackbone+MaskedLMHead", "yes" if jit else "no",
              shape.num_predictions, num_params, _tf_step(model_fn, variables, batch, jit))
          for jit in (False, True)]


def huggingface_rows(shape, batch):
  """transformers' PyTorch `BertForPreTraining` in training mode, one model timed two ways.

  "MLM at masked" scores the vocabulary at the masked positions only, through the model's `bert`
  and `cls` modules, with the original's weighted loss; "own forward" calls the model's `forward`,
  which scores every position, with labels -100 at the unmasked ones.
  """
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  config = transformers.BertConfig(
      vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
      num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_heads,
      intermediate_size=shape.intermediate_size, hidden_act="gelu_new", type_vocab_size=2)
  model = transformers.BertForPreTraining(config)
  model.train()
  tensors = {name: torch.from_numpy(value).long() for name, value in batch.items()
             if value.dtype == np.int32}
  weights = torch.from_numpy(batch["masked_lm_weights"])
  next_sentence_labels = tensors["next_sentence_labels"].view(-1)
  labels = torch.full_like(tensors["input_ids"], -100)
  labels.scatter_(1, tensors["masked_lm_positions"], tensors["masked_lm_ids"])

  def loss_masked_positions_only():
    sequence_output, pooled_output = model.bert(
        input_ids=tensors["input_ids"], attention_mask=tensors["input_mask"],
        token_type_ids=tensors["segment_ids"], return_dict=False)[:2]
    index = tensors["masked_lm_positions"].unsqueeze(-1).expand(-1, -1, shape.hidden_size)
    logits = model.cls.predictions(torch.gather(sequence_output, 1, index))
    per_position = torch.nn.functional.cross_entropy(
        logits.reshape(-1, shape.vocab_size), tensors["masked_lm_ids"].reshape(-1),
        reduction="none")
    masked_lm_loss = (weights.reshape(-1) * per_position).sum() / (
        weights.sum() + losses.MASKED_LM_DENOMINATOR_EPSILON)
    next_sentence_loss = torch.nn.functional.cross_entropy(
        model.cls.seq_relationship(pooled_output), next_sentence_labels)
    return masked_lm_loss + next_sentence_loss

  def loss_own_forward():
    return model(input_ids=tensors["input_ids"], attention_mask=tensors["input_mask"],
                 token_type_ids=tensors["segment_ids"], labels=labels,
                 next_sentence_label=next_sentence_labels).loss

  def make_step(loss_fn):
    def step():
      model.zero_grad(set_to_none=True)
      total_loss = loss_fn()
      total_loss.backward()
      return total_loss.item()
    return step

  num_params = sum(p.numel() for p in model.parameters())
  return [Row("HF BertForPreTraining, MLM at masked", "-", shape.num_predictions, num_params,
              make_step(loss_masked_positions_only)),
          Row("HF BertForPreTraining, own forward", "-", shape.seq_length, num_params,
              make_step(loss_own_forward))]


ROW_FACTORIES = {"project": project_rows, "keras_hub": keras_hub_rows,
                 "huggingface": huggingface_rows}


def interleaved_median_seconds(rows, warmup_steps, steps):
  """Median seconds per step of each row, the rows' timed steps taken in turn.

  Taking one step of every row per round (the order rotating) exposes all rows alike to any load
  other processes put on the machine meanwhile.

  Returns:
    list of float seconds, one per row.
  """
  for row in rows:
    for _ in range(warmup_steps):
      row.step()
  seconds = [[] for _ in rows]
  for round_index in range(steps):
    for offset in range(len(rows)):
      index = (round_index + offset) % len(rows)
      # Lets the previous row's runtime (OpenMP, Eigen, XLA thread pools) stop spinning first.
      time.sleep(PAUSE_SECONDS)
      start = time.perf_counter()
      loss = rows[index].step()
      seconds[index].append(time.perf_counter() - start)
      if not np.isfinite(loss):
        raise RuntimeError(f"{rows[index].implementation}: non-finite loss {loss}")
  return [statistics.median(row_seconds) for row_seconds in seconds]


def matmul_peaks(size, repeats):
  """Best float32 GFLOP/s of an eager `[size, size] x [size, size]` matmul, per library.

  Returns:
    dict library name -> GFLOP/s.
  """
  square = matmul_peak.MatmulShape(f"{size}^2", size, size, size)
  return {name: matmul_peak.in_process_peak("float32", library, (square,), repeats=repeats)[0]
          for library, name in matmul_peak.IN_PROCESS_LIBRARIES.items()}


def main(argv):
  del argv
  for name in FLAGS.shapes:
    if name not in shapes.SHAPES:
      raise app.UsageError(f"--shapes: unknown shape {name!r}; expected "
                           f"{', '.join(shapes.SHAPES)}")
  for name in FLAGS.implementations:
    if name not in IMPLEMENTATIONS:
      raise app.UsageError(f"--implementations: unknown {name!r}; expected "
                           f"{', '.join(IMPLEMENTATIONS)}")
  if FLAGS.steps < 1 or FLAGS.warmup_steps < 0:
    raise app.UsageError("--steps must be >= 1 and --warmup_steps >= 0")
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(FLAGS.threads)
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  keras.mixed_precision.set_global_policy("float32")

  # The machine is shared: the peak is taken before and after the models, and the best counts.
  peaks = matmul_peaks(FLAGS.matmul_size, FLAGS.matmul_repeats)
  results = []
  for shape_name in FLAGS.shapes:
    shape = shapes.SHAPES[shape_name]
    batch = make_batch(shape)
    rows = [row for name in FLAGS.implementations for row in ROW_FACTORIES[name](shape, batch)]
    seconds = interleaved_median_seconds(rows, FLAGS.warmup_steps, FLAGS.steps)
    for row, row_seconds in zip(rows, seconds):
      logging.info("%s %s jit=%s: %.3f s/step", row.implementation, shape.name, row.jit,
                   row_seconds)
      results.append((row.implementation, shape, row.jit, row.num_params, row_seconds,
                      model_flops_per_step(shape, row.scored_positions, row.last_layer_rows) / 1e9))
    del rows
    keras.backend.clear_session()
    gc.collect()
  for name, gflops in matmul_peaks(FLAGS.matmul_size, FLAGS.matmul_repeats).items():
    peaks[name] = max(peaks[name], gflops)
  peak = max(peaks.values())

  print(f"{os.cpu_count()} cores, {FLAGS.threads} threads, float32; median of {FLAGS.steps} "
        f"steps after {FLAGS.warmup_steps} warm-up; forward + backward, dropout on; "
        f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}")
  print(f"{'implementation':38s} {'shape':6s} {'jit':3s} {'params':>11s} {'steps/s':>8s} "
        f"{'ex/s':>7s} {'GFLOP/step':>10s} {'GFLOP/s':>8s} {'MFU%':>6s}")
  for name, shape, jit, num_params, seconds, gflop in results:
    print(f"{name:38s} {shape.name:6s} {jit:3s} {num_params:11,d} {1 / seconds:8.3f} "
          f"{shape.batch_size / seconds:7.2f} {gflop:10.1f} {gflop / seconds:8.1f} "
          f"{100 * gflop / seconds / peak:6.1f}")
  for name, gflops in peaks.items():
    print(f"float32 matmul peak, {name} {FLAGS.matmul_size}^2: {gflops:.1f} GFLOP/s")
  print(f"MFU is against the better of the two: {peak:.1f} GFLOP/s")


if __name__ == "__main__":
  app.run(main)
