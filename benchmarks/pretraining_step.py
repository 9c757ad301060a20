"""Pretraining throughput of the shared engine, and of its input pipeline alone, in one run.

For each model shape (tiny: L2 H128; MiniLM: L6 H384 A12) and each variant (float32, XLA
`jit_compile`, 2-step gradient accumulation at the same global batch), builds the
`run_pretraining.py` trainer, runs a warm-up loop (tracing and compilation) and times the next
loop of `--steps` optimizer steps. The input pipeline (TFRecord read, parse, batch, as training
uses it) is timed alone on the same records; it must be far faster than any model step, or it
would be the bottleneck.

With `--packing_corpus` (WikiText-2 valid), it also measures sequence packing
(`create_pretraining_data.py --pack_sequences`): for that corpus with a document per article and
with a document per paragraph (`data/wikitext.py`; short documents, as news or web text), and for
each `--packing_corpora` text file, at max_seq_length 128 and 512 and each
`--packing_max_sequences`, the padding fraction of the records unpacked and packed and the rows
per instance. Then, for the two WikiText-2 corpora, it times `--packing_shape` training on the
same instances unpacked and packed, the runs' loops interleaved, and reports real (non-padding)
tokens per second and their ratio, beside two bounds: "ideal", the real tokens per row packed
over unpacked (what the ratio is if a packed row costs what an unpacked one does), and "limit",
`1 / (1 - padding fraction)` of the unpacked records (no padding left at all).

Usage:
  python benchmarks/pretraining_step.py [--steps=20] [--shapes=tiny,minilm]
  python benchmarks/pretraining_step.py --shapes= --packing_corpus=wikitext-2-valid.tokens.txt \
      --packing_corpora=sample_text.txt,samples/sample_corpus.txt --vocab_file=uncased_vocab.txt
"""

import dataclasses
import os
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # pylint: disable=g-import-not-at-top
import base  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (TF as the scripts start it)
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from data import wikitext  # pylint: disable=g-import-not-at-top
from modeling import bert_config  # pylint: disable=g-import-not-at-top
from modeling import optimization  # pylint: disable=g-import-not-at-top
from tasks.pretraining import features  # pylint: disable=g-import-not-at-top
from tasks.pretraining import task  # pylint: disable=g-import-not-at-top
from tasks.pretraining import writer  # pylint: disable=g-import-not-at-top
from tests import pretraining_records  # pylint: disable=g-import-not-at-top
from training import engine  # pylint: disable=g-import-not-at-top
from training import input_pipeline  # pylint: disable=g-import-not-at-top

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 20, "Timed optimizer steps per row.")
flags.DEFINE_list("shapes", ["tiny", "minilm"], "Model shapes to run.")
flags.DEFINE_integer("batch_size", 16, "Global batch size.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_string("packing_corpus", None, "WikiText tokens file (converted with "
                    "data/wikitext.py) for the packing rows; none: no packing rows.")
flags.DEFINE_list("packing_corpora", [], "Further text files in the original input format "
                  "whose padding is measured.")
flags.DEFINE_string("vocab_file", None, "Vocab of the packing rows' records.")
flags.DEFINE_string("packing_shape", "minilm", "Model shape timed packed and unpacked.")
flags.DEFINE_integer("packing_batch_size", 8, "Rows per step of the packing rows.")
flags.DEFINE_integer("packing_steps", 5, "Steps per timed loop of the packing rows.")
flags.DEFINE_integer("packing_rounds", 3, "Timed loops per packing row, interleaved.")
flags.DEFINE_list("packing_max_sequences", ["3"], "--max_sequences_per_pack values measured.")

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
      tf.distribute.OneDeviceStrategy("/cpu:0"), task.PretrainingTask(config),
      run_config, lambda: optimization.create_optimizer(1e-4, 10 ** 6, 0))
  spec = features.pretraining_feature_spec(FLAGS.seq_length, NUM_PREDICTIONS)
  input_fn = input_pipeline.make_input_fn([data_path], spec, FLAGS.batch_size, True)
  trainer.train(input_fn)
  trainer.config = dataclasses.replace(run_config, num_train_steps=2 * FLAGS.steps)
  start = time.perf_counter()
  trainer.train(input_fn)
  return FLAGS.steps / (time.perf_counter() - start)


def time_input_pipeline(data_path, num_batches=500):
  """Returns batches/s of the training input pipeline alone."""
  spec = features.pretraining_feature_spec(FLAGS.seq_length, NUM_PREDICTIONS)
  dataset = input_pipeline.make_dataset([data_path], spec, FLAGS.batch_size, True)
  iterator = iter(dataset)
  for _ in range(20):
    next(iterator)
  start = time.perf_counter()
  for _ in range(num_batches):
    next(iterator)
  return num_batches / (time.perf_counter() - start)


# Sequence lengths of the packing rows, with the original's predictions per sequence.
PACKING_LENGTHS = ((128, 20), (512, 77))


def write_corpus_records(text_path, output_path, max_seq_length, max_predictions,
                         max_sequences_per_pack):
  """Pretraining records of a text file (dupe factor 1, seed 12345), packed unless
  `max_sequences_per_pack` is None; returns the stats."""
  settings = writer.Settings(
      vocab_file=FLAGS.vocab_file, do_lower_case=True, max_seq_length=max_seq_length,
      max_predictions_per_seq=max_predictions, random_seed=12345, dupe_factor=1,
      masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False,
      pack_sequences=max_sequences_per_pack is not None,
      max_sequences_per_pack=max_sequences_per_pack or 1)
  return writer.write_pretraining_data([text_path], [output_path], settings)


def training_timer(records_path, layout, output_dir):
  """Builds `--packing_shape` training on `records_path` and runs a warm-up loop (tracing).

  Returns:
    a function that runs `--packing_steps` more steps and returns their steps/s.
  """
  config = bert_config.BertConfig(vocab_size=VOCAB_SIZE, type_vocab_size=2,
                                  **SHAPES[FLAGS.packing_shape])
  steps = FLAGS.packing_steps
  run_config = engine.RunConfig(
      output_dir=output_dir, num_train_steps=steps, train_batch_size=FLAGS.packing_batch_size,
      steps_per_loop=steps, save_checkpoints_steps=10 ** 9)
  trainer = engine.Trainer(
      tf.distribute.OneDeviceStrategy("/cpu:0"),
      task.PretrainingTask(config, packed=layout.packed), run_config,
      lambda: optimization.create_optimizer(1e-4, 10 ** 6, 0))
  input_fn = input_pipeline.make_input_fn([records_path], layout.feature_spec(),
                                          FLAGS.packing_batch_size, True)
  trainer.train(input_fn)

  def timed_loop():
    trainer.config = dataclasses.replace(
        run_config, num_train_steps=trainer.config.num_train_steps + steps)
    start = time.perf_counter()
    trainer.train(input_fn)
    return steps / (time.perf_counter() - start)

  return timed_loop


def packing_rows(temp_dir):
  """Prints the padding table for every corpus and the packed-vs-unpacked training table."""
  with open(FLAGS.packing_corpus, encoding="utf-8") as reader:
    lines = reader.read().splitlines()
  timed = {}
  for name, paragraphs in (("WikiText-2 valid, articles", False),
                           ("WikiText-2 valid, paragraphs", True)):
    timed[name] = os.path.join(temp_dir, f"wikitext-{paragraphs}.txt")
    with open(timed[name], "w", encoding="utf-8") as out:
      out.writelines(line + "\n" for line in wikitext.to_documents(lines, paragraphs))
  corpora = list(timed.items()) + [(os.path.basename(path), path)
                                   for path in FLAGS.packing_corpora]
  pack_sizes = [int(size) for size in FLAGS.packing_max_sequences]
  print("\n| corpus | max_seq_length | instances | padding unpacked | max per pack | packs "
        "| padding packed | rows per instance |")
  print("|---|---|---|---|---|---|---|---|")
  timing = []
  for index, (name, path) in enumerate(corpora):
    for max_seq_length, max_predictions in PACKING_LENGTHS:
      records, stats = {}, {}
      for size in [None] + pack_sizes:
        records[size] = os.path.join(temp_dir, f"{index}-{max_seq_length}-{size}.tfrecord")
        stats[size] = write_corpus_records(path, records[size], max_seq_length,
                                           max_predictions, size)
        if size is not None:
          print(f"| {name} | {max_seq_length} | {stats[size]['instances']:,} | "
                f"{stats[size]['padding_fraction']:.1%} | {size} | {stats[size]['packs']:,} | "
                f"{stats[size]['packed_padding_fraction']:.1%} | "
                f"{stats[size]['packs'] / stats[size]['instances']:.3f} |")
      if name in timed:
        timing.append((name, max_seq_length, max_predictions, records, stats))

  print(f"\n{FLAGS.packing_shape} training on the same instances packed and unpacked, "
        f"{FLAGS.packing_batch_size} rows per step, 1 CPU device; median of "
        f"{FLAGS.packing_rounds} interleaved loops of {FLAGS.packing_steps} steps per row. "
        "Ideal: the real tokens per row packed over unpacked; limit: 1 / (1 - padding unpacked)")
  print("| corpus | max_seq_length | records | steps/s | real tokens per row | real tokens/s "
        "| packed / unpacked | ideal | limit |")
  print("|---|---|---|---|---|---|---|---|---|")
  for name, max_seq_length, max_predictions, records, stats in timing:
    timers = {}
    for size, path in records.items():
      layout = task.RecordLayout(
          max_seq_length,
          max_predictions if size is None else features.packed_predictions_per_row(
              max_predictions, size), size)
      # A fresh directory per run: a trainer resumes from a checkpoint it finds.
      timers[size] = training_timer(path, layout, tempfile.mkdtemp(dir=temp_dir))
    rates = {size: [] for size in timers}
    for _ in range(FLAGS.packing_rounds):
      for size, timer in timers.items():
        rates[size].append(timer())
    unpacked_tokens_per_row = stats[None]["tokens"] / stats[None]["instances"]
    unpacked_tokens_per_second = np.median(rates[None]) * FLAGS.packing_batch_size * (
        unpacked_tokens_per_row)
    for size in timers:
      tokens_per_row = stats[size]["tokens"] / (stats[size]["packs"] if size else
                                                stats[size]["instances"])
      steps_per_second = float(np.median(rates[size]))
      tokens_per_second = steps_per_second * FLAGS.packing_batch_size * tokens_per_row
      columns = ["", "", ""]
      if size is not None:
        columns = [f"{tokens_per_second / unpacked_tokens_per_second:.2f}x",
                   f"{tokens_per_row / unpacked_tokens_per_row:.2f}x",
                   f"{1 / (1 - stats[None]['padding_fraction']):.2f}x"]
      records_name = "unpacked" if size is None else f"packed, up to {size}"
      print(f"| {name} | {max_seq_length} | {records_name} | {steps_per_second:.3f} | "
            f"{tokens_per_row:.1f} | {tokens_per_second:,.0f} | " + " | ".join(columns) + " |")


def main(argv):
  del argv
  if FLAGS.packing_corpus:
    with tempfile.TemporaryDirectory() as temp_dir:
      packing_rows(temp_dir)
  if not FLAGS.shapes:
    return
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
