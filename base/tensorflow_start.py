"""TensorFlow's start-up lines, hidden by default.

Importing TensorFlow on a machine without a GPU prints lines a newcomer reads as errors: the
oneDNN notice, "Could not find cuda drivers", `E0000 ... failed call to cuInit`, and absl's
"All log messages before absl::InitializeLog() is called are written to STDERR". They come from
C++ and go straight to file descriptor 2, some before TensorFlow reads `TF_CPP_MIN_LOG_LEVEL`.

`import_tensorflow()` sets `TF_CPP_MIN_LOG_LEVEL` to 3 unless the environment already sets it
(a user's own level wins; children inherit the one in force), and imports TensorFlow with file
descriptor 2 captured: the captured lines below that level are dropped, the others written back
to the real stderr, so the level holds for the lines printed before TensorFlow applies it.

It also turns TensorFlow's oneDNN kernels on (`TF_ENABLE_ONEDNN_OPTS=1`) on x86-64 unless the
environment sets the variable: TensorFlow does so by itself only on CPUs with `avx512_vnni`,
`avx512_bf16` or AMX, and on the others its default float32 kernels are the slower ones
(docs/benchmarks.md, "On an AVX2 CPU").
"""

import os
import platform
import re
import sys
import tempfile

LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
DEFAULT_LEVEL = "3"
ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"

# absl's C++ log prefix: severity letter, MMDD, time, thread id, file:line].
_LOG_LINE = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\]]+\] ")
_ABSL_PRE_INIT_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called"
_SEVERITY_RANK = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


def is_hidden(line, level):
  """Whether a captured stderr line falls below the TensorFlow log level.

  Args:
    line: one line as bytes.
    level: `TF_CPP_MIN_LOG_LEVEL` as an int (0 shows everything, 3 hides errors).

  Example:
    >>> from base import tensorflow_start
    >>> line = b"I0000 00:00:1795702454.558473   22851 port.cc:153] oneDNN custom operations"
    >>> tensorflow_start.is_hidden(line, 1), tensorflow_start.is_hidden(line, 0)
    (True, False)
    >>> tensorflow_start.is_hidden(b"Traceback (most recent call last):", 3)
    False
  """
  if line.startswith(_ABSL_PRE_INIT_NOTICE):
    return level >= 1
  match = _LOG_LINE.match(line)
  return bool(match) and _SEVERITY_RANK[match.group(1)] < level


def _level():
  try:
    return int(os.environ[LEVEL_VARIABLE])
  except ValueError:
    return 0


def import_tensorflow():
  """Imports TensorFlow once per process, its start-up lines below the log level dropped."""
  if "tensorflow" in sys.modules:
    return
  os.environ.setdefault(LEVEL_VARIABLE, DEFAULT_LEVEL)
  if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ.setdefault(ONEDNN_VARIABLE, "1")
  level = _level()
  sys.stderr.flush()
  saved_stderr = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      import tensorflow  # pylint: disable=import-outside-toplevel,unused-import
    finally:
      sys.stderr.flush()
      os.dup2(saved_stderr, 2)
      os.close(saved_stderr)
      captured.seek(0)
      for line in captured:
        if not is_hidden(line, level):
          os.write(2, line)
