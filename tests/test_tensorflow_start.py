"""TensorFlow's start-up: its lines hidden below the log level and oneDNN on (x86-64), a user's own
settings winning."""

import os
import platform
import re
import subprocess
import sys

import pytest

from base import tensorflow_start
from tests.conftest import CHILD_PYTHONPATH
from tests.conftest import REPO_ROOT

# Lines TensorFlow 2.21 prints on a CPU machine, as it prints them.
ONEDNN = (b"I0000 00:00:1795702454.558473   22851 port.cc:153] oneDNN custom operations are on. "
          b"You may see slightly different numerical results")
CUINIT = (b"E0000 00:00:1795702458.094336   22851 cuda_platform.cc:52] failed call to cuInit: "
          b"INTERNAL: CUDA error")
WARNING = b"W0000 00:00:1795702458.094336   22851 some_file.cc:7] a warning"
NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


@pytest.mark.parametrize("level, hidden", [
    (0, set()),
    (1, {ONEDNN, NOTICE}),
    (2, {ONEDNN, NOTICE, WARNING}),
    (3, {ONEDNN, NOTICE, WARNING, CUINIT}),
])
def test_lines_below_the_level_are_hidden(level, hidden):
  lines = {ONEDNN, CUINIT, WARNING, NOTICE, b"Traceback (most recent call last):",
           b"ValueError: I0000 is not a log line here"}
  assert {line for line in lines if tensorflow_start.is_hidden(line, level)} == hidden


STARTS_TENSORFLOW = ("import base, tensorflow as tf; tf.config.list_physical_devices(); "
                     "import os, sys; print('started', file=sys.stderr); "
                     "from tensorflow.python.util import _pywrap_util_port; "
                     "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'), "
                     "_pywrap_util_port.IsMklEnabled())")
LOG_LINE = re.compile(r"^([IWEF]\d{4} \d\d:\d\d:|WARNING: All log messages before absl)", re.M)


@pytest.mark.slow
def test_a_process_starts_quietly_with_onednn_unless_the_user_asks_otherwise():
  env = {key: value for key, value in os.environ.items()
         if key not in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")}
  env["PYTHONPATH"] = CHILD_PYTHONPATH
  quiet = subprocess.run([sys.executable, "-c", STARTS_TENSORFLOW], capture_output=True,
                         text=True, env=env, check=True)
  assert "started" in quiet.stderr
  assert not LOG_LINE.findall(quiet.stderr), quiet.stderr
  if platform.machine().lower() in ("x86_64", "amd64"):
    assert quiet.stdout.split() == ["1", "True"]
  verbose = subprocess.run([sys.executable, "-c", STARTS_TENSORFLOW], capture_output=True,
                           text=True, env=dict(env, TF_CPP_MIN_LOG_LEVEL="0",
                                               TF_ENABLE_ONEDNN_OPTS="0"), check=True)
  assert LOG_LINE.findall(verbose.stderr), verbose.stderr
  assert verbose.stdout.split() == ["0", "False"]
