"""`BertConfig`: the 11 keys of the original `bert_config.json`, validated."""

import copy
import dataclasses
import difflib
import json
import math

import tensorflow as tf

from base import errors
from base import json_files
from modeling import activations


# The one `errors.ConfigError`, under the name the conversions and tests catch it by.
ConfigError = errors.ConfigError


# Keys of released multilingual/Chinese configs that this model does not use; never taken for a
# misspelling of a key (`pooler_num_attention_heads` is close to `num_attention_heads`).
RELEASED_EXTRA_KEYS = frozenset({"directionality", "pooler_fc_size", "pooler_num_attention_heads",
                                 "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type"})


def _is_number(value):
  """An int or float of JSON, not true/false (which Python counts as ints)."""
  return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclasses.dataclass
class BertConfig:
  """Hyper-parameters of a BERT encoder, with the original release's defaults.

  As the original's `BertConfig.from_dict`, keys beyond the 11 below (the multilingual and Chinese
  configs carry `directionality`, `pooler_*`, ...) are tolerated: they are kept in `extra` and
  written back by `to_json_string`.

  Attributes:
    vocab_size: number of word-piece ids.
    hidden_size: width H of every layer.
    num_hidden_layers: number of Transformer layers L.
    num_attention_heads: heads A per attention layer; must divide `hidden_size`.
    intermediate_size: width of the feed-forward layer.
    hidden_act: one of `activations.ACTIVATIONS`: "gelu" (tanh approximation, as the original at
      its last commit), "gelu_exact" (erf, as the first release and HuggingFace's "gelu"), "relu",
      "tanh", "linear".
    hidden_dropout_prob: dropout on embeddings and layer outputs.
    attention_probs_dropout_prob: dropout on attention probabilities.
    max_position_embeddings: longest sequence the position table supports.
    type_vocab_size: number of segment ids (the code default 16; released configs say 2).
    initializer_range: stddev of the truncated-normal initializer.
    extra: unknown keys of the file, kept verbatim.
  """
  vocab_size: int
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 16
  initializer_range: float = 0.02
  extra: dict = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    self.validate()

  def validate(self, source="BertConfig"):
    """Raises ConfigError naming `source` and the bad key if a value is invalid."""
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "max_position_embeddings", "type_vocab_size"):
      value = getattr(self, key)
      if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{source}: {key} must be a positive integer, got {value!r}")
    if self.hidden_size % self.num_attention_heads:
      raise ConfigError(
          f"{source}: hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
          f"{self.num_attention_heads}")
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      value = getattr(self, key)
      if not _is_number(value) or not 0.0 <= value < 1.0:
        raise ConfigError(f"{source}: {key} must be in [0, 1), got {value!r}")
    if not _is_number(self.initializer_range) or not 0 < self.initializer_range < math.inf:
      raise ConfigError(f"{source}: initializer_range must be positive and finite, got "
                        f"{self.initializer_range!r}")
    if activations.canonical_name(self.hidden_act) is None:
      raise ConfigError(f"{source}: unknown hidden_act {self.hidden_act!r}; expected one of "
                        f"{', '.join(activations.ACTIVATIONS)}")

  @property
  def attention_head_size(self):
    return self.hidden_size // self.num_attention_heads

  @classmethod
  def from_dict(cls, json_object, source="BertConfig"):
    """Builds a config from a dict; unknown keys go to `extra` (released configs carry some, e.g.
    `pooler_type`), except one that looks like a misspelling of a key the dict lacks, whose
    default would then be used in silence: a `ConfigError` names both."""
    if not isinstance(json_object, dict):
      raise ConfigError(f"{source}: expected a JSON object, got {type(json_object).__name__}")
    if "vocab_size" not in json_object:
      raise ConfigError(f"{source}: missing required key vocab_size")
    known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    kwargs = {k: v for k, v in json_object.items() if k in known}
    extra = {k: v for k, v in json_object.items() if k not in known}
    for key in sorted(set(extra) - RELEASED_EXTRA_KEYS):
      close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
      # Beside the key it resembles, only a near-certain typo (one or two letters) is refused.
      if close and close[0] in kwargs and difflib.SequenceMatcher(
          None, key, close[0]).ratio() >= 0.9:
        raise ConfigError(f"{source}: unknown key {key!r} beside {close[0]!r}: a misspelt "
                          f"duplicate? (one of them holds a value that would be ignored)")
      if close and close[0] not in kwargs:
        raise ConfigError(f"{source}: unknown key {key!r}; did you mean {close[0]!r}? (without "
                          f"it the default {close[0]} is used)")
    config = cls.__new__(cls)
    for field in dataclasses.fields(cls):
      if field.name in kwargs:
        value = kwargs[field.name]
      elif field.default is not dataclasses.MISSING:
        value = field.default
      else:
        value = field.default_factory()
      setattr(config, field.name, value)
    config.extra = extra
    config.validate(source)
    return config

  @classmethod
  def from_json_file(cls, json_file):
    """Reads a `bert_config.json`; raises ConfigError naming the file on any problem."""
    try:
      with tf.io.gfile.GFile(json_file, "rb") as reader:
        data = reader.read()
    except tf.errors.NotFoundError:
      raise ConfigError(f"{json_file}: cannot read config: no such file") from None
    except tf.errors.OpError as error:
      raise ConfigError(f"{json_file}: cannot read config: {error}") from None
    try:
      text = data.decode("utf-8")
    except UnicodeDecodeError as error:
      line = data.count(b"\n", 0, error.start) + 1
      raise ConfigError(f"{json_file}: cannot read config: not UTF-8 text at line {line} "
                        f"({error.reason} at byte {error.start})") from None
    try:
      json_object = json_files.loads(text)
    except json_files.MalformedJson as error:
      where = f" at line {error.lineno} column {error.colno}" if error.lineno is not None else ""
      raise ConfigError(f"{json_file}: malformed JSON{where}: {error.msg}") from None
    return cls.from_dict(json_object, source=str(json_file))

  def to_dict(self):
    """Returns the 11 keys plus the extra ones, as `bert_config.json` holds them."""
    output = {f.name: copy.deepcopy(getattr(self, f.name))
              for f in dataclasses.fields(self) if f.name != "extra"}
    output.update(copy.deepcopy(self.extra))
    return output

  def to_json_string(self):
    """As the original: `json.dumps(indent=2, sort_keys=True)` plus a newline."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  def to_json_file(self, json_file):
    with tf.io.gfile.GFile(json_file, "w") as writer:
      writer.write(self.to_json_string())
