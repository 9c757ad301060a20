"""`run_pretraining.py`'s config: the engine's fields plus the records, the model and the
schedule."""

import dataclasses

from base import config
from base import errors
from base import output_locations
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
  REQUIRED = ("bert_config_file", "input_file", "output_dir")

  bert_config_file: str | None = config.flag(
      "string", None, "bert_config.json of the model to train.")
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
    if self.eval_every_steps is not None:
      training_config.check_positive(self, ("eval_every_steps",))
      if not self.do_train:
        raise errors.UsageError(
            "--eval_every_steps evaluates while training: it needs --do_train")
    super().validate()
