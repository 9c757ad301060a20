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
