"""The `>>>` examples of the project's docstrings run, and print what they say.

Each module's examples run in an empty namespace, as a reader pasting them would: every example
imports what it uses and builds its own inputs (a small `BertConfig`, ids from `tf.constant`),
and writes the files it reads (a `vocab.txt`, a corpus). They run in a fresh temporary working
directory, so those files and what the examples write (checkpoints in `output/`) are left there.

Examples that need data files or write exports (the engine's, the servers', the runner's) are
usage blocks without `>>>`; their behaviour is tested end to end elsewhere.
"""

import doctest
import importlib
import os

import pytest

from tests.conftest import REPO_ROOT

PACKAGES = ("base", "data", "modeling", "training", "serving", "tasks")


def _modules_with_examples():
  names = []
  for package in PACKAGES:
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
      if ">>>" in path.read_text(encoding="utf-8"):
        names.append(".".join(path.relative_to(REPO_ROOT).with_suffix("").parts))
  return names


def test_modules_with_examples_are_found():
  assert "data.tokenization" in _modules_with_examples()


@pytest.mark.parametrize("module_name", _modules_with_examples())
def test_docstring_examples_run(module_name, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  module = importlib.import_module(module_name)
  # `globs={}`: not the module's own globals, so an example that forgets an import fails.
  results = doctest.testmod(module, globs={}, optionflags=doctest.ELLIPSIS,
                            raise_on_error=False, verbose=False)
  assert results.attempted > 0
  assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed"
  assert os.getcwd() == str(tmp_path)
