"""Pretrains a tiny BERT on the same instances packed and unpacked, and evaluates both on the same
held-out unpacked records: packing must not change what the model learns.

WikiText-2 valid is made a corpus of short documents, one per paragraph (`data/wikitext.py`), as
news or web text is: most instances are shorter than a row, so packing changes the batches a
lot (at length 128 about 1.2 instances per row instead of 1). The last `--held_out_fraction` of
the documents is the held-out set, written unpacked; the others are the training set, written
once unpacked and once with `--pack_sequences` by `create_pretraining_data.py` with the same seed
(the same instances: packing happens after masking). Both runs take the same number of
optimizer steps and see the same number of instances per step on average: the packed run's
batch is the unpacked batch times the rows per instance of its records. Each `--seeds` value
trains both runs from the same initial weights; the spread between seeds is the noise the
packed-unpacked gap is held against.

Prints the held-out masked-LM and next-sentence accuracy and loss of every run, and their wall
time. Runs for tens of minutes on a 2-core CPU; it is an example, not a test.

Example:
  python examples/packed_pretraining.py --shared_data=../shared/data \
      --output_dir=/tmp/packed_pretraining
"""

import argparse
import json
import pathlib
import sys
import time

from common import REPO_ROOT
from common import run

sys.path.insert(0, str(REPO_ROOT))

from data import wikitext  # pylint: disable=g-import-not-at-top,wrong-import-position

TINY_CONFIG = {"vocab_size": 30522, "hidden_size": 128, "num_hidden_layers": 2,
               "num_attention_heads": 2, "intermediate_size": 512,
               "max_position_embeddings": 512, "type_vocab_size": 2}


def split_wikitext(shared_data, output_dir, held_out_fraction):
  """Writes train.txt and held_out.txt, a document per paragraph; returns their paths."""
  lines = (shared_data / "pretraining/wikitext-2-valid.tokens.txt").read_text(
      encoding="utf-8").splitlines()
  documents = "\n".join(wikitext.to_documents(lines, paragraphs=True)).split("\n\n")
  num_held_out = max(1, round(len(documents) * held_out_fraction))
  paths = output_dir / "train.txt", output_dir / "held_out.txt"
  paths[0].write_text("\n\n".join(documents[:-num_held_out]) + "\n", encoding="utf-8")
  paths[1].write_text("\n\n".join(documents[-num_held_out:]) + "\n", encoding="utf-8")
  return paths


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--shared_data", type=pathlib.Path, required=True)
  parser.add_argument("--output_dir", type=pathlib.Path, required=True)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--max_predictions_per_seq", type=int, default=20)
  parser.add_argument("--held_out_fraction", type=float, default=0.1)
  parser.add_argument("--dupe_factor", type=int, default=2)
  parser.add_argument("--train_batch_size", type=int, default=32,
                      help="Instances per step of the unpacked run.")
  parser.add_argument("--num_train_steps", type=int, default=400)
  parser.add_argument("--seeds", default="0,1",
                                      help="Comma-separated --seed values; each trains both runs.")
  args = parser.parse_args()
  args.output_dir.mkdir(parents=True, exist_ok=True)
  vocab = args.shared_data / "vocab/uncased_vocab.txt"
  train_text, held_out_text = split_wikitext(args.shared_data, args.output_dir,
                                             args.held_out_fraction)
  config_path = args.output_dir / "bert_config.json"
  config_path.write_text(json.dumps(TINY_CONFIG))

  common_flags = [f"--vocab_file={vocab}", f"--max_seq_length={args.max_seq_length}",
                  f"--max_predictions_per_seq={args.max_predictions_per_seq}",
                  "--random_seed=12345"]
  records = {name: args.output_dir / f"{name}.tfrecord"
             for name in ("unpacked", "packed", "held_out")}
  run(["create_pretraining_data.py", f"--input_file={train_text}",
       f"--output_file={records['unpacked']}", f"--dupe_factor={args.dupe_factor}",
       *common_flags], args.output_dir / "create_unpacked.log")
  run(["create_pretraining_data.py", f"--input_file={train_text}",
       f"--output_file={records['packed']}", f"--dupe_factor={args.dupe_factor}",
       "--pack_sequences", *common_flags], args.output_dir / "create_packed.log")
  run(["create_pretraining_data.py", f"--input_file={held_out_text}",
       f"--output_file={records['held_out']}", "--dupe_factor=1", *common_flags],
      args.output_dir / "create_held_out.log")
  stats = json.loads((args.output_dir / "_packed.tfrecord.stats.json").read_text())
  rows_per_instance = stats["packs"] / stats["instances"]
  batch_sizes = {"unpacked": args.train_batch_size,
                 "packed": max(1, round(args.train_batch_size * rows_per_instance))}
  print(f"{stats['instances']:,} training instances; padding {stats['padding_fraction']:.1%} "
        f"unpacked, {stats['packed_padding_fraction']:.1%} packed; {rows_per_instance:.3f} rows "
        f"per instance; batches of {batch_sizes['unpacked']} rows unpacked, "
        f"{batch_sizes['packed']} packed")

  results = []
  for seed in args.seeds.split(","):
    for name in ("unpacked", "packed"):
      output = args.output_dir / f"run_{name}_seed{seed}"
      start = time.monotonic()
      run(["run_pretraining.py", f"--input_file={records[name]}",
           f"--eval_input_file={records['held_out']}", f"--output_dir={output}",
           f"--bert_config_file={config_path}", f"--max_seq_length={args.max_seq_length}",
           f"--max_predictions_per_seq={args.max_predictions_per_seq}", "--do_train",
           "--do_eval", f"--train_batch_size={batch_sizes[name]}", "--eval_batch_size=32",
           f"--num_train_steps={args.num_train_steps}",
           f"--num_warmup_steps={args.num_train_steps // 10}", "--learning_rate=1e-3",
           "--max_eval_steps=1000", "--save_checkpoints_steps=100000", f"--seed={seed}"],
          args.output_dir / f"run_{name}_seed{seed}.log")
      seconds = time.monotonic() - start
      values = dict(line.split(" = ") for line in
                    (output / "eval_results.txt").read_text().splitlines() if " = " in line)
      results.append((name, seed, values, seconds))

  print("| records | seed | train rows per step | masked_lm_accuracy | masked_lm_loss | "
        "next_sentence_accuracy | next_sentence_loss | wall time |")
  print("|---|---|---|---|---|---|---|---|")
  for name, seed, values, seconds in results:
    print(f"| {name} | {seed} | {batch_sizes[name]} | "
          f"{float(values['masked_lm_accuracy']):.4f} | {float(values['masked_lm_loss']):.4f} | "
          f"{float(values['next_sentence_accuracy']):.4f} | "
          f"{float(values['next_sentence_loss']):.4f} | {seconds / 60:.1f} min |")


if __name__ == "__main__":
  main()
