"""Readers of `run_classifier.py`'s data: the GLUE tasks, XNLI, and a user's own TSV/CSV files.

Each processor turns `train`/`dev`/`test` files of `--data_dir` into `InputExample`s, as the
original's `DataProcessor`s: `get_train_examples`, `get_dev_examples`, `get_test_examples`,
`get_labels`. The original had CoLA, MNLI, MRPC and XNLI (with "zh" hard-coded); SST-2, QQP, QNLI,
RTE, WNLI, STS-B (regression), MNLI mismatched and the generic `tsv`/`csv` reader are added here.

Every example remembers the file and line it came from, so a missing column or an unknown label is
reported as `train.tsv:17: ...`. A row with more or fewer fields than the file's first row (a tab
inside a text shifts the label into another column) is an error too.
"""

import dataclasses
import math
import os

from data import delimited_files
from data import file_patterns
from tasks import classifier



@dataclasses.dataclass(frozen=True)
class InputExample:
  """One example to classify.

  Attributes:
    guid: `<split>-<row>` (or the file's own id column where the original used it).
    text_a: the first (or only) text.
    text_b: the second text of a pair task, else None.
    label: a label string (classification), a float (regression), a tuple of label strings
      (multi-label), or None for unlabelled test rows.
    source: `path:line`, named in errors.
  """
  guid: str
  text_a: str
  text_b: str
  label: object
  source: str


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where the texts and the label are in one file of a GLUE-style task.

  Attributes:
    filename: the file in `--data_dir`.
    text_a, text_b, label: column indices (`text_b`/`label` None when absent; label -1 = last).
    header: the first line is a header.
    guid: column of the example id, or None to number the rows.
    fixed_label: label given to every row (the original's dummy test labels), or None.
    keep: optional `row -> bool` filter (XNLI's language column).
  """
  filename: str
  text_a: int
  text_b: int = None
  label: int = None
  header: bool = True
  guid: int = None
  fixed_label: str = None
  keep: object = None

  def min_columns(self, labelled):
    """Columns every row must have."""
    used = [self.text_a, self.text_b, self.guid] + ([self.label] if labelled else [])
    return max(index + 1 if index >= 0 else -index for index in used if index is not None)


class DataProcessor:
  """Reads a task's train/dev/test files from `data_dir`.

  Attributes:
    name: the `--task_name`.
    kind: a `tasks.classifier` kind.
    metrics: names of the task's metrics beyond those every task of its kind gets (see
      `tasks.classifier.compute`).
  """

  kind = classifier.CLASSIFICATION
  metrics = ()

  def __init__(self, name, labels, train, dev, test=None, label_map=None, metrics=None,
               kind=None):
    self.name = name
    self._labels = list(labels)
    self._layouts = {"train": train, "dev": dev, "test": test}
    self._label_map = label_map or {}
    if metrics is not None:
      self.metrics = metrics
    if kind is not None:
      self.kind = kind

  @property
  def has_pairs(self):
    """Whether examples have a second text."""
    return self._layouts["train"].text_b is not None

  def get_labels(self):
    """The label list (class index = position); empty for regression."""
    return list(self._labels)

  def get_train_examples(self, data_dir):
    return self._read(data_dir, "train")

  def get_dev_examples(self, data_dir):
    return self._read(data_dir, "dev")

  def get_test_examples(self, data_dir):
    return self._read(data_dir, "test")

  def _read(self, data_dir, split):
    layout = self._layouts[split]
    if layout is None:
      raise file_patterns.InputError(f"task {self.name!r} has no {split} set")
    path = os.path.join(data_dir, layout.filename)
    examples = []
    for line_number, row in delimited_files.read_rows(path, same_width=True):
      if layout.header and line_number == 1:
        continue
      needs_label = layout.label is not None and layout.fixed_label is None
      if len(row) < layout.min_columns(needs_label):
        raise file_patterns.InputError(
            f"{path}:{line_number}: expected at least {layout.min_columns(needs_label)} "
            f"tab-separated columns for task {self.name!r}, found {len(row)}")
      if layout.keep is not None and not layout.keep(row, path, line_number):
        continue
      cell = lambda index: delimited_files.column(row, index, path, line_number)
      guid_value = cell(layout.guid) if layout.guid is not None else str(len(examples))
      if layout.fixed_label is not None:
        label = layout.fixed_label
      elif layout.label is None:
        label = None
      else:
        label = self._parse_label(cell(layout.label), path, line_number)
      examples.append(InputExample(
          guid=f"{split}-{guid_value}", text_a=cell(layout.text_a),
          text_b=cell(layout.text_b) if layout.text_b is not None else None, label=label,
          source=f"{path}:{line_number}"))
    return examples

  def _parse_label(self, text, path, line_number):
    label = self._label_map.get(text, text)
    if self.kind == classifier.REGRESSION:
      return _regression_label(label, path, line_number)
    return label


def _regression_label(text, path, line_number):
  """The number a regression label cell holds; an InputError naming the line for anything else,
  "nan" and "inf" included (float() takes them, and one makes the whole loss NaN)."""
  try:
    value = float(text)
  except ValueError:
    value = math.nan
  if not math.isfinite(value):
    raise file_patterns.InputError(f"{path}:{line_number}: label {text!r} is not a number")
  return value


def _xnli_processor(language):
  def is_language(row, path, line_number):
    return delimited_files.column(row, 0, path, line_number) == language
  return DataProcessor(
      "xnli", ["contradiction", "entailment", "neutral"],
      train=Layout(f"multinli/multinli.train.{language}.tsv", text_a=0, text_b=1, label=2),
      dev=Layout("xnli.dev.tsv", text_a=6, text_b=7, label=1, keep=is_language),
      test=Layout("xnli.test.tsv", text_a=6, text_b=7, label=1, keep=is_language),
      label_map={"contradictory": "contradiction"})


def glue_processors(xnli_language="zh"):
  """{task_name: DataProcessor} of the GLUE tasks and XNLI, in the GLUE files' layouts."""
  nli_labels = ["contradiction", "entailment", "neutral"]
  entailment_labels = ["entailment", "not_entailment"]
  return {
      "cola": DataProcessor(
          "cola", ["0", "1"], metrics=("matthews_corrcoef",),
          train=Layout("train.tsv", text_a=3, label=1, header=False),
          dev=Layout("dev.tsv", text_a=3, label=1, header=False),
          test=Layout("test.tsv", text_a=1, guid=0)),
      "mnli": DataProcessor(
          "mnli", nli_labels,
          train=Layout("train.tsv", text_a=8, text_b=9, label=-1, guid=0),
          dev=Layout("dev_matched.tsv", text_a=8, text_b=9, label=-1, guid=0),
          test=Layout("test_matched.tsv", text_a=8, text_b=9, guid=0,
                      fixed_label="contradiction")),
      "mnli-mm": DataProcessor(
          "mnli-mm", nli_labels,
          train=Layout("train.tsv", text_a=8, text_b=9, label=-1, guid=0),
          dev=Layout("dev_mismatched.tsv", text_a=8, text_b=9, label=-1, guid=0),
          test=Layout("test_mismatched.tsv", text_a=8, text_b=9, guid=0,
                      fixed_label="contradiction")),
      "mrpc": DataProcessor(
          "mrpc", ["0", "1"], metrics=("f1",),
          train=Layout("train.tsv", text_a=3, text_b=4, label=0),
          dev=Layout("dev.tsv", text_a=3, text_b=4, label=0),
          test=Layout("test.tsv", text_a=3, text_b=4, fixed_label="0")),
      "xnli": _xnli_processor(xnli_language),
      "sst-2": DataProcessor(
          "sst-2", ["0", "1"],
          train=Layout("train.tsv", text_a=0, label=1),
          dev=Layout("dev.tsv", text_a=0, label=1),
          test=Layout("test.tsv", text_a=1, guid=0)),
      "qqp": DataProcessor(
          "qqp", ["0", "1"], metrics=("f1",),
          train=Layout("train.tsv", text_a=3, text_b=4, label=5, guid=0),
          dev=Layout("dev.tsv", text_a=3, text_b=4, label=5, guid=0),
          test=Layout("test.tsv", text_a=1, text_b=2, guid=0)),
      "qnli": DataProcessor(
          "qnli", entailment_labels,
          train=Layout("train.tsv", text_a=1, text_b=2, label=-1, guid=0),
          dev=Layout("dev.tsv", text_a=1, text_b=2, label=-1, guid=0),
          test=Layout("test.tsv", text_a=1, text_b=2, guid=0)),
      "rte": DataProcessor(
          "rte", entailment_labels,
          train=Layout("train.tsv", text_a=1, text_b=2, label=-1, guid=0),
          dev=Layout("dev.tsv", text_a=1, text_b=2, label=-1, guid=0),
          test=Layout("test.tsv", text_a=1, text_b=2, guid=0)),
      "wnli": DataProcessor(
          "wnli", ["0", "1"],
          train=Layout("train.tsv", text_a=1, text_b=2, label=-1, guid=0),
          dev=Layout("dev.tsv", text_a=1, text_b=2, label=-1, guid=0),
          test=Layout("test.tsv", text_a=1, text_b=2, guid=0)),
      "sts-b": DataProcessor(
          "sts-b", [], kind=classifier.REGRESSION, metrics=("pearson", "spearman"),
          train=Layout("train.tsv", text_a=7, text_b=8, label=-1, guid=0),
          dev=Layout("dev.tsv", text_a=7, text_b=8, label=-1, guid=0),
          test=Layout("test.tsv", text_a=7, text_b=8, guid=0)),
  }


GENERIC_TASKS = {"tsv": "\t", "csv": ","}


class GenericProcessor:
  """A user's own `train`/`dev`/`test` `.tsv` or `.csv` files in `data_dir`.

  Args:
    file_format: "tsv" or "csv" (CSV honours `"` quoting; TSV reads quotes literally, as GLUE).
    text_a_column, text_b_column, label_column: column names (with a header) or 0-based indices;
      `text_b_column` None for single texts; `label_column` may be absent from the test file.
    has_header: the first line of each file names the columns.
    labels: the label list, or None to use the sorted labels of the training file.
    multi_label: each label cell holds several labels joined by `label_separator`.
    regression: labels are numbers (one output, mean-squared-error loss).

  Example:
    >>> from tasks.classification import reader
    >>> _ = open("train.csv", "w").write("review,stars\\ngreat,5\\nbad,1\\n")
    >>> processor = reader.GenericProcessor("csv", "review", None, "stars", has_header=True)
    >>> [(example.text_a, example.label) for example in processor.get_train_examples(".")]
    [('great', '5'), ('bad', '1')]
  """

  def __init__(self, file_format, text_a_column, text_b_column, label_column, has_header=True,
               labels=None, multi_label=False, label_separator=",", regression=False):
    self.name = file_format
    self.delimiter = GENERIC_TASKS[file_format]
    self.columns = {"text_a": text_a_column, "text_b": text_b_column, "label": label_column}
    self.has_header = has_header
    self._labels = list(labels) if labels else None
    self.label_separator = label_separator
    self.kind = (classifier.REGRESSION if regression else
                 classifier.MULTI_LABEL if multi_label else classifier.CLASSIFICATION)
    self.metrics = ("pearson", "spearman") if regression else ()

  @property
  def has_pairs(self):
    """Whether examples have a second text."""
    return self.columns["text_b"] is not None

  def get_labels(self):
    """The given label list, else the sorted labels of the training file (read once)."""
    if self.kind == classifier.REGRESSION:
      return []
    if self._labels is None:
      raise ValueError("labels are inferred from the training file: call get_train_examples "
                       "first or give them")
    return list(self._labels)

  def infer_labels(self, train_examples):
    """Sets the label list from the training examples when none was given."""
    if self._labels is None and self.kind != classifier.REGRESSION:
      found = set()
      for example in train_examples:
        found.update(example.label if self.kind == classifier.MULTI_LABEL else [example.label])
      self._labels = sorted(found)

  def get_train_examples(self, data_dir):
    return self._read(data_dir, "train", labelled=True)

  def get_dev_examples(self, data_dir):
    return self._read(data_dir, "dev", labelled=True)

  def get_test_examples(self, data_dir):
    return self._read(data_dir, "test", labelled=False)

  def _column_indices(self, header, path, labelled):
    indices = {}
    for role, spec in self.columns.items():
      if spec is None:
        continue
      if str(spec).lstrip("-").isdigit():
        indices[role] = int(spec)
      elif header is None:
        raise file_patterns.InputError(
            f"--{role}_column={spec!r} is a name, but the files have no header "
            "(give a 0-based index)")
      elif spec in header:
        indices[role] = header.index(spec)
      elif role != "label" or labelled:
        raise file_patterns.InputError(
            f"{path}:1: no column {spec!r} for --{role}_column; the header has {header}")
    return indices

  def _read(self, data_dir, split, labelled):
    path = os.path.join(data_dir, f"{split}.{self.name}")
    quotechar = '"' if self.name == "csv" else None
    examples, indices = [], None
    for line_number, row in delimited_files.read_rows(path, self.delimiter, quotechar,
                                                      same_width=True):
      if indices is None:
        header = row if self.has_header else None
        indices = self._column_indices(header, path, labelled)
        if self.has_header:
          continue
      if not row:
        continue
      cell = lambda role: delimited_files.column(row, indices[role], path, line_number)
      label = None
      if "label" in indices and (labelled or indices["label"] < len(row)):
        label = self._parse_label(cell("label"), path, line_number)
      examples.append(InputExample(
          guid=f"{split}-{len(examples)}", text_a=cell("text_a"),
          text_b=cell("text_b") if "text_b" in indices else None, label=label,
          source=f"{path}:{line_number}"))
    return examples

  def _parse_label(self, text, path, line_number):
    if self.kind == classifier.REGRESSION:
      return _regression_label(text, path, line_number)
    if self.kind == classifier.MULTI_LABEL:
      return tuple(sorted({part.strip() for part in text.split(self.label_separator)
                           if part.strip()}))
    return text


def task_names():
  """Every accepted `--task_name`."""
  return sorted(glue_processors()) + sorted(GENERIC_TASKS)
