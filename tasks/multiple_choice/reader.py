"""Readers of `run_multiple_choice.py`'s data: SWAG (CSV or JSON lines) and generic JSON lines.

Each example is a context and N candidate continuations, one of them right:

- `swag`: the public SWAG release's `train.csv` / `val.csv` / `test.csv` (header
  `video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0..ending3,label`, columns found by
  name; `test.csv` has no label), or the same fields as one JSON object per line (the HuggingFace
  `swag` dataset's rows). As HuggingFace's `run_swag` and the BERT paper, the context is `sent1`
  and choice i is `sent2 + " " + ending<i>` (`sent2` is the first words of every ending).
- `jsonl`: one `{"context": str, "choices": [str, ...], "label": int}` per line; `label` may be
  absent from the test file.

Every example remembers its file and line, and every problem is reported as `path:line: ...`:
malformed CSV or JSON, a missing column or field, an empty context, fewer (or more) choices than
the other examples, a label that is not a choice index.
"""

import dataclasses
import re

from base import json_files
from data import delimited_files
from data import file_patterns
from data import text_files

SWAG = "swag"
JSONL = "jsonl"
TASKS = (SWAG, JSONL)
# Files read from --data_dir: the SWAG release's names, and the classifier's train/dev/test.
DEFAULT_FILES = {
    SWAG: {"train": "train.csv", "dev": "val.csv", "test": "test.csv"},
    JSONL: {"train": "train.jsonl", "dev": "dev.jsonl", "test": "test.jsonl"},
}
# A few ASCII digits: int() refuses runs of more than 4300 digits.
_ENDING = re.compile(r"ending([0-9]{1,9})$")


@dataclasses.dataclass(frozen=True)
class MultipleChoiceExample:
  """One context with its candidate continuations.

  Attributes:
    guid: `<split>-<index>`.
    context: the text every choice follows (sentence A).
    choices: tuple of the candidate texts (sentence B of each pair).
    label: index of the right choice, or None for unlabelled test rows.
    source: `path:line`, named in errors.
  """
  guid: str
  context: str
  choices: tuple
  label: object
  source: str


def _parse_label(value, num_choices, where):
  """A choice index from an int (JSON) or a string of digits (CSV); an InputError otherwise."""
  # ASCII digits, and few: int() refuses the superscripts str.isdigit accepts ("1²") and runs of
  # more than 4300 digits.
  if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value.strip()):
    value = int(value)
  if isinstance(value, bool) or not isinstance(value, int):
    raise file_patterns.InputError(f"{where}: label {value!r} is not a choice index")
  if not 0 <= value < num_choices:
    raise file_patterns.InputError(
        f"{where}: label {value} is out of range for {num_choices} choices (0..{num_choices - 1})")
  return value


def _optional_label(value, num_choices, labelled, where):
  """The label of a row; None for a test row without one (absent, empty, or the HuggingFace
  datasets' -1)."""
  if value in (None, "") or (not labelled and value in (-1, "-1")):
    if labelled:
      raise file_patterns.InputError(f"{where}: no label")
    return None
  return _parse_label(value, num_choices, where)


def _make_example(split, index, context, choices, label, where):
  if not isinstance(context, str) or not context.strip():
    raise file_patterns.InputError(f"{where}: empty context")
  return MultipleChoiceExample(guid=f"{split}-{index}", context=context, choices=tuple(choices),
                               label=label, source=where)


def _ending_names(names, where):
  """`["ending0", ..., "ending<k>"]` of a SWAG header or record (k + 1 >= 2, no gap)."""
  indices = sorted(int(match.group(1)) for match in map(_ENDING.match, names) if match)
  if indices != list(range(len(indices))) or len(indices) < 2:
    raise file_patterns.InputError(
        f"{where}: expected columns ending0, ending1, ... (at least 2), found "
        f"{[f'ending{i}' for i in indices]}")
  return [f"ending{i}" for i in indices]


def _swag_example(split, index, fields, endings, labelled, where):
  """One SWAG row (dict field -> value) as an example: context sent1, choices sent2 + ending."""
  missing = [key for key in ["sent1", "sent2"] + endings + (["label"] if labelled else [])
             if key not in fields]
  if missing:
    raise file_patterns.InputError(f"{where}: no {', '.join(map(repr, missing))}")
  texts = [fields["sent2"]] + [fields[key] for key in endings]
  if not all(isinstance(text, str) for text in texts):
    raise file_patterns.InputError(f"{where}: sent2 and the endings must be strings")
  label = _optional_label(fields.get("label"), len(endings), labelled, where)
  choices = [f"{fields['sent2']} {ending}".strip() for ending in texts[1:]]
  return _make_example(split, index, fields["sent1"], choices, label, where)


def _read_swag_csv(path, split, labelled):
  examples, header = [], None
  for line_number, row in delimited_files.read_rows(path, ",", '"', strict=True):
    where = f"{path}:{line_number}"
    if header is None:
      header = row
      endings = _ending_names(header, where)
      needed = ["sent1", "sent2"] + (["label"] if labelled else [])
      missing = [name for name in needed if name not in header]
      if missing:
        raise file_patterns.InputError(
            f"{where}: no column {', '.join(map(repr, missing))}; the header has {header}")
      continue
    if not row:
      continue
    if len(row) != len(header):
      raise file_patterns.InputError(
          f"{where}: {len(row)} columns, but the header has {len(header)} ({len(endings)} "
          "endings)")
    examples.append(_swag_example(split, len(examples), dict(zip(header, row)), endings,
                                  labelled, where))
  return examples


def _json_lines(path):
  """Yields `(line_number, object)` of a JSON-lines file, skipping blank lines."""
  if not text_files.is_file(path):
    raise file_patterns.InputError(f"{path}: no such file")
  try:
    with text_files.open_text(path) as f:
      for line_number, line in enumerate(f, 1):
        if not line.strip():
          continue
        try:
          record = json_files.loads(line.rstrip())
        except json_files.MalformedJson as error:
          where = f" at column {error.colno}" if error.colno is not None else ""
          raise file_patterns.InputError(
              f"{path}:{line_number}: malformed JSON ({error.msg}{where})") from None
        if not isinstance(record, dict):
          raise file_patterns.InputError(f"{path}:{line_number}: expected a JSON object")
        yield line_number, record
  except UnicodeDecodeError:
    raise file_patterns.InputError(f"{path}: {text_files.undecodable_problem(path)}") from None


def _read_swag_json(path, split, labelled):
  examples = []
  for line_number, record in _json_lines(path):
    where = f"{path}:{line_number}"
    examples.append(_swag_example(split, len(examples), record, _ending_names(record, where),
                                  labelled, where))
  return examples


def _read_generic_jsonl(path, split, labelled):
  examples = []
  for line_number, record in _json_lines(path):
    where = f"{path}:{line_number}"
    for key in ("context", "choices") + (("label",) if labelled else ()):
      if key not in record:
        raise file_patterns.InputError(f"{where}: no {key!r}")
    choices = record["choices"]
    if (not isinstance(choices, list) or len(choices) < 2
        or not all(isinstance(choice, str) for choice in choices)):
      raise file_patterns.InputError(f"{where}: 'choices' must be a list of at least 2 strings")
    label = _optional_label(record.get("label"), len(choices), labelled, where)
    examples.append(_make_example(split, len(examples), record["context"], choices, label,
                                  where))
  return examples


def check_num_choices(examples, reference=None):
  """Checks that every example has as many choices as the first (or as `reference`).

  Args:
    examples: list of `MultipleChoiceExample`.
    reference: an example of another file that fixes the count, or None.

  Returns:
    the number of choices.

  Raises:
    file_patterns.InputError: naming the first example whose count differs and the reference.
  """
  reference = reference or examples[0]
  for example in examples:
    if len(example.choices) != len(reference.choices):
      raise file_patterns.InputError(
          f"{example.source}: {len(example.choices)} choices, but {reference.source} has "
          f"{len(reference.choices)}; every example needs the same number")
  return len(reference.choices)


def read_examples(task, path, split, labelled):
  """Reads one file of a task.

  Args:
    task: SWAG (`.csv` files as CSV, any other as JSON lines) or JSONL.
    path: the file.
    split: "train", "dev" or "test" (for the guids).
    labelled: every example must have a label (train and dev); test labels are optional.

  Returns:
    list of `MultipleChoiceExample`, all with the same number of choices.

  Raises:
    file_patterns.InputError: a missing or malformed file or row, naming the file and line.
  """
  if task == SWAG:
    reader = _read_swag_csv if path.lower().endswith(".csv") else _read_swag_json
  else:
    reader = _read_generic_jsonl
  examples = reader(path, split, labelled)
  if examples:
    check_num_choices(examples)
  return examples
