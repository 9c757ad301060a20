"""The config every fine-tuning run shares: the engine's fields, the original runners' flags
(model files, what to do, batch sizes, schedule), padding, evaluation while training with a best
checkpoint, and export. Each family's config (`tasks/<family>/config.py`) extends it with its
own fields and checks.
"""

import dataclasses

import tensorflow as tf

from base import config
from base import cpu_features
from base import errors
from base import output_locations
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import pretrained_models
from serving import export_precision
from serving import saved_model_export
from training import config as training_config
from training import model_inputs
from training import periodic_evaluation

FINE_TUNING_GROUP = "Model files, what to do, batch sizes, schedule"
EXPORT_GROUP = "Export for TensorFlow Serving"

_input = config.flag_group(training_config.INPUT_GROUP)
_fine_tuning = config.flag_group(FINE_TUNING_GROUP)
_evaluation = config.flag_group(training_config.EVALUATION_GROUP)
_export = config.flag_group(EXPORT_GROUP)


def batch_size_field(example_unit, what, default):
  """A `--*_batch_size` field whose help names what a batch holds ("Windows per ...")."""
  return _fine_tuning("integer", default, f"{example_unit} per {what}")


def max_seq_length_field(default):
  """The --max_seq_length field, with the family's default."""
  return _fine_tuning("integer", default,
                      "Word pieces per input after packing, [CLS] and [SEP] included.")


def export_dir_field():
  """The --export_dir field (where a SavedModel for TensorFlow Serving goes) of a config."""
  return _export("string", None, "Write a SavedModel for TensorFlow Serving to "
                 "<export_dir>/<version> after training (or from --init_checkpoint / "
                 "--output_dir's checkpoint alone).")


def export_version_field():
  """The --export_version field (the export's version directory) of a config."""
  return _export("integer", None, "Version directory of the export; default the Unix time.")


def export_ids_only_field():
  """The --export_ids_only field (no in-graph tokenizer in the export) of a config."""
  return _export("bool", False, "Export the predict_ids signature alone, without the in-graph "
                 "tokenizer: a stock TensorFlow Serving binary lacks the tensorflow-text ops.")


def export_precision_field():
  """The --export_precision field (the export's compute dtype) of a config."""
  return _export("enum", "float32", "Compute dtype of the export. bfloat16: matrix products in "
                 "bfloat16, for processors with bfloat16 dot products (x86 avx512_bf16 or "
                 "amx_bf16, Arm bf16); inputs, outputs, variables, layer norms and softmax stay "
                 "float32.", enum_values=export_precision.PRECISIONS)


def allow_emulated_bfloat16_field():
  """The --allow_emulated_bfloat16 field (a bfloat16 export on any processor) of a config."""
  return _export("bool", False, "Allow --export_precision=bfloat16 on a processor without "
                 "bfloat16 dot products (e.g. to export for another machine); emulated there, "
                 "bfloat16 is slower than float32.")


def check_export_precision(run_config):
  """Refuses --export_precision=bfloat16 on a processor without bfloat16 dot products, unless
  --allow_emulated_bfloat16; warns of that flag without a bfloat16 export.

  Args:
    run_config: a config with `export_precision` and `allow_emulated_bfloat16` fields.

  Raises:
    errors.UsageError: bfloat16 on such a processor.
  """
  if run_config.export_precision != "bfloat16":
    run_config.warn_without_effect(("allow_emulated_bfloat16",),
                                   "without --export_precision=bfloat16")
    return
  if run_config.allow_emulated_bfloat16 or cpu_features.has_bfloat16_dot_product():
    return
  raise errors.UsageError(
      "--export_precision=bfloat16: this processor has no bfloat16 dot products (no "
      f"avx512_bf16, amx_bf16 or bf16 in {cpu_features.CPUINFO}), and emulated bfloat16 is "
      "slower than float32; export in float32, or pass --allow_emulated_bfloat16 to export for "
      "another machine")


@dataclasses.dataclass(kw_only=True)
class FineTuningConfig(training_config.EngineConfig):
  """A fine-tuning run (see the flags' help). Families with a dev split extend
  `FineTuningWithEvalConfig` instead, which adds --do_eval and --eval_batch_size.

  Attributes:
    HAS_EVAL_SPLIT: whether the family evaluates on dev data (--do_eval).
  """
  HAS_EVAL_SPLIT = False
  REQUIRED = ("output_dir",)  # the model's files may come from --init_checkpoint's name

  dynamic_padding: bool | None = _input(
      "bool", None, "Pad each batch to its longest example (training batches grouped by length) "
      "instead of --max_seq_length. Default: on, except on TPU, which needs static shapes.")

  bert_config_file: str | None = _fine_tuning(
      "string", None, "bert_config.json of the pretrained model (default: the one beside "
      "--init_checkpoint, or of the model it names).")
  vocab_file: str | None = _fine_tuning(
      "string", None, "vocab.txt of the pretrained model (default: the one beside "
      "--init_checkpoint, or of the model it names).")
  do_lower_case: bool = _fine_tuning(
      "bool", True, "Lower-case the input (True for uncased models).")
  max_seq_length: int = max_seq_length_field(128)
  do_train: bool = _fine_tuning("bool", False, "Fine-tune on the training set.")
  do_predict: bool = _fine_tuning("bool", False, "Predict the test set.")
  train_batch_size: int = batch_size_field("Examples", "optimizer step, over all replicas.", 32)
  predict_batch_size: int = batch_size_field("Examples", "prediction step.", 8)
  learning_rate: float = _fine_tuning("float", 5e-5, "Peak learning rate.")
  num_train_epochs: float = _fine_tuning("float", 3.0, "Passes over the training set.")
  warmup_proportion: float = _fine_tuning(
      "float", 0.1, "Fraction of the training steps with a linear learning-rate warmup.")

  eval_every_steps: int | None = training_config.eval_every_steps_field()
  best_checkpoint_metric: str | None = _evaluation(
      "string", None, "The dev metric that chooses the best checkpoint, kept in "
      f"<output_dir>/{periodic_evaluation.BEST_DIRNAME}/ (default: the task's usual figure, "
      "e.g. f1 for MRPC, matthews_corrcoef for CoLA, pearson for STS-B, f1 for NER and SQuAD, "
      "else eval_accuracy).")
  best_checkpoint_mode: str | None = _evaluation(
      "enum", None, "Whether a higher or lower --best_checkpoint_metric is better (default: "
      "min for a loss, else max).", enum_values=periodic_evaluation.MODES)
  early_stopping_patience: int | None = _evaluation(
      "integer", None, "Stop training after this many evaluations in a row without a better "
      "--best_checkpoint_metric.")
  final_checkpoint: str = _evaluation(
      "enum", "best", "Which checkpoint --do_eval, --do_predict and --export_dir use after "
      "evaluation while training kept a best one.", enum_values=("best", "last"))

  export_dir: str | None = export_dir_field()
  export_version: int | None = export_version_field()
  export_ids_only: bool = export_ids_only_field()
  export_precision: str = export_precision_field()
  allow_emulated_bfloat16: bool = allow_emulated_bfloat16_field()

  @property
  def evaluates(self):
    """Whether the run scores the dev data after training (--do_eval)."""
    return self.HAS_EVAL_SPLIT and self.do_eval

  @property
  def eval_steps_batch_size(self):
    """The batch size of evaluation: --eval_batch_size, or --predict_batch_size for a family
    without a dev split (SQuAD evaluates on its predict file)."""
    return self.eval_batch_size if self.HAS_EVAL_SPLIT else self.predict_batch_size

  def actions(self):
    """The flags of what the run does (`--do_train`, ...), as set or not: `{flag: bool}`."""
    names = ["do_train", "do_eval", "do_predict"] if self.HAS_EVAL_SPLIT else [
        "do_train", "do_predict"]
    return {f"--{name}": bool(getattr(self, name)) for name in names + ["export_dir"]}

  def make_spec(self):
    """The family's `runner.FineTuningSpec` (how it reads, writes and scores)."""
    raise NotImplementedError

  def load_bert_config(self):
    """The `BertConfig` of --bert_config_file (a `bert_config.ConfigError` when unusable)."""
    self.check_model_files(("bert_config_file",))
    return bert_config_lib.BertConfig.from_json_file(self.bert_config_file)

  def validate(self, bert_config=None):
    """Every check of a fine-tuning run that reads no training data, in one place: where the
    outputs go, the shared flags, the model files, the family's own fields
    (`validate_family`), evaluation while training and the engine's settings.

    Args:
      bert_config: the loaded --bert_config_file, if the caller has it already.

    Raises:
      errors.UserError: the first problem found (its message names the flag or file).
    """
    output_locations.check_output_dir("output_dir", self.output_dir)
    if self.export_dir:
      output_locations.check_output_dir("export_dir", self.export_dir)
    self.check_model_files()
    bert_config = bert_config or self.load_bert_config()
    actions = self.actions()
    if not any(actions.values()):
      raise errors.UsageError(f"at least one of {', '.join(actions)} is needed")
    model_inputs.check_max_seq_length(self.max_seq_length, bert_config, self.bert_config_file)
    model_inputs.check_vocab(self.vocab_file, bert_config, self.bert_config_file)
    batch_sizes = ["train_batch_size", "predict_batch_size"]
    if self.HAS_EVAL_SPLIT:
      batch_sizes.insert(1, "eval_batch_size")
    training_config.check_positive(self, batch_sizes + ["learning_rate", "num_train_epochs"])
    if not 0 <= self.warmup_proportion <= 1:
      raise errors.UsageError(
          f"--warmup_proportion must be in [0, 1], got {self.warmup_proportion}")
    tokenization.validate_case_matches_checkpoint(self.do_lower_case, self.init_checkpoint)
    pretrained_models.check_case(self.do_lower_case, self.init_checkpoint)
    if self.export_ids_only and not self.export_dir:
      raise errors.UsageError("--export_ids_only needs --export_dir")
    if self.export_precision != "float32" and not self.export_dir:
      raise errors.UsageError(f"--export_precision={self.export_precision} needs --export_dir")
    check_export_precision(self)
    training_config.check_starting_weights(
        self, bert_config, self.do_train,
        [name for name, given in actions.items() if given and name != "--do_train"])
    if self.export_dir:
      try:
        saved_model_export.check_version(self.export_dir, self.export_version)
      except saved_model_export.ExportError as error:
        raise errors.UsageError(str(error)) from None
    self.validate_family(bert_config)
    self.check_evaluation_flags()
    self.warn_flags_without_effect()
    super().validate()

  def warn_flags_without_effect(self):
    """Warns of the flags given that the actions of this run do not use."""
    if self.do_train and self.eval_every_steps is None:
      self.warn_without_effect(("final_checkpoint",), "when training without --eval_every_steps: "
                               "the run ends on its last checkpoint")
    if not self.do_train:
      self.warn_without_effect(("train_batch_size", "learning_rate", "num_train_epochs",
                                "warmup_proportion", "save_checkpoints_steps",
                                "keep_checkpoint_max", "gradient_accumulation_steps"),
                               "without --do_train")
    if tf.train.latest_checkpoint(self.output_dir):
      self.warn_without_effect(("init_checkpoint", "partial_init_checkpoint"),
                               f"when --output_dir={self.output_dir} holds checkpoints: the run "
                               "resumes from the latest")
    if not self.do_predict and (self.HAS_EVAL_SPLIT or self.eval_every_steps is None):
      self.warn_without_effect(("predict_batch_size",), "without --do_predict")
    if self.HAS_EVAL_SPLIT and not self.do_eval and self.eval_every_steps is None:
      self.warn_without_effect(("eval_batch_size",), "without --do_eval or --eval_every_steps")
    if not self.export_dir:
      self.warn_without_effect(("export_version",), "without --export_dir")

  def validate_family(self, bert_config):
    """The family's own checks of its fields, after the shared ones; raises
    `errors.UserError`."""

  def check_evaluation_flags(self):
    """The checks of the evaluation fields that need no data: positive values, and flags of a
    best checkpoint only with --eval_every_steps."""
    if self.eval_every_steps is None:
      for name in ("best_checkpoint_metric", "best_checkpoint_mode", "early_stopping_patience"):
        if getattr(self, name) is not None:
          raise errors.UsageError(f"--{name} needs --eval_every_steps")
      return
    training_config.check_positive(self, ("eval_every_steps", "early_stopping_patience"))
    if not self.do_train:
      raise errors.UsageError("--eval_every_steps evaluates while training: it needs --do_train")

  def evaluation_config(self, metric_names, default_metric, eval_data):
    """The `periodic_evaluation.EvaluationConfig` of the evaluation fields, or None without
    --eval_every_steps.

    Args:
      metric_names: the names the task's evaluation reports (a metric to choose by must be one).
      default_metric: the task's usual figure.
      eval_data: what the run evaluates on, or None when it has none (named in the error).

    Raises:
      errors.UsageError: evaluation without dev data, an unknown metric.
    """
    if self.eval_every_steps is None:
      return None
    if eval_data is None:
      raise errors.UsageError(f"--eval_every_steps needs dev data to evaluate on ({default_metric}"
                              " is computed on it)")
    metric = self.best_checkpoint_metric or default_metric
    if metric not in metric_names:
      raise errors.UsageError(f"--best_checkpoint_metric={metric}: not a metric of this task; "
                              f"its metrics: {', '.join(sorted(metric_names))}")
    return periodic_evaluation.EvaluationConfig(
        every_steps=self.eval_every_steps, metric=metric,
        mode=self.best_checkpoint_mode or periodic_evaluation.default_mode(metric),
        patience=self.early_stopping_patience)


@dataclasses.dataclass(kw_only=True)
class FineTuningWithEvalConfig(FineTuningConfig):
  """A fine-tuning run of a family with a dev split: --do_eval and --eval_batch_size too."""
  HAS_EVAL_SPLIT = True

  do_eval: bool = _fine_tuning("bool", False, "Evaluate on the dev set.")
  eval_batch_size: int = batch_size_field("Examples", "evaluation step.", 8)
