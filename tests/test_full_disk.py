"""A full file system is one line naming the file, and leaves no temporary behind: checkpoints,
pretraining records, exports and conversions written to a small tmpfs (mounted for the test;
skipped where this process may not mount one)."""

import pathlib
import subprocess

import pytest

from tests import scripts
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow


@pytest.fixture
def full_disk(tmp_path):
  """A 64 KiB tmpfs: room for small files, not for a checkpoint or an export."""
  mount_point = tmp_path / "tmpfs"
  mount_point.mkdir()
  mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
                           capture_output=True, text=True)
  if mounted.returncode != 0:
    pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
  try:
    yield mount_point
  finally:
    subprocess.run(["umount", str(mount_point)], check=False)


def _temporaries(directory):
  return [str(p) for p in pathlib.Path(directory).rglob("*")
          if ".tmp-" in p.name or "tempstate" in p.name]


def _assert_one_line_no_space(result, script, path):
  assert result.returncode == 1, result.stderr[-2000:]
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith(f"{script}: error: {path}"), last
  assert "no space left on the device" in last


def test_a_checkpoint_on_a_full_disk(full_disk, tiny_model, tmp_path):
  vocab_file, config_file = tiny_model
  result = scripts.run_in_process(
      "run_classifier.py", "--task_name=tsv", f"--data_dir={SAMPLES_DIR / 'classification'}",
      f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--output_dir={full_disk / 'out'}", "--do_train", "--max_seq_length=32",
      "--train_batch_size=8", "--num_train_epochs=1", "--distribution_strategy=one_device")
  _assert_one_line_no_space(result, "run_classifier.py", full_disk / "out")
  assert _temporaries(full_disk) == []


def test_pretraining_records_on_a_full_disk(full_disk, tiny_model):
  vocab_file, _ = tiny_model
  output = full_disk / "records.tfrecord"
  result = scripts.run_in_process(
      "create_pretraining_data.py", f"--input_file={SAMPLES_DIR / 'sample_corpus.txt'}",
      f"--output_file={output}", f"--vocab_file={vocab_file}", "--max_seq_length=32",
      "--max_predictions_per_seq=5", "--dupe_factor=20", "--num_workers=1")
  _assert_one_line_no_space(result, "create_pretraining_data.py", output)
  assert list(full_disk.iterdir()) == []


def test_an_export_on_a_full_disk(full_disk, minilm_bert_dir):
  export_dir = full_disk / "export"
  result = scripts.run_in_process(
      "export_model.py", f"--vocab_file={minilm_bert_dir / 'vocab.txt'}",
      f"--bert_config_file={minilm_bert_dir / 'bert_config.json'}",
      f"--init_checkpoint={minilm_bert_dir / 'bert_model.ckpt'}", f"--export_dir={export_dir}",
      "--max_seq_length=32")
  _assert_one_line_no_space(result, "export_model.py", export_dir)
  assert list(full_disk.iterdir()) == []


def test_a_conversion_on_a_full_disk(full_disk, minilm_dir):
  output_dir = full_disk / "converted"
  result = scripts.run_in_process(
      "convert_checkpoint.py", "--direction=hf_to_bert", f"--input_dir={minilm_dir}",
      f"--output_dir={output_dir}")
  _assert_one_line_no_space(result, "convert_checkpoint.py", output_dir)
  assert _temporaries(full_disk) == [] and not list(output_dir.glob("*"))
