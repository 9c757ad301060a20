"""Where a bfloat16 classifier's error comes from: one product or one part at a time.

Reads a fine-tuned classifier checkpoint (a `run_classifier.py --output_dir`: the original's
variable names, its `bert_config.json`) and one GLUE task's held-out examples, and runs an
independent forward pass written here in plain TensorFlow ops (no project layer), first in float32
everywhere, then with bfloat16 placed in one site at a time:

  weights only          the weight matrices rounded to bfloat16, everything else float32
  inputs only           every product's activation operands rounded (the attention products'
                        both), weights and everything else float32
  all products          both inputs of every product bfloat16, the rest float32
  as the export         all products and what runs between them (embeddings, bias adds, GELU,
                        softmax) bfloat16; the residual stream (the layer norms and their outputs,
                        the residual adds) float32, as `--export_precision=bfloat16`; the
                        classifier layer (a product of width 2 or 3) float32 here
  as the export, residual bf16
                        the same with the layer norms' outputs and the residual adds in bfloat16
  all products but X    one site X kept float32: qkv (queries, keys, values), attention (scores
                        and context products), attention output, feed-forward in / out, pooler,
                        the first layer, the last layer

Printed per variant: mean, 99th-percentile and largest |probability difference| from the float32
pass, the examples whose argmax differs, and the accuracy. The float32 pass's accuracy is printed
beside the run's `eval_results.txt`, which it should equal.

Usage (e.g. on a fold `benchmarks/bfloat16_accuracy.py` fine-tuned):
  python benchmarks/bfloat16_error_sources.py --run_dir=/tmp/bfloat16_accuracy/sst-2-fold0_output \
      --task_name=sst-2 --data_dir=/tmp/bfloat16_accuracy/SST-2-fold0 \
      --vocab_file=../shared/data/vocab/uncased_vocab.txt
"""

import math
import os
import pathlib
import sys

from absl import app
from absl import flags
import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import base  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (TF as the scripts start it)
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from data import graph_packing  # pylint: disable=g-import-not-at-top
from data import graph_tokenization  # pylint: disable=g-import-not-at-top
from data import tokenization  # pylint: disable=g-import-not-at-top
from modeling import activations  # pylint: disable=g-import-not-at-top
from modeling import bert_config as bert_config_lib  # pylint: disable=g-import-not-at-top
from tasks.classification import reader  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_string("run_dir", None, "run_classifier.py output directory: bert_config.json and "
                    "the latest checkpoint.")
flags.DEFINE_string("task_name", None, "GLUE task of the run, e.g. sst-2 or mrpc.")
flags.DEFINE_string("data_dir", None, "The task's data directory; its dev split is scored.")
flags.DEFINE_string("vocab_file", None, "The run's vocab.txt.")
flags.DEFINE_bool("do_lower_case", True, "As the run's.")
flags.DEFINE_integer("max_seq_length", 128, "As the run's.")
flags.DEFINE_integer("batch_size", 32, "Examples per forward pass.")
flags.mark_flags_as_required(["run_dir", "task_name", "data_dir", "vocab_file"])

F32, BF16 = tf.float32, tf.bfloat16


def _rounded(x):
  """float32 `x` rounded to bfloat16's values, kept in float32."""
  return tf.cast(tf.cast(x, BF16), F32)


SITES = ("qkv", "attention", "attention_output", "ffn_in", "ffn_out", "pooler")


class Forward:
  """The classifier's forward pass with a chosen precision per product.

  `policy(layer, site)` names how the product at `site` of `layer` (0-based; the pooler is
  layer `num_hidden_layers`) runs: "f32"; "bf16" (both operands bfloat16); "weights" or
  "inputs" (only the weight operand, or only the activation operands, rounded to bfloat16,
  computed in float32). `rest` is the dtype of everything that is not a product, but the
  residual stream and the classifier layer; `residual` that of the residual stream (the layer
  norms' outputs and the residual adds; the layer norms' arithmetic is float32).
  """

  def __init__(self, checkpoint, config):
    checkpoint_reader = tf.train.load_checkpoint(checkpoint)
    self.weights = {name: tf.constant(checkpoint_reader.get_tensor(name))
                    for name, _ in tf.train.list_variables(checkpoint)
                    if name.startswith(("bert/", "output_")) and "adam" not in name}
    self.config = config
    self.activation = activations.get_activation(config.hidden_act)

  def _product(self, a, b, mode, b_is_weight=True, **kwargs):
    """`a @ b` in `mode`; `a` is an activation, `b` a weight matrix unless `b_is_weight` is
    False (the attention products' keys and values)."""
    if mode == "bf16":
      return tf.matmul(tf.cast(a, BF16), tf.cast(b, BF16), **kwargs)
    a, b = tf.cast(a, F32), tf.cast(b, F32)
    if mode == "inputs":
      a = _rounded(a)
      if not b_is_weight:
        b = _rounded(b)
    elif mode == "weights" and b_is_weight:
      b = _rounded(b)
    return tf.matmul(a, b, **kwargs)

  def _dense(self, x, name, mode, rest):
    """`[rows, in] -> [rows, out]` in `rest`."""
    y = tf.cast(self._product(x, self.weights[name + "/kernel"], mode), rest)
    return y + tf.cast(self.weights[name + "/bias"], rest)

  def _layer_norm(self, x, name, residual):
    x = tf.cast(x, F32)
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    normalized = (x - mean) * tf.math.rsqrt(variance + 1e-12)
    return tf.cast(normalized * self.weights[name + "/gamma"] + self.weights[name + "/beta"],
                   residual)

  def __call__(self, inputs, policy, rest, residual):
    """int32 `input_ids`, `input_mask`, `segment_ids` `[batch_size, seq_length]` -> float32
    probabilities `[batch_size, num_labels]`."""
    w, config = self.weights, self.config
    input_ids, input_mask, segment_ids = (inputs[k] for k in ("input_ids", "input_mask",
                                                              "segment_ids"))
    batch_size, seq_length = input_ids.shape
    heads, width = config.num_attention_heads, config.hidden_size
    head_size = width // heads
    embeddings = (tf.gather(tf.cast(w["bert/embeddings/word_embeddings"], rest), input_ids)
                  + tf.cast(w["bert/embeddings/position_embeddings"][:seq_length], rest)
                  + tf.gather(tf.cast(w["bert/embeddings/token_type_embeddings"], rest),
                              segment_ids))
    hidden = tf.reshape(self._layer_norm(embeddings, "bert/embeddings/LayerNorm", residual),
                        [batch_size * seq_length, width])
    mask_adder = tf.cast((1.0 - tf.cast(input_mask, F32))[:, None, None, :] * -10000.0, rest)

    def split_heads(x):
      return tf.transpose(tf.reshape(x, [batch_size, seq_length, heads, head_size]), [0, 2, 1, 3])

    for i in range(config.num_hidden_layers):
      prefix = f"bert/encoder/layer_{i}/"
      query, key, value = (split_heads(self._dense(hidden, prefix + "attention/self/" + n,
                                                   policy(i, "qkv"), rest))
                           for n in ("query", "key", "value"))
      scores = tf.cast(self._product(query, key, policy(i, "attention"), b_is_weight=False,
                                     transpose_b=True), rest)
      probabilities = tf.nn.softmax(scores * tf.cast(1 / math.sqrt(head_size), rest) + mask_adder)
      context = tf.cast(self._product(probabilities, value, policy(i, "attention"),
                                      b_is_weight=False), rest)
      context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [batch_size * seq_length, width])
      attention_output = self._layer_norm(
          tf.cast(self._dense(context, prefix + "attention/output/dense",
                              policy(i, "attention_output"), rest), residual) + hidden,
          prefix + "attention/output/LayerNorm", residual)
      intermediate = self.activation(self._dense(attention_output, prefix + "intermediate/dense",
                                                 policy(i, "ffn_in"), rest))
      hidden = self._layer_norm(
          tf.cast(self._dense(intermediate, prefix + "output/dense", policy(i, "ffn_out"), rest),
                  residual) + attention_output, prefix + "output/LayerNorm", residual)
    first_token = tf.reshape(hidden, [batch_size, seq_length, width])[:, 0]
    pooled = tf.tanh(tf.cast(self._dense(first_token, "bert/pooler/dense",
                                         policy(config.num_hidden_layers, "pooler"), rest), F32))
    logits = tf.matmul(pooled, w["output_weights"], transpose_b=True) + w["output_bias"]
    return tf.nn.softmax(logits).numpy()


def variants(num_layers):
  """(name, policy, rest, residual) of every variant after the float32 reference."""
  result = [("weights only", lambda i, s: "weights", F32, F32),
            ("inputs only", lambda i, s: "inputs", F32, F32),
            ("all products", lambda i, s: "bf16", F32, F32),
            ("as the export", lambda i, s: "bf16", BF16, F32),
            ("as the export, residual bf16", lambda i, s: "bf16", BF16, BF16)]
  for site in SITES:
    result.append((f"all products but {site}",
                   lambda i, s, site=site: "f32" if s == site else "bf16", F32, F32))
  result.append(("all products but layer 0", lambda i, s: "f32" if i == 0 else "bf16", F32, F32))
  result.append((f"all products but layer {num_layers - 1}",
                 lambda i, s: "f32" if i == num_layers - 1 else "bf16", F32, F32))
  return result


def main(argv):
  del argv
  run_dir = pathlib.Path(FLAGS.run_dir)
  config = bert_config_lib.BertConfig.from_json_file(str(run_dir / "bert_config.json"))
  checkpoint = tf.train.latest_checkpoint(str(run_dir))
  if checkpoint is None:
    raise app.UsageError(f"--run_dir: no checkpoint in {run_dir}")
  processor = reader.glue_processors()[FLAGS.task_name]
  label_list = processor.get_labels()
  examples = processor.get_dev_examples(FLAGS.data_dir)
  labels = np.array([label_list.index(example.label) for example in examples])
  tokenizer = graph_tokenization.GraphTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
  vocab = tokenization.load_vocab(FLAGS.vocab_file)
  batches = []
  for begin in range(0, len(examples), FLAGS.batch_size):
    batch = examples[begin:begin + FLAGS.batch_size]
    pieces_b = (tokenizer.tokenize(tf.constant([e.text_b for e in batch]))
                if processor.has_pairs else None)
    batches.append(graph_packing.pack(tokenizer.tokenize(tf.constant([e.text_a for e in batch])),
                                      pieces_b, FLAGS.max_seq_length, vocab["[CLS]"],
                                      vocab["[SEP]"]))
  forward = Forward(checkpoint, config)

  def probabilities(policy, rest, residual):
    return np.concatenate([forward(inputs, policy, rest, residual) for inputs in batches])

  reference = probabilities(lambda i, s: "f32", F32, F32)
  eval_results_path = run_dir / "eval_results.txt"
  eval_results = (dict(line.split(" = ") for line in eval_results_path.read_text().splitlines())
                  if eval_results_path.exists() else {})
  print(f"{checkpoint}: {len(examples)} examples of {FLAGS.data_dir}; float32 accuracy "
        f"{np.mean(reference.argmax(-1) == labels):.4f}"
        + (f" (eval_results.txt: {float(eval_results['eval_accuracy']):.4f})"
           if "eval_accuracy" in eval_results else ""))
  print(f"{'variant':34} {'mean|dp|':>9} {'p99|dp|':>9} {'max|dp|':>9} {'flips':>5} "
        f"{'accuracy':>8}")
  for name, policy, rest, residual in variants(config.num_hidden_layers):
    output = probabilities(policy, rest, residual)
    difference = np.abs(output - reference)
    flips = int(np.sum(output.argmax(-1) != reference.argmax(-1)))
    print(f"{name:34} {difference.mean():9.2e} {np.quantile(difference, 0.99):9.2e} "
          f"{difference.max():9.2e} {flips:5d} {np.mean(output.argmax(-1) == labels):8.4f}",
          flush=True)


if __name__ == "__main__":
  app.run(main)
