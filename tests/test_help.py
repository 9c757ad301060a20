"""Every script's --help lists every flag it accepts, grouped, with its usage examples intact, and
is what its golden file (`tests/golden/help/`) says."""

import os
import re

import pytest

from tests import scripts
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

# Runs a script as `python <script> --help` would, then reports what it printed and the flags it
# had defined by then (absl defines the help flags before parsing, so these are all it accepts).
HELP_AND_FLAGS = """
import contextlib, io, json, runpy, sys
script = sys.argv[1]
sys.argv = [script, "--help"]
printed = io.StringIO()
code = None
with contextlib.redirect_stdout(printed):
  try:
    runpy.run_path(script, run_name="__main__")
  except SystemExit as exit:
    code = exit.code
from absl import flags
names = sorted({flags.FLAGS[name].name for name in flags.FLAGS})
booleans = sorted({flags.FLAGS[name].name for name in flags.FLAGS if flags.FLAGS[name].boolean})
print(json.dumps({"help": printed.getvalue(), "code": code, "flags": names, "booleans": booleans}))
"""

SCRIPTS = sorted(path.name for path in REPO_ROOT.glob("*.py"))


def test_every_runner_is_checked():
  assert {"create_pretraining_data.py", "run_pretraining.py", "run_classifier.py",
          "run_squad.py", "run_ner.py", "run_multiple_choice.py", "extract_features.py",
          "export_model.py", "convert_checkpoint.py", "learn_vocab.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_lists_every_flag_the_script_accepts(script):
  result = scripts.run_python_json(HELP_AND_FLAGS, script, cwd=REPO_ROOT)
  assert result["code"] in (0, None)
  text = result["help"]
  listed = set(re.findall(r"^  (?:-\S,)?--(?:\[no\])?(\w+):", text, flags=re.MULTILINE))
  assert set(result["flags"]) - listed == set()
  for name in result["booleans"]:
    assert f"--[no]{name}:" in text
  # The shared groups come under their titles, after the script's own flags.
  if "log_every_steps" in result["flags"]:
    group = "\nProgress: log lines and TensorBoard:\n"
    assert text.index(f"\n{script}:\n") < text.index(group) < text.index("  --log_every_steps:")
  # The docstring's usage examples keep their lines (a backslash line continuation in a
  # non-raw docstring joined them with runs of spaces).
  header = text[:text.index(f"\n{script}:\n")] if f"\n{script}:\n" in text else text
  assert "python " in header
  assert not re.search(r"\S {4,}--", header), header
  # The flags, their groups, help and defaults stay as `tests/golden/help/` says.
  # --num_workers defaults to the machine's cores; the golden files were made on two.
  golden = REPO_ROOT / "tests" / "golden" / "help" / script.replace(".py", ".txt")
  assert text == golden.read_text(encoding="utf-8").replace(
      "does not depend on it.\n    (default: '2')",
      f"does not depend on it.\n    (default: '{os.cpu_count() or 1}')")

