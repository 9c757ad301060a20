"""Each fine-tuning runner writes what its golden files say (`tests/golden/runner_outputs/`): a
seeded tiny run's records (parsed), label list, eval results, predictions and export signatures
(see `tests/golden_outputs.py`; `UPDATE_GOLDEN=1` rewrites them after an intended change).

The runs are `run(config)` calls in this one process, one family after another, as a notebook
makes them; the golden files were written by the scripts in processes of their own.
"""

import pytest

from tests import golden_outputs
from tests import scripts
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow

COMMON_FLAGS = ("--distribution_strategy=one_device", "--seed=7", "--max_seq_length=32",
                "--train_batch_size=4", "--predict_batch_size=4", "--learning_rate=1e-3",
                "--export_version=1")

RUNNERS = {
    "run_classifier.py": (
        "--task_name=tsv", f"--data_dir={SAMPLES_DIR / 'classification'}",
        "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=1", "--eval_batch_size=4"),
    "run_ner.py": (
        f"--data_dir={SAMPLES_DIR / 'ner'}", "--do_train", "--do_eval", "--do_predict",
        "--num_train_epochs=1", "--eval_batch_size=4"),
    "run_squad.py": (
        f"--train_file={SAMPLES_DIR / 'squad' / 'train.json'}",
        f"--predict_file={SAMPLES_DIR / 'squad' / 'dev.json'}", "--version_2_with_negative",
        "--do_train", "--do_predict", "--doc_stride=16", "--max_query_length=8",
        "--num_train_epochs=1"),
    "run_multiple_choice.py": (
        "--task_name=jsonl", f"--data_dir={SAMPLES_DIR / 'multiple_choice'}",
        "--do_train", "--do_eval", "--do_predict", "--num_train_epochs=1", "--eval_batch_size=4"),
}


@pytest.mark.parametrize("script", sorted(RUNNERS))
def test_runner_writes_its_golden_files(tiny_model, tmp_path, script):
  vocab_file, config_file = tiny_model
  result = scripts.run_in_process(
      script, *COMMON_FLAGS, *RUNNERS[script], f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'output'}",
      f"--export_dir={tmp_path / 'export'}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.result.export_path == str(tmp_path / "export" / "1")
  assert result.result.metrics == scripts.read_eval_results(tmp_path / "output" / "eval_results.txt")
  reduced = golden_outputs.reduce_run(tmp_path / "output", tmp_path / "export" / "1")
  golden_dir = golden_outputs.GOLDEN_DIR / "runner_outputs" / script.removesuffix(".py")
  if golden_outputs.updating():
    golden_outputs.write(golden_dir, reduced)
  assert "eval_results.txt" in reduced
  assert golden_outputs.differences(golden_outputs.read(golden_dir), reduced) == []
