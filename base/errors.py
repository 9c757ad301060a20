"""The one base class of the errors a user can fix (a flag, a file, a checkpoint, a config).

`base.cli.run_config` catches `UserError` and prints its message as one line, `<script>: error: ...`,
with exit status 1; any other exception is a bug and keeps its traceback. Each package's errors
derive from `UserError` and from the built-in class callers may already catch (`ValueError`,
`RuntimeError`).
"""


class UserError(Exception):
  """A problem the user can fix, described in one line that names the flag, file or key."""


class UsageError(UserError, ValueError):
  """A flag value a script cannot use (named in the message)."""


class ConfigError(UserError, ValueError):
  """A run's settings are inconsistent (e.g. a batch size the replicas cannot split), or a
  `bert_config.json` is missing, malformed, or holds an invalid value."""


class StoppedBySignal(Exception):
  """A run stopped on a termination signal, having saved what it needs to resume (training) or
  taken back what it had written (data creation). `base.cli`
  prints the message as one line and exits with 128 + the signal's number, the status of a
  process the signal ended, so that a job scheduler sees the run as interrupted, not failed.

  Args:
    message: what was saved and how to resume, or what was left.
    signal_number: the signal received, e.g. `signal.SIGTERM`.
  """

  def __init__(self, message, signal_number):
    super().__init__(message)
    self.signal_number = signal_number
