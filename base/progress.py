"""Progress of long jobs: a live bar on a terminal, periodic log lines otherwise."""

import sys
import time

from absl import logging


def format_duration(seconds):
  seconds = int(round(seconds))
  return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
  """Counts finished units of work and reports rate and ETA.

  On a terminal the report is one line redrawn in place at most every `refresh_seconds`; when
  stderr is a file or pipe (batch jobs, CI) it is an absl log line every `log_seconds`.

  Args:
    total: number of units expected, or None if unknown (no ETA then).
    unit: name of a unit, e.g. "lines".
    refresh_seconds: redraw period on a terminal.
    log_seconds: log period otherwise.
    stream: where the terminal bar goes (default stderr).
    count_format: format spec of the counts (e.g. ",.1f" for megabytes).

  Example:
    >>> from base import progress as progress_lib
    >>> progress = progress_lib.Progress(total=1000, unit="lines")
    >>> for batch in [list(range(100))] * 10:
    ...   progress.update(len(batch))
    >>> progress.close()
  """

  def __init__(self, total=None, unit="items", refresh_seconds=0.5, log_seconds=30.0,
               stream=None, count_format=",.0f"):
    self.total = total
    self.unit = unit
    self.stream = stream or sys.stderr
    self.interactive = self.stream.isatty()
    self.period = refresh_seconds if self.interactive else log_seconds
    self.count_format = count_format
    self.count = 0
    self.detail = ""
    self.start = time.monotonic()
    self.last_report = self.start

  def message(self):
    elapsed = max(time.monotonic() - self.start, 1e-9)
    rate = self.count / elapsed
    text = format(self.count, self.count_format)
    if self.total:
      text += f"/{self.total:{self.count_format}} ({100.0 * self.count / self.total:.0f}%)"
    text += f" {self.unit}, {rate:,.1f} {self.unit}/s, elapsed {format_duration(elapsed)}"
    if self.total and rate > 0:
      text += f", ETA {format_duration(max(self.total - self.count, 0) / rate)}"
    return text + self.detail

  def update(self, count=1, detail=None):
    """Adds `count` finished units and reports if the period has passed.

    Args:
      count: units finished since the last call.
      detail: optional text appended to the report (e.g. other counters and their rates).
    """
    self.count += count
    if detail is not None:
      self.detail = detail
    now = time.monotonic()
    if now - self.last_report >= self.period:
      self.last_report = now
      self._report()

  def _report(self):
    if self.interactive:
      self.stream.write("\r" + self.message())
      self.stream.flush()
    else:
      logging.info("%s", self.message())

  def close(self):
    """Reports the final count (and ends the terminal line)."""
    self._report()
    if self.interactive:
      self.stream.write("\n")
      self.stream.flush()
