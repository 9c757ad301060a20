"""Reading TSV and CSV files row by row, with the line each row starts on for error messages."""

import csv

from data import file_patterns
from data import text_files


def read_rows(path, delimiter="\t", quotechar=None, strict=False):
  """Yields `(line_number, row)` of a delimited file (1-based lines; a UTF-8 BOM is dropped).

  As the original, TSV is read with `quotechar=None`: GLUE text holds bare `"` characters.
  `strict` makes a stray quote (`"a"b`) or an unterminated quoted field an error.

  Raises:
    file_patterns.InputError: the file is missing or is not UTF-8, or (naming the line) a row the
      csv module rejects.
  """
  if not text_files.is_file(path):
    raise file_patterns.InputError(f"{path}: no such file")
  try:
    with text_files.open_text(path, newline="") as f:
      reader = csv.reader(f, delimiter=delimiter, quotechar=quotechar, strict=strict)
      # A row starts on the line after the previous row's end: `line_num` after an error is
      # where the reader stopped (for an unterminated quote, the end of the file).
      row_start = 1
      try:
        for row in reader:
          yield row_start, row
          row_start = reader.line_num + 1
      except csv.Error as error:
        raise file_patterns.InputError(f"{path}:{row_start}: malformed ({error})") from None
  except UnicodeDecodeError as error:
    raise file_patterns.InputError(f"{path}: not UTF-8 text ({error.reason} at byte "
                                   f"{error.start})") from None


def column(row, index, path, line_number):
  """`row[index]`, or a clear error naming the file and line when the row is too short."""
  if index >= len(row) or index < -len(row):
    raise file_patterns.InputError(
        f"{path}:{line_number}: expected at least {max(index + 1, -index)} columns, found "
        f"{len(row)}")
  return row[index]
