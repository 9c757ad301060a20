"""Typed run configs whose fields are the scripts' command-line flags.

A run is a function of its config: a script defines its flags from the config class
(`define_flags`), builds the config from the parsed flags (`from_flags`), checks it
(`validate`, every check in one place) and runs it. A notebook or a test builds the same config
directly, or from the words of a command line (`from_args`), without touching the process's
global flags.

Example:
  >>> import dataclasses
  >>> from base import config
  >>> @dataclasses.dataclass(kw_only=True)
  ... class GreetConfig(config.FlagConfig):
  ...   name: str = config.flag("string", None, "Whom to greet.")
  ...   times: int = config.flag("integer", 1, "How often.")
  ...   REQUIRED = ("name",)
  >>> GreetConfig.from_args("--name=bees", "--times=2")
  GreetConfig(name='bees', times=2)
"""

import dataclasses
import functools
import math
import sys

from absl import flags
from absl import logging

from base import cli
from base import errors

_DEFINE = {
    "string": flags.DEFINE_string,
    "bool": flags.DEFINE_bool,
    "integer": flags.DEFINE_integer,
    "float": flags.DEFINE_float,
    "list": flags.DEFINE_list,
    "enum": flags.DEFINE_enum,
}


@dataclasses.dataclass(frozen=True)
class FlagSpec:
  """How a config field is given on the command line.

  Attributes:
    kind: one of "string", "bool", "integer", "float", "list", "enum".
    help: the flag's help text.
    group: the title of its group in --help, or None for the script's own group.
    enum_values: the choices of an "enum" flag.
    aliases: other names of the flag (e.g. the original's `--iterations_per_loop`).
    lower_bound: the least value of an "integer" flag (absl checks it at parse time, and
      `FlagConfig.validate` in a config built in Python), or None.
  """
  kind: str
  help: str
  group: str | None = None
  enum_values: tuple = ()
  aliases: tuple = ()
  lower_bound: int | None = None


def flag(kind, default, help, *, group=None, enum_values=(), aliases=(), lower_bound=None):  # pylint: disable=redefined-builtin
  """A config field that is also the flag `--<field name>` (arguments as `FlagSpec`; `default`
  is the field's and the flag's default)."""
  if kind not in _DEFINE:
    raise ValueError(f"unknown flag kind {kind!r}")
  if lower_bound is not None and kind != "integer":
    raise ValueError(f"lower_bound is for integer flags, not {kind!r}")
  spec = FlagSpec(kind, help, group, tuple(enum_values), tuple(aliases), lower_bound)
  return dataclasses.field(default=default, metadata={"flag": spec})


def flag_group(title):
  """`flag` with `group=title`: the fields it makes are listed under `title` in --help."""
  return functools.partial(flag, group=title)


@dataclasses.dataclass(kw_only=True)
class FlagConfig:
  """Base class of the run configs: a dataclass whose `flag` fields are the run's flags.

  Subclasses list their required flags in `REQUIRED` (absl's own check at parse time) and
  extend `validate`. A subclass whose `UNKNOWN_ARGS_FIELD` names one of its fields that is not a
  flag takes the words of the flags it does not define in that field, a tuple, for another
  parser (Apache Beam's pipeline options) that its `validate` must make reject what it does not
  know either; otherwise such words are an error.

  Attributes:
    given_flags: the names of the flags given on the command line (`from_flags`), for the few
      checks where a default and the same value written out differ; empty for a config built
      in Python.
  """
  REQUIRED = ()
  UNKNOWN_ARGS_FIELD = None
  given_flags: frozenset = dataclasses.field(default=frozenset(), repr=False, compare=False)

  def warn_without_effect(self, names, reason):
    """Logs a warning for each flag of `names` given on the command line: in this run it has no
    effect, for `reason` (e.g. "without --do_eval"). Returns the names warned about."""
    unused = [name for name in names if name in self.given_flags]
    for name in unused:
      logging.warning("--%s has no effect %s", name, reason)
    return unused

  @classmethod
  def flag_fields(cls):
    """The fields that are flags, in definition order."""
    return [field for field in dataclasses.fields(cls) if "flag" in field.metadata]

  @classmethod
  def define_flags(cls, flag_values):
    """Defines every field's flag (and its aliases) in `flag_values`, its --help group recorded
    in `cli.HELP_GROUP_OF_FLAG`; the script's own flags are attributed to the main script."""
    for field in cls.flag_fields():
      spec = field.metadata["flag"]
      arguments = {"flag_values": flag_values, "module_name": sys.argv[0]}
      if spec.kind == "enum":
        _DEFINE["enum"](field.name, field.default, list(spec.enum_values), spec.help, **arguments)
      elif spec.lower_bound is not None:
        _DEFINE[spec.kind](field.name, field.default, spec.help, lower_bound=spec.lower_bound,
                           **arguments)
      else:
        _DEFINE[spec.kind](field.name, field.default, spec.help, **arguments)
      for alias in spec.aliases:
        flags.DEFINE_alias(alias, field.name, **arguments)
      if spec.group is not None:
        for name in (field.name,) + spec.aliases:
          cli.HELP_GROUP_OF_FLAG[name] = spec.group
    if cls.REQUIRED:
      flags.mark_flags_as_required(cls.REQUIRED, flag_values=flag_values)

  @classmethod
  def from_flags(cls, flag_values, unknown_args=()):
    """The config of parsed `flag_values` (in which `define_flags` defined the fields) and the
    words the parser left (`unknown_args`, for `UNKNOWN_ARGS_FIELD`)."""
    fields = cls.flag_fields()
    unknown = {cls.UNKNOWN_ARGS_FIELD: tuple(unknown_args)} if cls.UNKNOWN_ARGS_FIELD else {}
    return cls(**{field.name: flag_values[field.name].value for field in fields},
               given_flags=frozenset(field.name for field in fields
                                     if flag_values[field.name].present), **unknown)

  @classmethod
  def from_args(cls, *args):
    """The config of command-line words (`"--do_train"`, `"--output_dir=out"`), parsed as the
    script parses them, in flags of its own (the process's `absl.flags.FLAGS` is not touched).

    Raises:
      errors.UsageError: an unknown flag, a bad value, or a required flag missing.
    """
    flag_values = flags.FlagValues()
    cls.define_flags(flag_values)
    try:
      unparsed = flag_values([cls.__name__, *map(str, args)],
                             known_only=cls.UNKNOWN_ARGS_FIELD is not None)
    except flags.Error as error:
      raise errors.UsageError(str(error)) from None
    return cls.from_flags(flag_values, unparsed[1:])

  def replace(self, **changes):
    """A copy with `changes` (field name -> value)."""
    return dataclasses.replace(self, **changes)

  def validate(self):
    """Raises `errors.UserError` for the first value the run cannot use; subclasses extend it.
    Nothing is written. Here: float flags must be finite (absl parses "nan" and "inf", which
    pass every comparison-based range check), and the flags' lower bounds (which the command
    line's parser checks already)."""
    for field in self.flag_fields():
      bound = field.metadata["flag"].lower_bound
      value = getattr(self, field.name)
      if isinstance(value, float) and not math.isfinite(value):
        raise errors.UsageError(f"--{field.name}={value}: must be a finite number")
      if bound is not None and value is not None and value < bound:
        raise errors.UsageError(f"--{field.name}={value}: must be at least {bound}")
