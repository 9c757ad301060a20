"""Pretraining throughput of the shared engine, and of its input pipeline alone, in one run.

For each model shape (tiny: L2 H128; MiniLM: L6 H384 A12) and each variant (float32, XLA
`jit_compile`, 2-step gradient accumulation at the same global batch), builds the
`run_pretraining.py` trainer, runs a warm-up loop (tracing and compilation) and times the next
loop of `--steps` optimizer steps. The input pipeline (TFRecord read, parse, batch, as training
uses it) is timed alone on the same records; it must be far faster than any model step, or it
would be the bottleneck.

Usage:
  python benchmarks/pretraining_step.py [--steps=20] [--shapes=tiny,minilm]
"""

import dataclasses
import os
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import tensorflow as tf  # pylint: disable=g-import-not-at-top

from data import schemas  # pylint: disable=g-import-not-at-top
from modeling import bert_config  # pylint: disable=g-import-not-at-top
from modeling import optimization  # pylint: disable=g-import-not-at-top
from tests import pretraining_records  # pylint: disable=g-import-not-at-top
from training import engine  # pylint: disable=g-import-not-at-top
from training import input_pipeline  # pylint: disable=g-import-not-at-top
from training import pretraining_task  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 20, "Timed optimizer steps per row.")
flags.DEFINE_list("shapes", ["tiny", "minilm"], "Model shapes to run.")
flags.DEFINE_integer("batch_size", 16, "Global batch size.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")

SHAPES = {
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512),
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                   intermediate_size=1536),
}
VARIANTS = {
    "float32": {},
    "jit_compile": {"jit_compile": True},
    "accumulate x2": {"gradient_accumulation_steps": 2},
}
VOCAB_SIZE = 30522
NUM_PREDICTIONS = 20


def time_training(shape, variant, data_path, output_dir):
  """Returns steps/s of one timed loop after a warm-up loop of the same length."""
  config = bert_config.BertConfig(vocab_size=VOCAB_SIZE, type_vocab_size=2, **SHAPES[shape])
  run_config = engine.RunConfig(
      output_dir=output_dir, num_train_steps=FLAGS.steps, train_batch_size=FLAGS.batch_size,
      steps_per_loop=FLAGS.steps, save_checkpoints_steps=10 ** 9, **VARIANTS[variant])
  trainer = engine.Trainer(
      tf.distribute.OneDeviceStrategy("/cpu:0"), pretraining_task.PretrainingTask(config),
      run_config, lambda: optimization.create_optimizer(1e-4, 10 ** 6, 0))
  spec = schemas.pretraining_feature_spec(FLAGS.seq_length, NUM_PREDICTIONS)
  input_fn = input_pipeline.make_input_fn([data_path], spec, FLAGS.batch_size, True)
  trainer.train(input_fn)
  trainer.config = dataclasses.replace(run_config, num_train_steps=2 * FLAGS.steps)
  start = time.perf_counter()
  trainer.train(input_fn)
  return FLAGS.steps / (time.perf_counter() - start)


def time_input_pipeline(data_path, num_batches=500):
  """Returns batches/s of the training input pipeline alone."""
  spec = schemas.pretraining_feature_spec(FLAGS.seq_length, NUM_PREDICTIONS)
  dataset = input_pipeline.make_dataset([data_path], spec, FLAGS.batch_size, True)
  iterator = iter(dataset)
  for _ in range(20):
    next(iterator)
  start = time.perf_counter()
  for _ in range(num_batches):
    next(iterator)
  return num_batches / (time.perf_counter() - start)


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as temp_dir:
    data_path = pretraining_records.write_records(
        os.path.join(temp_dir, "data.tfrecord"), num_records=512, seq_length=FLAGS.seq_length,
        num_predictions=NUM_PREDICTIONS, max_id=VOCAB_SIZE)
    rows = []
    for shape in FLAGS.shapes:
      for variant in VARIANTS:
        steps_per_second = time_training(shape, variant, data_path,
                                         os.path.join(temp_dir, f"{shape}-{len(rows)}"))
        rows.append((f"{shape} ({variant})", steps_per_second))
    input_batches_per_second = time_input_pipeline(data_path)

  print(f"\nbatch {FLAGS.batch_size}, seq {FLAGS.seq_length}, {NUM_PREDICTIONS} predictions, "
        f"vocab {VOCAB_SIZE}, 1 CPU device, {FLAGS.steps} timed steps per row")
  print(f"| {'what':<28} | {'steps/s':>9} | {'examples/s':>10} | {'input pipeline / model':>22} |")
  print(f"|{'-' * 30}|{'-' * 11}|{'-' * 12}|{'-' * 24}|")
  for name, steps_per_second in rows:
    print(f"| {name:<28} | {steps_per_second:>9.2f} | {steps_per_second * FLAGS.batch_size:>10.1f}"
          f" | {input_batches_per_second / steps_per_second:>21.0f}x |")
  print(f"| {'input pipeline alone':<28} | {input_batches_per_second:>9.1f} | "
        f"{input_batches_per_second * FLAGS.batch_size:>10.0f} | {'':>22} |")


if __name__ == "__main__":
  app.run(main)
