"""Running the project's command-line scripts in a child process, and reading what they write."""

import functools
import subprocess
import sys

from tests.conftest import REPO_ROOT


def run_script(script, *flags):
  """Runs `python <script> <flags>` from the repository root.

  Returns:
    the `subprocess.CompletedProcess`, with `stdout` and `stderr` as text.
  """
  return subprocess.run([sys.executable, str(REPO_ROOT / script), *flags],
                        capture_output=True, text=True, cwd=REPO_ROOT)


def fine_tuning_runner(script):
  """`run(*flags)` of a fine-tuning runner, with `--distribution_strategy=one_device` (the tests'
  setting; the default is mirrored)."""
  return functools.partial(run_script, script, "--distribution_strategy=one_device")


def read_eval_results(path):
  """`{name: float}` of an `eval_results.txt` (`name = value` lines)."""
  with open(path) as f:
    return {key.strip(): float(value) for key, value in (line.split("=") for line in f)}
