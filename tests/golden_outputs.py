"""Golden files of a run: what a runner wrote, kept in `tests/golden/` and compared on purpose.

A run's output directory is reduced to what its inputs and numbers decide: every text file as
written (eval results, predictions, label list, config), every record file as its parsed records
(a `tf.train.Example`'s serialisation orders its feature map differently in every process), and
an export's signatures as `{signature: (inputs, outputs)}`. Integers must be equal; other numbers are
compared with a tolerance (other processors round float32 sums differently); everything else
must be equal.

To accept an intended change of output, rewrite the golden files and commit them with the change:
  UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_runner_outputs.py
"""

import json
import math
import os
import pathlib
import re

import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2

GOLDEN_DIR = pathlib.Path(__file__).resolve().parent / "golden"
RECORDS_SUFFIX = ".records.json"
SIGNATURES_FILENAME = "export_signatures.json"

# Files whose bytes depend on the wall clock or the process, not on what the run computed.
NOT_COMPARED = ("checkpoint", ".lock")
NOT_COMPARED_PREFIXES = ("events.out.tfevents", "model.ckpt-")

RELATIVE_TOLERANCE = 1e-4
ABSOLUTE_TOLERANCE = 1e-6
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def updating():
  """Whether this run rewrites the golden files (UPDATE_GOLDEN=1) instead of comparing."""
  return os.environ.get("UPDATE_GOLDEN") == "1"


def reduce_run(output_dir, export_dir=None):
  """`{relative name: contents}` of what a run wrote: text files as text, record files as their
  records (name + `RECORDS_SUFFIX`), the export's signatures (`SIGNATURES_FILENAME`)."""
  output_dir = pathlib.Path(output_dir)
  reduced = {}
  for path in sorted(output_dir.rglob("*")):
    if (not path.is_file() or path.name in NOT_COMPARED
        or path.name.startswith(NOT_COMPARED_PREFIXES)):
      continue
    name = str(path.relative_to(output_dir))
    if path.name.endswith(".tf_record"):
      reduced[name + RECORDS_SUFFIX] = "".join(
          json.dumps(record, sort_keys=True) + "\n" for record in _records(path))
    else:
      reduced[name] = path.read_text(encoding="utf-8")
  if export_dir is not None:
    reduced[SIGNATURES_FILENAME] = json.dumps(_signatures(pathlib.Path(export_dir)), indent=1,
                                              sort_keys=True) + "\n"
  return reduced


def write(golden_dir, reduced):
  """Replaces `golden_dir`'s files by `reduced`."""
  golden_dir = pathlib.Path(golden_dir)
  if golden_dir.exists():
    for path in golden_dir.rglob("*"):
      if path.is_file():
        path.unlink()
  for name, text in reduced.items():
    path = golden_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def read(golden_dir):
  """`{relative name: text}` of the golden files in `golden_dir`."""
  golden_dir = pathlib.Path(golden_dir)
  return {str(path.relative_to(golden_dir)): path.read_text(encoding="utf-8")
          for path in sorted(golden_dir.rglob("*")) if path.is_file()}


def differences(expected, actual):
  """The names whose contents differ beyond the tolerance, with the first difference of each;
  names present on one side only are differences too."""
  found = []
  for name in sorted(set(expected) | set(actual)):
    if name not in actual:
      found.append(f"{name}: missing from the run")
    elif name not in expected:
      found.append(f"{name}: not in the golden files")
    else:
      difference = _text_difference(expected[name], actual[name])
      if difference:
        found.append(f"{name}: {difference}")
  return found


def _text_difference(expected, actual):
  """The first difference of two texts, numbers compared within the tolerance; None if none."""
  expected_numbers, actual_numbers = _NUMBER.findall(expected), _NUMBER.findall(actual)
  if _NUMBER.sub("#", expected) != _NUMBER.sub("#", actual):
    return "the text around the numbers differs"
  for index, (a, b) in enumerate(zip(expected_numbers, actual_numbers)):
    if _is_integer(a) and _is_integer(b):
      if a != b:
        return f"number {index}: golden {a}, run {b}"
    elif not math.isclose(float(a), float(b), rel_tol=RELATIVE_TOLERANCE,
                        abs_tol=ABSOLUTE_TOLERANCE):
      return f"number {index}: golden {a}, run {b}"
  return None


def _is_integer(text):
  return not any(c in text for c in ".eE")


def _records(path):
  records = []
  for serialized in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
    example = tf.train.Example.FromString(serialized)
    records.append({name: [float(v) if isinstance(v, float) else v
                           for v in getattr(feature, feature.WhichOneof("kind")).value]
                    if feature.WhichOneof("kind") != "bytes_list"
                    else [v.decode("utf-8", "backslashreplace")
                          for v in feature.bytes_list.value]
                    for name, feature in sorted(example.features.feature.items())})
  return records


def _signatures(export_dir):
  """`{signature: {"inputs": ..., "outputs": ...}}` of a SavedModel, each `{key: [dtype name,
  shape]}`."""
  saved_model = saved_model_pb2.SavedModel()
  saved_model.ParseFromString((export_dir / "saved_model.pb").read_bytes())

  def describe(tensors):
    return {key: [types_pb2.DataType.Name(info.dtype),
                  [dim.size for dim in info.tensor_shape.dim]]
            for key, info in sorted(tensors.items())}
  return {name: {"inputs": describe(signature.inputs), "outputs": describe(signature.outputs)}
          for name, signature in sorted(saved_model.meta_graphs[0].signature_def.items())}
