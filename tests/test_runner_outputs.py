"""Each fine-tuning runner writes the same bytes as at `BASELINE_COMMIT`: a seeded tiny run of the
runner at that commit and of the working tree, compared file by file (records, label lists, eval
results, predictions) and by the export's signatures.

`BASELINE_COMMIT` is the last commit before the runners were rebuilt on one shared runner; the
test guards that rebuild and whatever follows it. It needs the repository's history, and skips
without it.
"""

import shutil
import subprocess

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tests import scripts
from tests.conftest import REPO_ROOT
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow

BASELINE_COMMIT = "48fc389b1cf78df2f0064bd8d360ed4ffcda84f4"

# Files whose bytes depend on the wall clock or the process, not on what the run computed.
NOT_COMPARED = ("checkpoint", ".lock")
NOT_COMPARED_PREFIXES = ("events.out.tfevents", "model.ckpt-")

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


@pytest.fixture(scope="module")
def baseline_tree(tmp_path_factory):
  """The repository at `BASELINE_COMMIT`, extracted into a temporary directory."""
  if not (REPO_ROOT / ".git").exists() or shutil.which("git") is None:
    pytest.skip("the repository's history (.git) or git is absent")
  found = subprocess.run(["git", "-C", str(REPO_ROOT), "cat-file", "-e",
                          f"{BASELINE_COMMIT}^{{commit}}"], capture_output=True)
  if found.returncode != 0:
    pytest.skip(f"commit {BASELINE_COMMIT} is not in this clone's history")
  tree = tmp_path_factory.mktemp("baseline")
  archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", BASELINE_COMMIT],
                           capture_output=True, check=True).stdout
  subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
  return tree


def _run(tree, script, output_dir, vocab_file, config_file):
  result = scripts.run_script(
      script, *COMMON_FLAGS, *RUNNERS[script], f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--output_dir={output_dir / 'output'}",
      f"--export_dir={output_dir / 'export'}", timeout=600, root=tree)
  assert result.returncode == 0, result.stderr[-3000:]


def _compared_files(output_dir):
  """`{relative path: contents}` of the files a run wrote that its inputs and numbers decide:
  bytes, or for a record file its records as `{feature: values}` (a `tf.train.Example`'s
  serialisation orders its feature map differently in every process)."""
  return {str(path.relative_to(output_dir)):
          _records(path) if path.name.endswith(".tf_record") else path.read_bytes()
          for path in sorted(output_dir.rglob("*"))
          if path.is_file() and path.name not in NOT_COMPARED
          and not path.name.startswith(NOT_COMPARED_PREFIXES)}


def _records(path):
  records = []
  for serialized in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
    example = tf.train.Example.FromString(serialized)
    records.append({name: list(getattr(feature, feature.WhichOneof("kind")).value)
                    for name, feature in sorted(example.features.feature.items())})
  return records


def _signatures(export_dir):
  """`{signature: (inputs, outputs)}` of a SavedModel, each `{key: (dtype, shape)}`."""
  saved_model = saved_model_pb2.SavedModel()
  saved_model.ParseFromString((export_dir / "saved_model.pb").read_bytes())
  def describe(tensors):
    return {key: (info.dtype, [dim.size for dim in info.tensor_shape.dim])
            for key, info in sorted(tensors.items())}
  return {name: (describe(signature.inputs), describe(signature.outputs))
          for name, signature in sorted(saved_model.meta_graphs[0].signature_def.items())}


@pytest.mark.parametrize("script", sorted(RUNNERS))
def test_runner_writes_what_it_wrote_at_the_baseline(baseline_tree, tiny_model, tmp_path, script):
  vocab_file, config_file = tiny_model
  _run(baseline_tree, script, tmp_path / "before", vocab_file, config_file)
  _run(REPO_ROOT, script, tmp_path / "after", vocab_file, config_file)
  before = _compared_files(tmp_path / "before" / "output")
  after = _compared_files(tmp_path / "after" / "output")
  assert "eval_results.txt" in after or "predictions.json" in after
  assert sorted(after) == sorted(before)
  for name in before:
    assert after[name] == before[name], f"{script}: {name} differs from the baseline's"
  assert _signatures(tmp_path / "after" / "export" / "1") == _signatures(
      tmp_path / "before" / "export" / "1")
