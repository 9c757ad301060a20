"""The Python API: `run(config)` in process, as README.md's "Python API" section shows it.

`examples/python_api.py` is that section's code; here it runs on a tiny model laid out as
`make demo` leaves its files, two families back to back in this one interpreter.
"""

import json
import os
import pathlib
import re
import runpy

import pytest

from modeling import bert_config
from modeling import checkpoint_io
from modeling import pretraining_model
from tests.conftest import REPO_ROOT
from tests.conftest import SAMPLES_DIR

EXAMPLE = REPO_ROOT / "examples" / "python_api.py"


def _example_code():
  """The example's code after its docstring."""
  text = EXAMPLE.read_text(encoding="utf-8")
  return text[text.index('"""', 3) + 3:].strip()


def test_the_readme_shows_the_example_that_runs():
  readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
  section = readme[readme.index("\n## Python API\n"):]
  block = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL).group(1)
  assert block.strip() == _example_code()


@pytest.fixture
def demo_layout(tiny_model, tmp_path, monkeypatch):
  """A working directory with `samples/` and a `demo_output/` holding the tiny model's vocab,
  config and a pretraining checkpoint, as `make demo` leaves them."""
  vocab_file, config_file = tiny_model
  demo_output = tmp_path / "demo_output"
  (demo_output / "pretraining_output").mkdir(parents=True)
  (demo_output / "vocab.txt").write_text(pathlib.Path(vocab_file).read_text(encoding="utf-8"),
                                         encoding="utf-8")
  config = json.loads(pathlib.Path(config_file).read_text())
  (demo_output / "bert_config.json").write_text(json.dumps(config))
  model = pretraining_model.BertPretrainingModel(bert_config.BertConfig.from_dict(config))
  checkpoint_io.write_checkpoint(str(demo_output / "pretraining_output" / "model.ckpt-1"),
                                 model.name_to_variable())
  (demo_output / "pretraining_output" / "checkpoint").write_text(
      'model_checkpoint_path: "model.ckpt-1"\n')
  os.symlink(SAMPLES_DIR, tmp_path / "samples")
  monkeypatch.chdir(tmp_path)
  return demo_output


@pytest.mark.slow
def test_two_families_run_back_to_back_in_one_process(demo_layout, capsys):
  namespace = runpy.run_path(str(EXAMPLE), run_name="__main__")
  classifier, tagger = namespace["classifier"], namespace["tagger"]
  printed = capsys.readouterr().out
  assert classifier.output_dir == "demo_output/python_api/classifier"
  assert tagger.output_dir == "demo_output/python_api/ner"
  # Each result is what its run wrote, and the two runs did not mix.
  for result in (classifier, tagger):
    lines = (demo_layout / "python_api" / pathlib.Path(result.output_dir).name /
             "eval_results.txt").read_text().splitlines()
    assert {line.split(" = ")[0]: float(line.split(" = ")[1]) for line in lines} == pytest.approx(
        result.metrics)
  assert "eval_accuracy" in classifier.metrics and "f1" not in classifier.metrics
  assert "f1" in tagger.metrics and "eval_accuracy" not in tagger.metrics
  assert (demo_layout / "python_api" / "classifier" / "label_list.txt").read_text().split() == [
      "craft", "food", "nature"]
  assert sorted(classifier.record_files) == ["eval", "train"]
  assert classifier.export_path == "demo_output/python_api/export/" + os.listdir(
      demo_layout / "python_api" / "export")[0]
  assert re.search(r"export: (craft|food|nature) \[", printed), printed
  # Both runs released their output directories.
  assert not (demo_layout / "python_api" / "classifier" / ".lock").exists()
  assert not (demo_layout / "python_api" / "ner" / ".lock").exists()
