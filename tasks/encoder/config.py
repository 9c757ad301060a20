"""The configs of the encoder on its own: `extract_features.py`'s (`ExtractFeaturesConfig`) and
`export_model.py`'s (`ExportModelConfig`, whose export flags are the fine-tuning runners')."""

import dataclasses

import tensorflow as tf

from base import config
from base import errors
from base import output_locations
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import pretrained_models
from modeling import sentence_pooling
from serving import saved_model_export
from tasks import config as tasks_config
from tasks.encoder import features
from training import model_inputs


def parse_layers(layers, num_hidden_layers):
  """`"-1,-2"` -> [-1, -2], checked against the number of layers (`errors.UsageError`)."""
  try:
    indices = [int(x) for x in layers.split(",")]
  except ValueError:
    raise errors.UsageError(f"--layers={layers!r}: expected comma-separated integers") from None
  for index in indices:
    if not -num_hidden_layers <= index < num_hidden_layers:
      raise errors.UsageError(f"--layers: {index} is out of range for {num_hidden_layers} layers")
  return indices


@dataclasses.dataclass(kw_only=True)
class ExtractFeaturesConfig(pretrained_models.WeightsByName, config.FlagConfig):
  """Per-token activations of chosen encoder layers, or one sentence vector per line, of a text
  file (see the flags' help).

  Example:
    >>> from modeling import bert_config as bert_config_lib
    >>> from tasks.encoder.config import ExtractFeaturesConfig
    >>> _ = open("input.txt", "w").write("Hello, world! ||| Hello!\\n")
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", ",", "world", "!"]
    >>> _ = open("vocab.txt", "w").write("\\n".join(vocab) + "\\n")
    >>> bert_config_lib.BertConfig(vocab_size=9).to_json_file("bert_config.json")
    >>> features_config = ExtractFeaturesConfig(
    ...     input_file="input.txt", output_file="features.jsonl", vocab_file="vocab.txt",
    ...     bert_config_file="bert_config.json", init_checkpoint="no/model.ckpt",
    ...     max_seq_length=16)
    >>> features_config.layer_indices(num_hidden_layers=4)
    [-1, -2, -3, -4]
    >>> features_config.validate()
    Traceback (most recent call last):
    ...
    modeling.checkpoint_io.CheckpointError: no/model.ckpt: no such checkpoint ...
  """
  # --bert_config_file and --vocab_file may come from --init_checkpoint's name.
  REQUIRED = ("input_file", "output_file", "init_checkpoint")

  input_file: str | None = config.flag(
      "string", None, "Text file, one `text_a ||| text_b` or text per line.")
  output_file: str | None = config.flag("string", None, "JSON-lines output file.")
  layers: str = config.flag(
      "string", "-1,-2,-3,-4", "Comma-separated encoder layer indices (-1 = last).")
  bert_config_file: str | None = config.flag(
      "string", None, "bert_config.json of the model (default: the one beside "
      "--init_checkpoint, or of the model it names).")
  max_seq_length: int = config.flag(
      "integer", 128, "Word pieces per input after packing; longer inputs are truncated as the "
      "original.")
  init_checkpoint: str | None = config.flag(
      "string", None, "Checkpoint of the encoder (original layout), or a released model's name "
      "or a HuggingFace repo id, downloaded once: see docs/pretrained_models.md.")
  vocab_file: str | None = config.flag(
      "string", None, "vocab.txt of the model (default: that of the model --init_checkpoint "
      "names).")
  do_lower_case: bool = config.flag(
      "bool", True, "Lower-case the input (True for uncased models).")
  batch_size: int = config.flag("integer", 32, "Inputs per forward pass.")
  pooling: str = config.flag(
      "enum", "none", "none: the original per-token output. cls / mean / pooled: one vector "
      "per line instead (the [CLS] vector, the mean over real tokens, or the pooler output) of "
      "the --layers concatenated; an --output_file ending in .npy gets a [num_lines, dim] "
      'float32 array, otherwise JSON lines {"linex_index": ..., "embedding": [...]}.',
      enum_values=("none",) + sentence_pooling.POOLING_METHODS)
  use_tpu: bool = config.flag(
      "bool", False, "Original flag; TPU inference is not supported here.")
  master: str | None = config.flag("string", None, "Original TPU flag; unused.")
  num_tpu_cores: int = config.flag("integer", 8, "Original TPU flag; unused.")
  use_one_hot_embeddings: bool = config.flag(
      "bool", False, "Original TPU flag; embeddings are always gathered here.")

  @property
  def as_npy(self):
    """Whether the output is a NumPy array of sentence vectors (pooling, and a `.npy` name)."""
    return self.pooling != "none" and self.output_file.endswith(".npy")

  def load_bert_config(self):
    """The `BertConfig` of --bert_config_file (a `bert_config.ConfigError` when unusable)."""
    self.check_model_files(("bert_config_file",))
    return bert_config_lib.BertConfig.from_json_file(self.bert_config_file)

  def layer_indices(self, num_hidden_layers):
    """The --layers as integers, checked against the model's number of layers."""
    return parse_layers(self.layers, num_hidden_layers)

  def validate(self, bert_config=None):
    """Every check before the first forward pass: the output file, the flags the model or the
    input cannot take, the checkpoint and the layers.

    Args:
      bert_config: the loaded --bert_config_file, if the caller has it already.

    Returns:
      the number of input lines (read once for the checks).

    Raises:
      errors.UserError: the first problem found (its message names the flag or file).
    """
    output_locations.check_output_file("output_file", self.output_file)
    self.check_model_files()
    bert_config = bert_config or self.load_bert_config()
    if self.use_tpu:
      raise errors.UsageError("--use_tpu: extract_features.py runs on CPU or GPU only")
    if self.batch_size <= 0:
      raise errors.UsageError(f"--batch_size must be positive, got {self.batch_size}")
    model_inputs.check_max_seq_length(self.max_seq_length, bert_config, self.bert_config_file)
    model_inputs.check_vocab(self.vocab_file, bert_config, self.bert_config_file)
    if not tf.io.gfile.exists(self.input_file) or tf.io.gfile.isdir(self.input_file):
      raise errors.UsageError(f"--input_file={self.input_file}: no such file")
    num_lines, first_pair = features.scan_input(self.input_file)
    if not num_lines:
      raise errors.UsageError(f"--input_file={self.input_file}: the file is empty")
    if first_pair is not None:
      model_inputs.check_segments(2, bert_config, self.bert_config_file,
                                  f"--input_file={self.input_file}: line {first_pair} is a text "
                                  "pair ('A ||| B')")
    if not pretrained_models.is_known_name(self.init_checkpoint):  # checked once fetched
      model_inputs.check_init_checkpoint(self.init_checkpoint, bert_config,
                                         self.bert_config_file)
    self.layer_indices(bert_config.num_hidden_layers)
    super().validate()
    return num_lines


@dataclasses.dataclass(kw_only=True)
class ExportModelConfig(pretrained_models.WeightsByName, config.FlagConfig):
  """A pretrained checkpoint exported as a SavedModel feature extractor for TensorFlow Serving
  (see the flags' help).

  Example:
    >>> from modeling import bert_config as bert_config_lib
    >>> from tasks.encoder.config import ExportModelConfig
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", ",", "world", "!"]
    >>> _ = open("vocab.txt", "w").write("\\n".join(vocab) + "\\n")
    >>> bert_config_lib.BertConfig(vocab_size=9).to_json_file("bert_config.json")
    >>> export_config = ExportModelConfig(
    ...     bert_config_file="bert_config.json", vocab_file="vocab.txt",
    ...     init_checkpoint="no/model.ckpt", export_dir="export", export_version=1,
    ...     max_seq_length=16)
    >>> export_config.pooling
    'mean'
    >>> export_config.validate()
    Traceback (most recent call last):
    ...
    modeling.checkpoint_io.CheckpointError: no/model.ckpt: no such checkpoint ...
  """
  # --bert_config_file and --vocab_file may come from --init_checkpoint's name.
  REQUIRED = ("init_checkpoint", "export_dir")

  export_dir: str | None = tasks_config.export_dir_field()
  export_version: int | None = tasks_config.export_version_field()
  export_ids_only: bool = tasks_config.export_ids_only_field()
  export_precision: str = tasks_config.export_precision_field()
  allow_emulated_bfloat16: bool = tasks_config.allow_emulated_bfloat16_field()
  bert_config_file: str | None = config.flag(
      "string", None, "bert_config.json of the pretrained model (default: the one beside "
      "--init_checkpoint, or of the model it names).")
  vocab_file: str | None = config.flag(
      "string", None, "vocab.txt of the pretrained model (default: the one beside "
      "--init_checkpoint, or of the model it names).")
  do_lower_case: bool = config.flag(
      "bool", True, "Lower-case the input (True for uncased models).")
  init_checkpoint: str | None = config.flag(
      "string", None, "The pretrained checkpoint: a prefix, a directory's latest checkpoint, "
      "or a released model's name or a HuggingFace repo id, downloaded once: see "
      "docs/pretrained_models.md.")
  max_seq_length: int = config.flag(
      "integer", 128, "Word pieces per input after packing, [CLS] and [SEP] included; longer "
      "inputs are truncated.")
  pooling: str = config.flag(
      "enum", "mean", "Sentence embedding of the embed signature: the last layer's [CLS] "
      "vector, its mean over real tokens, or the pooler output (as extract_features.py "
      "--pooling=... --layers=-1).", enum_values=sentence_pooling.POOLING_METHODS)

  def load_bert_config(self):
    """The `BertConfig` of --bert_config_file (a `bert_config.ConfigError` when unusable)."""
    self.check_model_files(("bert_config_file",))
    return bert_config_lib.BertConfig.from_json_file(self.bert_config_file)

  def validate(self, bert_config=None):
    """Every check before the model is built: the export directory and version, a
    --max_seq_length, vocab or checkpoint the model cannot take, a casing that contradicts
    a released checkpoint's name, and a bfloat16 export on a processor without bfloat16 dot
    products.

    Args:
      bert_config: the loaded --bert_config_file, if the caller has it already.

    Raises:
      errors.UserError: the first problem found (its message names the flag or file).
    """
    output_locations.check_output_dir("export_dir", self.export_dir)
    self.check_model_files()
    bert_config = bert_config or self.load_bert_config()
    model_inputs.check_max_seq_length(self.max_seq_length, bert_config, self.bert_config_file)
    model_inputs.check_vocab(self.vocab_file, bert_config, self.bert_config_file)
    if not pretrained_models.is_known_name(self.init_checkpoint):  # checked once fetched
      model_inputs.check_init_checkpoint(self.init_checkpoint, bert_config,
                                         self.bert_config_file)
    tokenization.validate_case_matches_checkpoint(self.do_lower_case, self.init_checkpoint)
    pretrained_models.check_case(self.do_lower_case, self.init_checkpoint)
    saved_model_export.check_version(self.export_dir, self.export_version)
    tasks_config.check_export_precision(self)
    super().validate()
