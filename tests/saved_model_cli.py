"""`saved_model_cli` for the export tests: it loads a SavedModel the TF1 way, as TensorFlow Serving
does, so its listing and its `run` are what a server would see."""

import re

from tests import scripts


def run(*args, with_text_ops=False):
  """Runs `saved_model_cli *args` in a new process and returns its stdout.

  Args:
    *args: the command line after `saved_model_cli` (paths may be `pathlib.Path`).
    with_text_ops: register the tensorflow-text ops first, as a TF Serving build that links them.
  """
  imports = "import tensorflow_text; " if with_text_ops else ""
  code = (f"import sys; {imports}from tensorflow.python.tools import saved_model_cli; "
          "sys.exit(saved_model_cli.main())")
  return scripts.run_python(code, *args)


def signatures(export_path):
  """The signatures `saved_model_cli show --all` lists for the `serve` tag.

  Returns:
    {signature name: {"inputs": {name: (dtype, shape)}, "outputs": {name: (dtype, shape)}}},
    e.g. `{"predict_ids": {"inputs": {"input_ids": ("DT_INT32", "(-1, -1)")}, ...}}`.
  """
  listing = run("show", "--all", "--dir", export_path)
  listed = {}
  for name, body in re.findall(r"signature_def\['(\w+)'\]:(.*?)Method name", listing, re.S):
    listed[name] = {kind: {tensor: (dtype, shape) for tensor, dtype, shape in re.findall(
        rf"{kind}\['(\w+)'\] tensor_info:\s+dtype: (\w+)\s+shape: (\([-\d, ]*\)|unknown_rank)",
        body)} for kind in ("inputs", "outputs")}
  return listed
