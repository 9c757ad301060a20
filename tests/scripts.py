"""Running the project's command-line scripts in a child process, and reading what they write."""

import contextlib
import dataclasses
import functools
import io
import json
import logging
import os
import subprocess
import sys

from absl import logging as absl_logging

from base import cli
from tasks import runner as fine_tuning_runner_lib
from tasks.classification.config import ClassificationConfig
from tasks.conversion import runner as conversion_runner
from tasks.conversion.config import ConversionConfig
from tasks.encoder import runner as encoder_runner
from tasks.encoder.config import ExportModelConfig
from tasks.encoder.config import ExtractFeaturesConfig
from tasks.multiple_choice.config import MultipleChoiceConfig
from tasks.ner.config import NerConfig
from tasks.pretraining import data_runner as pretraining_data_runner
from tasks.pretraining import runner as pretraining_runner
from tasks.pretraining.config import PretrainingConfig
from tasks.pretraining.config import PretrainingDataConfig
from tasks.squad.config import SquadConfig
from tasks.vocab import runner as vocab_runner
from tasks.vocab.config import LearnVocabConfig
from tests.conftest import CHILD_PYTHONPATH
from tests.conftest import REPO_ROOT

# script -> (its config class, its run function): what `run_in_process` calls.
IN_PROCESS_RUNS = {
    "create_pretraining_data.py": (PretrainingDataConfig, pretraining_data_runner.run),
    "extract_features.py": (ExtractFeaturesConfig, encoder_runner.extract_features),
    "export_model.py": (ExportModelConfig, encoder_runner.export_model),
    "convert_checkpoint.py": (ConversionConfig, conversion_runner.run),
    "learn_vocab.py": (LearnVocabConfig, vocab_runner.run),
    "run_classifier.py": (ClassificationConfig, fine_tuning_runner_lib.run),
    "run_ner.py": (NerConfig, fine_tuning_runner_lib.run),
    "run_squad.py": (SquadConfig, fine_tuning_runner_lib.run),
    "run_multiple_choice.py": (MultipleChoiceConfig, fine_tuning_runner_lib.run),
    "run_pretraining.py": (PretrainingConfig, pretraining_runner.run),
}


@dataclasses.dataclass
class InProcessResult:
  """What `run_in_process` saw, shaped as a `subprocess.CompletedProcess`: `returncode` 0 or 1,
  `stderr` the run's log lines (in absl's format, as the script prints them) then the one-line
  error, and the run's own `result`."""
  returncode: int
  stderr: str
  stdout: str = ""
  result: object = None

TOY_RUNNER = REPO_ROOT / "tests" / "toy_runner.py"


def child_env(**extra):
  """The environment of a child process: the repository importable, TensorFlow's C++ logs quiet,
  no TF_CONFIG inherited from the test's environment; then `extra`."""
  env = dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("TF_CONFIG", None)
  env.update(extra)
  return env


def run_script(script, *flags, timeout=None, root=REPO_ROOT):
  """Runs `python <script> <flags>` from `root` (the repository, or another tree of it).

  Returns:
    the `subprocess.CompletedProcess`, with `stdout` and `stderr` as text.
  """
  return subprocess.run([sys.executable, str(root / script), *flags],
                        capture_output=True, text=True, cwd=root, timeout=timeout)


def run_in_process(script, *flags):
  """Runs a script's config in this process as its command line would: the config built from
  `flags` (`FlagConfig.from_args`), then its run; a `UserError` becomes exit status 1 and the
  script's one-line error and status, as `cli.run_config` prints and returns them. Scripts without an in-process run
  (not in `IN_PROCESS_RUNS`) start as a child process (`run_script`).

  Returns:
    an `InProcessResult` (or the child's `subprocess.CompletedProcess`).
  """
  if script not in IN_PROCESS_RUNS:
    return run_script(script, *flags)
  config_class, run = IN_PROCESS_RUNS[script]
  logs = io.StringIO()
  handler = logging.StreamHandler(logs)
  handler.setFormatter(absl_logging.PythonFormatter())  # the lines a script prints
  root_logger = logging.getLogger()
  root_logger.addHandler(handler)
  verbosity = absl_logging.get_verbosity()
  absl_logging.set_verbosity(absl_logging.INFO)  # as absl's app sets it for a script
  try:
    with contextlib.redirect_stdout(io.StringIO()) as stdout:
      result = run(config_class.from_args(*flags))
    return InProcessResult(0, logs.getvalue(), stdout.getvalue(), result)
  except Exception as exception:  # pylint: disable=broad-except
    ending = cli.failure(script, exception)
    if ending is None:
      raise
    line, status = ending
    return InProcessResult(status, logs.getvalue() + line + "\n")
  finally:
    absl_logging.set_verbosity(verbosity)
    root_logger.removeHandler(handler)


def run_toy_runner(*flags, timeout=120, **env):
  """Runs `tests/toy_runner.py <flags>` (the engine on a toy task) with `child_env(**env)`."""
  return subprocess.run([sys.executable, str(TOY_RUNNER), *flags], capture_output=True,
                        text=True, timeout=timeout, env=child_env(**env), cwd=REPO_ROOT)


def run_python(code, *args, cwd=None, timeout=None):
  """Runs `python -c <code> <args>` in a fresh process (e.g. to load an export as a server
  would, with nothing of the test's process) and asserts that it succeeded.

  Args:
    code: the program.
    *args: its `sys.argv[1:]` (paths may be `pathlib.Path`).
    cwd: its working directory (default: the test's).
    timeout: seconds after which it is killed and the test fails (default: none).

  Returns:
    its stdout.
  """
  result = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


def run_python_json(code, *args, cwd=None):
  """`run_python`, then the JSON its last line of stdout prints (earlier lines may be logs)."""
  return json.loads(run_python(code, *args, cwd=cwd).strip().splitlines()[-1])


def fine_tuning_runner(script, in_process=True):
  """`run(*flags)` of a fine-tuning runner, with `--distribution_strategy=one_device` (the tests'
  setting; the default is mirrored): `run_in_process`, or with `in_process=False` as a child
  process (`run_script`)."""
  return functools.partial(run_in_process if in_process else run_script, script,
                           "--distribution_strategy=one_device")


def read_eval_results(path):
  """`{name: float}` of an `eval_results.txt` (`name = value` lines)."""
  with open(path) as f:
    return {key.strip(): float(value) for key, value in (line.split("=") for line in f)}
