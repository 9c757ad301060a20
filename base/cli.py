"""Entry point of the scripts: `run_config`, an absl app that builds a run's typed config from the
flags, whose bad-input errors end in one line, exit status 1, and whose --help lists every flag
the script accepts, grouped."""

import functools
import os
import sys

from absl import app
from absl import flags
import tensorflow as tf

from base import atomic_files
from base import errors

# Flag name -> title of its group in --help (filled by `base.config.FlagConfig.define_flags`).
HELP_GROUP_OF_FLAG = {}


HELP_ARGUMENTS = ("-h", "-?", "-help", "--help", "-helpshort", "--helpshort")

# Titles of the groups of flags that absl and TensorFlow define themselves, listed last.
ABSL_GROUP = "absl: flag files (--flagfile), logging, help"
TENSORFLOW_GROUP = "TensorFlow's own (rarely needed)"


def run_config(config_class, run):
  """The entry point of a script whose run is a function of a typed config
  (`base.config.FlagConfig`): its flags defined from `config_class`, parsed as `run` parses
  them (grouped --help, one-line errors), the config built from them and passed to `run`, which
  validates it and claims its outputs.

  The words of flags the script does not define are an error, unless `config_class` takes them
  (its `UNKNOWN_ARGS_FIELD`).
  """
  config_class.define_flags(flags.FLAGS)

  def main(argv):
    try:
      run(config_class.from_flags(flags.FLAGS, argv[1:]))
    except Exception as exception:  # pylint: disable=broad-except
      ending = failure(sys.argv[0], exception)
      if ending is None:
        raise
      line, status = ending
      print(line, file=sys.stderr)
      sys.exit(status)
  app.run(main, flags_parser=functools.partial(
      _parse_flags_or_print_help, known_only=config_class.UNKNOWN_ARGS_FIELD is not None))


def failure(script, exception):
  """`(line, exit status)` of an exception that ends a run the user can act on: a
  `errors.UserError` (status 1), a full file system (status 1), a stop on a signal after saving
  (128 + the signal); None for any other exception, a bug, which keeps its traceback."""
  if isinstance(exception, errors.UserError):
    return error_line(script, exception), 1
  if isinstance(exception, errors.StoppedBySignal):
    return f"{os.path.basename(script)}: {exception}", 128 + exception.signal_number
  if (isinstance(exception, (OSError, tf.errors.OpError))
      and atomic_files.is_no_space(exception)):
    return error_line(script, atomic_files.no_space_message(exception)), 1
  return None


def error_line(script, error):
  """The one line a script prints for a `errors.UserError`: `<script>: error: <message>`."""
  return f"{os.path.basename(script)}: error: {error}"


def _parse_flags_or_print_help(argv, known_only=False):
  arguments = argv[1:argv.index("--")] if "--" in argv else argv[1:]
  if any(argument in HELP_ARGUMENTS for argument in arguments):
    sys.stdout.write(help_text())
    sys.exit(0)
  if known_only:
    try:
      return flags.FLAGS(argv, known_only=True)
    except flags.Error:
      pass  # A bad value of a known flag: parsed again below for absl's own message.
  return app.parse_flags_with_usage(argv)


def help_text(flag_values=flags.FLAGS):
  """The main module's docstring, then every flag of `flag_values` in groups: the script's own
  flags, the groups of the config fields in the order they were defined, any other module's,
  then absl's and TensorFlow's own. (absl's --help lists only the script's own flags.)"""
  script = sys.argv[0]
  groups = {f"{os.path.basename(script)}": []}
  groups.update((title, []) for title in dict.fromkeys(HELP_GROUP_OF_FLAG.values()))
  for module, module_flags in flag_values.flags_by_module_dict().items():
    for flag in module_flags:
      if flag.name in HELP_GROUP_OF_FLAG:
        title = HELP_GROUP_OF_FLAG[flag.name]
      elif module == script:
        title = os.path.basename(script)
      elif module.startswith("absl."):
        title = ABSL_GROUP
      elif module.startswith("tensorflow."):
        title = TENSORFLOW_GROUP
      else:
        title = module
      groups.setdefault(title, [])
      if flag not in groups[title]:
        groups[title].append(flag)
  for title in (ABSL_GROUP, TENSORFLOW_GROUP):
    groups[title] = groups.pop(title, [])
  lines = [(sys.modules["__main__"].__doc__ or f"USAGE: {script} [flags]\n").rstrip() + "\n"]
  for title, group_flags in groups.items():
    if group_flags:
      lines.append(f"\n{title}:")
      lines.extend(_flag_help(flag) for flag in sorted(group_flags, key=lambda f: f.name))
  return "\n".join(lines) + "\n"


def _flag_help(flag):
  """One flag's entry, as absl's --help writes it."""
  name = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
  if flag.short_name:
    name = f"-{flag.short_name},{name}"
  text = flags.text_wrap(f"{name}: {flag.help or ''}", indent="    ", firstline_indent="  ")
  if flag.default_as_str:
    text += "\n" + flags.text_wrap(f"(default: {flag.default_as_str})", indent="    ")
  if flag.parser.syntactic_help:
    text += "\n" + flags.text_wrap(f"({flag.parser.syntactic_help})", indent="    ")
  return text
