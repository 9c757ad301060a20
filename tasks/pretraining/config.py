"""The configs of pretraining: `run_pretraining.py`'s (`PretrainingConfig`: the engine's fields
plus the records, the model and the schedule) and `create_pretraining_data.py`'s
(`PretrainingDataConfig`: the text, the vocab and how instances are made)."""

import dataclasses
import os

from absl import logging
import tensorflow as tf

from base import config
from base import errors
from base import output_locations
from data import file_patterns
from data import tokenization
from modeling import bert_config as bert_config_lib
from training import config as training_config
from training import model_inputs


@dataclasses.dataclass(kw_only=True)
class PretrainingConfig(training_config.InputCompressionConfig, training_config.EngineConfig):
  """A masked-LM and next-sentence pretraining run on the records of `create_pretraining_data.py`
  (see the flags' help).

  Example:
    >>> from tasks.pretraining.config import PretrainingConfig
    >>> PretrainingConfig(input_file="data/*.tfrecord", bert_config_file="bert_config.json",
    ...                   output_dir="/tmp/pretraining", do_train=True).num_train_steps
    100000
  """
  REQUIRED = ("input_file", "output_dir")  # --bert_config_file may come from --init_checkpoint

  bert_config_file: str | None = config.flag(
      "string", None, "bert_config.json of the model to train (default: the one beside "
      "--init_checkpoint, or of the model it names).")
  input_file: str | None = config.flag(
      "string", None, "Comma-separated globs of TFRecords from create_pretraining_data.py.")
  max_seq_length: int = config.flag("integer", 128, "Sequence length of the records.")
  max_predictions_per_seq: int = config.flag("integer", 20, "Masked-LM predictions per record.")
  max_sequences_per_pack: int | None = config.flag(
      "integer", None, "Packed records (create_pretraining_data.py --pack_sequences, detected "
      "from their features): the most instances a row may hold; records packing more are "
      "refused before the first step. Default: what the records hold.")
  do_train: bool = config.flag("bool", False, "Train.")
  do_eval: bool = config.flag("bool", False, "Evaluate on the same files after training.")
  train_batch_size: int = config.flag("integer", 32,
                                      "Examples per optimizer step, over all replicas.")
  eval_batch_size: int = config.flag("integer", 8,
                                     "Examples per evaluation step, over all replicas.")
  learning_rate: float = config.flag("float", 5e-5, "Peak learning rate of AdamWeightDecay.")
  num_train_steps: int = config.flag("integer", 100000, "Optimizer steps.")
  num_warmup_steps: int = config.flag("integer", 10000, "Linear warmup steps.")
  max_eval_steps: int = config.flag("integer", 100, "Evaluation batches.")
  eval_every_steps: int | None = training_config.eval_every_steps_field()
  eval_input_file: str | None = config.flag(
      "string", None, "Held-out pretraining records (glob or comma-separated) that --do_eval and "
      "--eval_every_steps evaluate on; default --input_file, as the original's --do_eval.")

  def load_bert_config(self):
    """The `BertConfig` of --bert_config_file (a `bert_config.ConfigError` when unusable)."""
    self.check_model_files(("bert_config_file",))
    return bert_config_lib.BertConfig.from_json_file(self.bert_config_file)

  @property
  def eval_patterns(self):
    """What evaluation reads: --eval_input_file, or --input_file as the original's --do_eval."""
    return self.eval_input_file or self.input_file

  def validate(self, bert_config=None):
    """Every check that reads no record: the output directory, what to do, sizes and steps,
    the starting weights and the engine's settings.

    Raises:
      errors.UserError: the first problem found (its message names the flag or file).
    """
    output_locations.check_output_dir("output_dir", self.output_dir)
    bert_config = bert_config or self.load_bert_config()
    if not self.do_train and not self.do_eval:
      raise errors.UsageError("at least one of --do_train or --do_eval must be true")
    model_inputs.check_max_seq_length(self.max_seq_length, bert_config, self.bert_config_file)
    training_config.check_positive(self, ("max_predictions_per_seq", "train_batch_size",
                                          "eval_batch_size", "num_train_steps", "learning_rate",
                                          "max_sequences_per_pack"))
    if self.num_warmup_steps < 0:
      raise errors.UsageError(
          f"--num_warmup_steps must not be negative, got {self.num_warmup_steps}")
    training_config.check_starting_weights(self, bert_config, self.do_train,
                                           ["--do_eval"] if self.do_eval else [])
    if not self.do_eval and self.eval_every_steps is None:
      self.warn_without_effect(("eval_input_file", "eval_batch_size", "max_eval_steps"),
                               "without --do_eval or --eval_every_steps")
    if not self.do_train:
      self.warn_without_effect(("train_batch_size", "learning_rate", "num_train_steps",
                                "num_warmup_steps", "save_checkpoints_steps"), "without --do_train")
    if tf.train.latest_checkpoint(self.output_dir):
      self.warn_without_effect(("init_checkpoint", "partial_init_checkpoint"),
                               f"when --output_dir={self.output_dir} holds checkpoints: the run "
                               "resumes from the latest")
    elif self.num_warmup_steps > self.num_train_steps:
      logging.warning("--num_warmup_steps=%d is more than --num_train_steps=%d: the learning "
                      "rate never reaches --learning_rate", self.num_warmup_steps,
                      self.num_train_steps)
    if self.eval_every_steps is not None:
      training_config.check_positive(self, ("eval_every_steps",))
      if not self.do_train:
        raise errors.UsageError(
            "--eval_every_steps evaluates while training: it needs --do_train")
    super().validate()


@dataclasses.dataclass(kw_only=True)
class PretrainingDataConfig(config.FlagConfig):
  """Masked-LM / next-sentence pretraining records made from text with one sentence per line
  and a blank line between documents (see the flags' help), by local processes or, with
  `pipeline_args`, by an Apache Beam pipeline.

  Attributes:
    pipeline_args: Apache Beam's pipeline options (`"--runner=DirectRunner"`, ...): the words
      of the command line that are not this script's flags; empty for the local path.

  Example:
    >>> from tasks.pretraining.config import PretrainingDataConfig
    >>> _ = open("corpus.txt", "w").write("Hello, world!\\nHello!\\n\\nWorld, hello!\\n")
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", ",", "world", "!"]
    >>> _ = open("vocab.txt", "w").write("\\n".join(vocab) + "\\n")
    >>> data_config = PretrainingDataConfig(input_file="corpus.txt", vocab_file="vocab.txt",
    ...                                     output_file="part.tfrecord", num_output_shards=2,
    ...                                     max_seq_length=16, max_predictions_per_seq=3)
    >>> data_config.validate()
    >>> data_config.output_paths()
    ['part.tfrecord-00000-of-00002', 'part.tfrecord-00001-of-00002']
  """
  REQUIRED = ("input_file", "output_file", "vocab_file")

  input_file: str | None = config.flag(
      "string", None, "Input raw text file (or comma-separated list of files or globs).")
  output_file: str | None = config.flag(
      "string", None, "Output TF example file (or comma-separated list of files); with "
      "--num_output_shards, the prefix of the shard names.")
  vocab_file: str | None = config.flag(
      "string", None, "The vocabulary file that the BERT model was trained on.")
  do_lower_case: bool = config.flag("bool", True, "Whether to lower case the input text.")
  do_whole_word_mask: bool = config.flag(
      "bool", False, "Whether to use whole word masking rather than per-WordPiece masking.")
  max_seq_length: int = config.flag("integer", 128, "Maximum sequence length.")
  max_predictions_per_seq: int = config.flag(
      "integer", 20, "Maximum number of masked LM predictions per sequence.")
  random_seed: int = config.flag("integer", 12345, "Random seed for data generation.")
  dupe_factor: int = config.flag(
      "integer", 10, "Number of times to duplicate the input data (with different masks).")
  masked_lm_prob: float = config.flag("float", 0.15, "Masked LM probability.")
  short_seq_prob: float = config.flag(
      "float", 0.1, "Probability of creating sequences which are shorter than the maximum length.")
  num_workers: int = config.flag(
      "integer", os.cpu_count() or 1, "Processes making shards (default: all cores); with more "
      "than one, this process only reads the input and writes the output. The output does not "
      "depend on it.")
  num_output_shards: int | None = config.flag(
      "integer", None, "Write <output_file>-NNNNN-of-MMMMM files instead of the listed outputs.")
  shard_documents: int = config.flag(
      "integer", 10000, "Documents per input shard: the unit of work and memory, and the pool "
      "the random next sentences are drawn from.")
  original_random_stream: bool = config.flag(
      "bool", False, "Mask with the original's random.Random calls, one instance at a time: "
      "reproduces the original's instances for a seed (within a shard), several times slower. "
      "By default a shard is masked at once with NumPy: the same distribution, not the same "
      "instances.")
  pack_sequences: bool = config.flag(
      "bool", False, "Pack up to --max_sequences_per_pack instances into each record, back to "
      "back in one max_seq_length row instead of one padded instance per record (fewer "
      "records, less padding; the instances themselves are unchanged). The records add "
      "position_ids, instance_ids and per-instance next-sentence features; run_pretraining.py "
      "reads them.")
  max_sequences_per_pack: int = config.flag(
      "integer", 3, "With --pack_sequences, the most instances of one record.")
  gzip: bool = config.flag(
      "bool", False, "Compress the output with GZIP (read with --input_compression=gzip).")

  pipeline_args: tuple = ()
  UNKNOWN_ARGS_FIELD = "pipeline_args"

  def output_paths(self):
    """The output files: the comma-separated list, or the shard names of --num_output_shards."""
    if self.num_output_shards is None:
      return [path.strip() for path in self.output_file.split(",") if path.strip()]
    count = self.num_output_shards
    return [f"{self.output_file}-{index:05d}-of-{count:05d}" for index in range(count)]

  def input_paths(self):
    """The input files of --input_file's globs, each checked to be a readable file
    (`file_patterns.InputError` otherwise)."""
    inputs = file_patterns.expand_globs(self.input_file, "input_file")
    file_patterns.check_readable(inputs, "input_file")
    return inputs

  def beam_options(self):
    """Beam's `PipelineOptions` of `pipeline_args`, or None for the local path (no flag among
    them).

    Raises:
      errors.UsageError: Apache Beam is not installed, or an argument that Beam does not know
        either.
    """
    args = list(self.pipeline_args)
    if not [arg for arg in args if arg.startswith("-")]:
      return None
    try:
      from tasks.pretraining import beam  # pylint: disable=g-import-not-at-top
    except ImportError:
      raise errors.UsageError(
          f"{args[0]}: not a flag of this script; Apache Beam's pipeline options (--runner=...) "
          "need apache-beam: pip install -r requirements-beam.txt") from None
    return beam.pipeline_options_from_args(args)

  def validate(self):
    """Every check before the first document is read: the output files, Beam's options, the
    flags' sense, the input files and the vocab.

    Raises:
      errors.UserError: the first problem found (its message names the flag or file).
    """
    for path in self.output_file.split(","):
      if path.strip():
        output_locations.check_output_file("output_file", path.strip())
    self.beam_options()
    self.check_flags()
    if not self.output_paths():
      raise errors.UsageError("--output_file is empty")
    self.input_paths()
    tokenization.load_vocab(self.vocab_file)
    super().validate()

  def check_flags(self):
    """Raises errors.UsageError naming the first flag that cannot work."""
    if self.max_seq_length < 5:
      raise errors.UsageError(f"--max_seq_length={self.max_seq_length}: must be at least 5 "
                              "([CLS] A [SEP] B [SEP] with one token each)")
    if not 0.0 < self.masked_lm_prob <= 1.0:
      raise errors.UsageError(f"--masked_lm_prob={self.masked_lm_prob}: must be in (0, 1]")
    if not 0.0 <= self.short_seq_prob <= 1.0:
      raise errors.UsageError(f"--short_seq_prob={self.short_seq_prob}: must be in [0, 1]")
    for name in ("dupe_factor", "max_predictions_per_seq", "num_workers", "shard_documents",
                 "max_sequences_per_pack"):
      if getattr(self, name) < 1:
        raise errors.UsageError(f"--{name}={getattr(self, name)}: must be at least 1")
    if self.num_output_shards is not None and self.num_output_shards < 1:
      raise errors.UsageError(
          f"--num_output_shards={self.num_output_shards}: must be at least 1")
    if self.num_output_shards is not None and "," in self.output_file.strip(","):
      raise errors.UsageError(
          f"--output_file={self.output_file} lists several files; with --num_output_shards it "
          "is one name, the prefix of the shards")
    if not self.pack_sequences:
      self.warn_without_effect(("max_sequences_per_pack",), "without --pack_sequences")
    # The original silently capped full-length sequences below masked_lm_prob.
    needed = int(round(self.max_seq_length * self.masked_lm_prob))
    if self.max_predictions_per_seq < needed:
      raise errors.UsageError(
          f"--max_predictions_per_seq={self.max_predictions_per_seq} is smaller than "
          f"round(max_seq_length * masked_lm_prob) = {needed}: full-length sequences would mask "
          f"less than --masked_lm_prob={self.masked_lm_prob} of their tokens")
