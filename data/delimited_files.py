"""Reading TSV and CSV files row by row, with the line each row starts on for error messages."""

import csv

from data import file_patterns
from data import text_files


def read_rows(path, delimiter="\t", quotechar=None, strict=False, same_width=False):
  """Yields `(line_number, row)` of a delimited file (1-based lines; a UTF-8 BOM is dropped).

  As the original, TSV is read with `quotechar=None`: GLUE text holds bare `"` characters.
  `strict` makes a stray quote (`"a"b`) or an unterminated quoted field an error. `same_width`
  makes a row with more or fewer fields than the first row (the header, if any) an error: a
  delimiter inside an unquoted text (a tab in scraped text) shifts every column after it, and
  the original read the shifted cells as texts and labels.

  Raises:
    file_patterns.InputError: the file is missing, or (naming the line) is not UTF-8 or holds a
      row the csv module rejects, or (with `same_width`) a row of another width.
  """
  if not text_files.is_file(path):
    raise file_patterns.InputError(f"{path}: no such file")
  try:
    with text_files.open_text(path, newline="") as f:
      reader = csv.reader(f, delimiter=delimiter, quotechar=quotechar, strict=strict)
      # A row starts on the line after the previous row's end: `line_num` after an error is
      # where the reader stopped (for an unterminated quote, the end of the file).
      row_start, first = 1, None
      try:
        for row in reader:
          if same_width and row:
            first = first or (row_start, len(row))
            _check_width(row, first, delimiter, path, row_start)
          yield row_start, row
          row_start = reader.line_num + 1
      except csv.Error as error:
        raise file_patterns.InputError(f"{path}:{row_start}: malformed ({error})") from None
  except UnicodeDecodeError:
    raise file_patterns.InputError(f"{path}: {text_files.undecodable_problem(path)}") from None


def _check_width(row, first, delimiter, path, line_number):
  """Raises InputError naming the line when `row` has not as many fields as the first row,
  `first` = `(line number, number of fields)`."""
  first_line, width = first
  if len(row) != width:
    fields = f"{len(row)} field{'' if len(row) == 1 else 's'}"
    inside = "a tab inside a text" if delimiter == "\t" else f"an unquoted {delimiter!r} in a text"
    hint = f" ({inside}?)" if len(row) > width else ""
    raise file_patterns.InputError(
        f"{path}:{line_number}: {fields} where line {first_line} has {width}{hint}")


def column(row, index, path, line_number):
  """`row[index]`, or a clear error naming the file and line when the row is too short."""
  if index >= len(row) or index < -len(row):
    raise file_patterns.InputError(
        f"{path}:{line_number}: expected at least {max(index + 1, -index)} columns, found "
        f"{len(row)}")
  return row[index]
