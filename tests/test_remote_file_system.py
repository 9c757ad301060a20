"""Every script end to end with all its paths on a non-local TensorFlow file system (`ram://`,
TensorFlow's in-memory one: what works there goes through `tf.io.gfile`, as `gs://` needs), and
no local folder named after the scheme created.

The scripts run in this process (`ram://` lives inside one), each in a `ram://` tree of its own
that its inputs are copied into and its outputs out of; the chain is create_pretraining_data ->
run_pretraining -> export_model / extract_features / convert_checkpoint, plus every fine-tuning
runner with an export, and learn_vocab.
"""

import itertools
import os

import pytest
import tensorflow as tf

from tests import scripts
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow

FINE_TUNING = {
    "run_classifier.py": (SAMPLES_DIR / "classification", ["--data_dir=ram://data",
                                                           "--task_name=tsv", "--do_eval",
                                                           "--do_predict"]),
    "run_ner.py": (SAMPLES_DIR / "ner", ["--data_dir=ram://data", "--do_eval", "--do_predict"]),
    "run_squad.py": (SAMPLES_DIR / "squad", ["--train_file=ram://data/train.json",
                                             "--predict_file=ram://data/dev.json",
                                             "--do_predict", "--version_2_with_negative", "--max_query_length=8",
                                             "--doc_stride=16"]),
    "run_multiple_choice.py": (SAMPLES_DIR / "multiple_choice", ["--data_dir=ram://data",
                                                                  "--task_name=jsonl",
                                                                  "--do_eval", "--do_predict"]),
}

_RUNS = itertools.count()


def ram_files(root="ram://"):
  """Every file under `root` on ram://, by path. (Its directories are not listed by `listdir`
  unless made by `makedirs`, so the files are found by globbing each depth.)"""
  names = set()
  for depth in range(1, 12):
    names.update(tf.io.gfile.glob(root.rstrip("/") + "/" + "/".join(["*"] * depth)))
  return sorted(name for name in names if not any(other.startswith(name + "/") for other in names))


def copy_tree(source, target):
  """Copies a file, or a directory recursively, from the local disk to ram:// or back."""
  if source.startswith("ram://"):
    files = [name for name in ram_files(source) if name.startswith(source + "/")] or [source]
  else:
    files = ([source] if os.path.isfile(source) else
             [os.path.join(directory, name) for directory, _, names in os.walk(source)
              for name in names])
  for name in files:
    destination = target if name == source else os.path.join(target,
                                                              os.path.relpath(name, source))
    tf.io.gfile.makedirs(os.path.dirname(destination))
    # ram:// appends to a file that exists instead of replacing it.
    if tf.io.gfile.exists(destination):
      tf.io.gfile.remove(destination)
    tf.io.gfile.copy(name, destination)


def run_on_ram(tmp_path, script, flags, copy_in=(), copy_out=()):
  """Runs `script flags` on ram:// (after copying `copy_in` pairs `(local, ram)`, before copying
  `copy_out` pairs `(ram, local)`); returns the ram:// files it left, by the names in `flags`.

  The run sees its paths under a `ram://` tree of its own (removed afterwards), and runs in
  `tmp_path`, which must hold no `ram:` entry afterwards.
  """
  root = f"ram://run{next(_RUNS)}/"
  on_root = lambda text: str(text).replace("ram://", root)
  for local, ram in copy_in:
    copy_tree(str(local), on_root(ram))
  working_directory = os.getcwd()
  os.chdir(tmp_path)
  try:
    result = scripts.run_in_process(script, *map(on_root, flags))
  finally:
    os.chdir(working_directory)
  assert result.returncode == 0, result.stderr[-3000:]
  assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("ram")]
  for ram, local in copy_out:
    copy_tree(on_root(ram), str(local))
  listed = ram_files(root)
  for name in listed:
    tf.io.gfile.remove(name)
  return [name.replace(root, "ram://", 1) for name in listed]


@pytest.fixture(scope="module")
def ram_model(tiny_model, tmp_path_factory):
  """Pretraining data and a 2-step pretraining run made on ram://, copied out to a local
  directory: (local directory, its files listed on ram://)."""
  vocab_file, config_file = tiny_model
  work = tmp_path_factory.mktemp("ram_pretraining")
  model_in = [(vocab_file, "ram://model/vocab.txt"), (config_file, "ram://model/bert_config.json")]
  listed = run_on_ram(work, "create_pretraining_data.py", [
      "--input_file=ram://corpus/sample_corpus.txt", "--output_file=ram://data/pt.tfrecord",
      "--vocab_file=ram://model/vocab.txt", "--max_seq_length=32",
      # One worker: this process's; spawned workers would not see its ram:// (gs:// they do).
      "--max_predictions_per_seq=5", "--num_output_shards=2", "--num_workers=1"],
      copy_in=[(SAMPLES_DIR / "sample_corpus.txt", "ram://corpus/sample_corpus.txt"),
               *model_in],
      copy_out=[("ram://data", work / "data")])
  assert "ram://data/pt.tfrecord-00000-of-00002" in listed
  assert "ram://data/_pt.tfrecord-00000-of-00002.stats.json" in listed
  listed = run_on_ram(work, "run_pretraining.py", [
      "--input_file=ram://data/pt.tfrecord*", "--output_dir=ram://pretrained",
      "--bert_config_file=ram://model/bert_config.json", "--do_train", "--do_eval",
      "--num_train_steps=2", "--max_seq_length=32", "--max_predictions_per_seq=5",
      "--train_batch_size=4", "--eval_batch_size=4", "--max_eval_steps=1",
      "--distribution_strategy=one_device"],
      copy_in=[(work / "data", "ram://data"), *model_in],
      copy_out=[("ram://pretrained", work / "pretrained")])
  assert "ram://pretrained/model.ckpt-2.index" in listed
  assert "ram://pretrained/eval_results.txt" in listed
  assert "ram://pretrained/bert_config.json" in listed
  assert "ram://pretrained/.lock" not in listed
  assert any(name.startswith("ram://pretrained/events.out") or "/train/" in name
             or "events.out" in name for name in listed)
  return work, model_in


def test_data_creation_and_pretraining_write_only_to_ram(ram_model):
  work, _ = ram_model
  assert (work / "pretrained" / "checkpoint").exists()


def test_export_extract_and_convert_read_and_write_only_ram(ram_model):
  work, model_in = ram_model
  checkpoint_in = [(work / "pretrained", "ram://pretrained"), *model_in]
  listed = run_on_ram(work, "export_model.py", [
      "--bert_config_file=ram://model/bert_config.json", "--vocab_file=ram://model/vocab.txt",
      "--init_checkpoint=ram://pretrained", "--export_dir=ram://export", "--export_version=1",
      "--max_seq_length=32"], copy_in=checkpoint_in)
  assert {"ram://export/1/saved_model.pb", "ram://export/1/variables/variables.index",
          "ram://export/1/assets/vocab.txt"} <= set(listed)
  assert not [name for name in listed if "/.tmp-" in name]

  with open(work / "lines.txt", "w", encoding="utf-8") as f:
    f.write("the bees fly\nthe river ||| runs fast\n")
  listed = run_on_ram(work, "extract_features.py", [
      "--input_file=ram://text/lines.txt", "--output_file=ram://features/out.jsonl",
      "--bert_config_file=ram://model/bert_config.json", "--vocab_file=ram://model/vocab.txt",
      "--init_checkpoint=ram://pretrained", "--max_seq_length=32", "--layers=-1"],
      copy_in=[*checkpoint_in, (work / "lines.txt", "ram://text/lines.txt")],
      copy_out=[("ram://features/out.jsonl", work / "features.jsonl")])
  assert len((work / "features.jsonl").read_text().splitlines()) == 2

  listed = run_on_ram(work, "convert_checkpoint.py", [
      "--direction=bert_to_hf", "--input_dir=ram://pretrained", "--output_dir=ram://hf"],
      copy_in=[*checkpoint_in, (model_in[0][0], "ram://pretrained/vocab.txt")],
      copy_out=[("ram://hf", work / "hf")])
  assert {"ram://hf/config.json", "ram://hf/model.safetensors", "ram://hf/vocab.txt"} <= set(
      listed)
  listed = run_on_ram(work, "convert_checkpoint.py", [
      "--direction=hf_to_bert", "--input_dir=ram://hf", "--output_dir=ram://back"],
      copy_in=[(work / "hf", "ram://hf")])
  assert "ram://back/bert_model.ckpt.index" in listed


@pytest.mark.parametrize("script", sorted(FINE_TUNING))
def test_fine_tuning_runner_reads_and_writes_only_ram(ram_model, tmp_path, script):
  work, model_in = ram_model
  data_dir, flags = FINE_TUNING[script]
  listed = run_on_ram(tmp_path, script, [
      "--output_dir=ram://out", "--export_dir=ram://export",
      "--export_version=1", "--vocab_file=ram://model/vocab.txt",
      "--bert_config_file=ram://model/bert_config.json", "--init_checkpoint=ram://pretrained",
      "--do_train", "--num_train_epochs=1", "--max_seq_length=32", "--train_batch_size=8",
      "--distribution_strategy=one_device", *flags],
      copy_in=[(data_dir, "ram://data"), (work / "pretrained", "ram://pretrained"), *model_in])
  assert "ram://export/1/saved_model.pb" in listed
  assert "ram://out/checkpoint" in listed
  assert not [name for name in listed if ".tmp-" in name]


def test_learn_vocab_reads_and_writes_only_ram(tmp_path):
  listed = run_on_ram(tmp_path, "learn_vocab.py", [
      "--input_file=ram://corpus/sample_corpus.txt", "--vocab_file=ram://vocab/vocab.txt",
      "--vocab_size=200"],
      copy_in=[(SAMPLES_DIR / "sample_corpus.txt", "ram://corpus/sample_corpus.txt")])
  assert "ram://vocab/vocab.txt" in listed
