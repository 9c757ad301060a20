"""Parsing the JSON users feed (SQuAD files, JSON lines, `bert_config.json`), for any text.

`json.loads` refuses most bad text with a `JSONDecodeError` that says where, but a number of more
digits than Python converts raises a bare `ValueError`, and nesting deeper than the parser's
recursion limit a `RecursionError`; `loads` turns all three into one `MalformedJson`.
"""

import json
import sys


class MalformedJson(ValueError):
  """Text that is not JSON this program can read.

  Attributes:
    msg: what is wrong, in a few words.
    lineno, colno: where (1-based), or None when the parser does not say.
  """

  def __init__(self, msg, lineno=None, colno=None):
    where = f" at line {lineno} column {colno}" if lineno is not None else ""
    super().__init__(msg + where)
    self.msg, self.lineno, self.colno = msg, lineno, colno


def loads(text):
  """`json.loads(text)`, raising `MalformedJson` for any text it cannot read."""
  try:
    return json.loads(text)
  except json.JSONDecodeError as error:
    raise MalformedJson(error.msg, error.lineno, error.colno) from None
  except RecursionError:
    raise MalformedJson("arrays or objects nested too deeply") from None
  except ValueError:
    # int() refuses a literal longer than this (CVE-2020-10735).
    raise MalformedJson(f"a number of more than {sys.get_int_max_str_digits()} digits") from None
