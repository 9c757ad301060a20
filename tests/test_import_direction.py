"""Imports point down: base <- data, modeling <- training, serving <- tasks <- scripts.

`base` imports nothing of the project; `data` and `modeling` only `base`; `training` and `serving`
(side by side: the engine never imports serving) those three; `tasks` everything below it, and a
task family (`tasks/<family>/`) no other family. Nothing imports a script, a test, a benchmark or
an example.
"""

import ast
import pathlib

from tests.conftest import REPO_ROOT

PACKAGES = ("base", "data", "modeling", "training", "serving", "tasks")
ALLOWED = {
    "base": set(),
    "data": {"base"},
    "modeling": {"base"},
    "training": {"base", "data", "modeling"},
    "serving": {"base", "data", "modeling"},
    "tasks": {"base", "data", "modeling", "training", "serving", "tasks"},
}
SCRIPTS = {path.stem for path in REPO_ROOT.glob("*.py")}
NEVER_IMPORTED = {"tests", "benchmarks", "examples", "scripts"} | SCRIPTS


def imported_modules(source):
  """The dotted names a module's source imports (`from a import b` gives `a.b`)."""
  names = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import):
      names.extend(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      names.extend(f"{node.module}.{alias.name}" for alias in node.names)
  return names


def wrong_way_imports(module_path, source):
  """`[(imported name, reason)]` for each import of `source` (the module at `module_path`,
  relative to the repository root) that breaks the rule above."""
  parts = pathlib.PurePosixPath(module_path).with_suffix("").parts
  package = parts[0]
  family = parts[1] if package == "tasks" and len(parts) > 2 else None
  problems = []
  for name in imported_modules(source):
    top = name.split(".")[0]
    if top in NEVER_IMPORTED:
      problems.append((name, f"nothing imports {top}"))
    elif top in PACKAGES and top != package and top not in ALLOWED[package]:
      problems.append((name, f"{package} may import only {sorted(ALLOWED[package]) or 'nothing'}"))
    elif top == "tasks" and package == "tasks":
      imported = name.split(".")
      other = imported[1] if len(imported) > 2 else None
      if other is not None and other != family and (REPO_ROOT / "tasks" / other).is_dir():
        problems.append((name, f"task family {family or 'tasks'} imports family {other}"))
  return problems


def test_the_checker_flags_wrong_way_imports():
  assert wrong_way_imports("training/engine.py", "from serving import saved_model_export") == [
      ("serving.saved_model_export", "training may import only ['base', 'data', 'modeling']")]
  assert wrong_way_imports("base/cli.py", "import data.tokenization")
  assert wrong_way_imports("tasks/ner/task.py", "from tasks.squad import features")
  assert wrong_way_imports("data/schemas.py", "from tests import conftest")
  assert wrong_way_imports("tasks/ner/task.py", "from tasks.ner import features") == []
  assert wrong_way_imports("serving/servable.py", "from modeling import keras_variables") == []


def test_every_module_imports_only_downwards():
  problems = []
  for package in PACKAGES:
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
      relative = path.relative_to(REPO_ROOT).as_posix()
      problems.extend(f"{relative}: imports {name} ({reason})"
                      for name, reason in wrong_way_imports(relative, path.read_text()))
  assert not problems, "\n".join(problems)


# Started first, TensorFlow would miss what `base` sets before importing it (the log level,
# oneDNN on x86-64): a process must import `base`, or a package that imports it, first.
STARTS_TENSORFLOW = {"tensorflow", "keras", "tensorflow_text"}


def tensorflow_started_before_base(source):
  """The first module-level import of `source` that starts TensorFlow before `base` or a
  package that imports it; None when there is none."""
  for node in ast.parse(source).body:
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      names = [node.module]
    else:
      continue
    for name in names:
      if name.split(".")[0] in PACKAGES:
        return None
      if name.split(".")[0] in STARTS_TENSORFLOW:
        return name
  return None


def test_the_start_checker_finds_tensorflow_before_base():
  assert tensorflow_started_before_base("import os\nimport keras\nimport base\n") == "keras"
  assert tensorflow_started_before_base("from tensorflow.tsl import x\nimport base\n")
  assert tensorflow_started_before_base("import base\nimport tensorflow as tf\n") is None
  assert tensorflow_started_before_base("from data import wikitext\nimport keras\n") is None
  assert tensorflow_started_before_base("def f():\n  import tensorflow\n") is None


def test_every_entry_point_starts_tensorflow_through_base():
  entry_points = [path for pattern in ("*.py", "benchmarks/*.py", "examples/*.py")
                  for path in sorted(REPO_ROOT.glob(pattern))
                  if "__main__" in path.read_text()]
  problems = [f"{path.relative_to(REPO_ROOT)}: imports {name} before base"
              for path in entry_points
              if (name := tensorflow_started_before_base(path.read_text()))]
  assert len(entry_points) > 20 and not problems, "\n".join(problems)


def test_no_script_imports_another_script():
  problems = [f"{path.name}: imports {name}"
              for path in sorted(REPO_ROOT.glob("*.py"))
              for name in imported_modules(path.read_text())
              if name.split(".")[0] in SCRIPTS]
  assert not problems, "\n".join(problems)


# The command-line entry, which parses the process's flags into a config; nothing else below the
# scripts reads them.
READS_GLOBAL_FLAGS = {"base/cli.py"}


def global_flag_reads(source):
  """The lines of `source` that name absl's global `FLAGS` (`flags.FLAGS`, or a bare `FLAGS`)."""
  return sorted({node.lineno for node in ast.walk(ast.parse(source))
                 if (isinstance(node, ast.Attribute) and node.attr == "FLAGS")
                 or (isinstance(node, ast.Name) and node.id == "FLAGS")})


def test_the_flag_checker_finds_global_flags():
  assert global_flag_reads("from absl import flags\nx = flags.FLAGS.output_dir\n") == [2]
  assert global_flag_reads("def f(flag_values=flags.FLAGS):\n  pass\n") == [1]
  assert global_flag_reads("FLAGS = None\n") == [1]
  assert global_flag_reads("def f(config):\n  return config.output_dir\n") == []


def test_nothing_below_the_scripts_reads_global_flags():
  problems = []
  for package in PACKAGES:
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
      relative = path.relative_to(REPO_ROOT).as_posix()
      if relative not in READS_GLOBAL_FLAGS:
        problems.extend(f"{relative}:{line}: reads absl's global FLAGS (take a config instead)"
                        for line in global_flag_reads(path.read_text()))
  assert not problems, "\n".join(problems)
