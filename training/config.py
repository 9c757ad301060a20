"""The engine's part of a run's config: the flag groups every runner of the training engine shares.

`EngineConfig` holds distribution, speed, progress, checkpoint, seed and optimizer settings (the
original's TPU flags `--use_tpu`, `--tpu_name`, `--tpu_zone`, `--gcp_project`, `--master`,
`--num_tpu_cores` and `--iterations_per_loop` keep working); a runner's config extends it with its
own fields. `engine_run_config` turns it into the `engine.RunConfig` the `engine.Trainer` takes.
"""

import dataclasses

import tensorflow as tf

from base import config
from base import errors
from base import frozen_weights
from modeling import optimization
from modeling import pretrained_models
from training import distribution
from training import engine
from training import input_pipeline
from training import mixed_precision
from training import model_inputs
from training import periodic_evaluation

DISTRIBUTION_GROUP = "Distribution: GPUs, hosts, TPU"
SPEED_GROUP = "Speed: mixed precision, XLA, accumulation"
PROGRESS_GROUP = "Progress: log lines and TensorBoard"
OUTPUT_GROUP = "Output and checkpoints"
SEED_GROUP = "Reproducibility"
OPTIMIZER_GROUP = "Optimizer"
INPUT_GROUP = "Input"
EVALUATION_GROUP = "Evaluation while training, best checkpoint, early stopping"

_distribution = config.flag_group(DISTRIBUTION_GROUP)
_speed = config.flag_group(SPEED_GROUP)
_progress = config.flag_group(PROGRESS_GROUP)
_output = config.flag_group(OUTPUT_GROUP)
_seed = config.flag_group(SEED_GROUP)
_optimizer = config.flag_group(OPTIMIZER_GROUP)
_input = config.flag_group(INPUT_GROUP)
_evaluation = config.flag_group(EVALUATION_GROUP)


@dataclasses.dataclass(kw_only=True)
class EngineConfig(pretrained_models.WeightsByName, config.FlagConfig):
  """The settings of the training engine that every runner shares (see the flags' help)."""
  distribution_strategy: str = _distribution(
      "enum", "mirrored", "one_device, mirrored (all local GPUs, or the CPU), "
      "multi_worker_mirrored (hosts described by TF_CONFIG) or tpu.",
      enum_values=distribution.STRATEGIES)
  num_gpus: int | None = _distribution(
      "integer", None, "GPUs for one_device/mirrored; default all visible GPUs.")
  tpu: str | None = _distribution(
      "string", None, "Cloud TPU name, 'local', or grpc://host:port address.")
  use_tpu: bool = _distribution(
      "bool", False, "Original flag: run on the TPU given by --tpu_name/--master.")
  tpu_name: str | None = _distribution(
      "string", None, "Original flag: Cloud TPU name (same as --tpu).")
  tpu_zone: str | None = _distribution(
      "string", None, "GCE zone of the Cloud TPU (default: detected).")
  gcp_project: str | None = _distribution(
      "string", None, "GCP project of the Cloud TPU (default: detected).")
  master: str | None = _distribution(
      "string", None, "Original flag: TPU gRPC address, used when --tpu_name is unset.")
  num_tpu_cores: int = _distribution(
      "integer", 8, "Original flag: TPU cores; the TPU's own count is used.")

  mixed_precision: str = _speed(
      "enum", "float32", "Compute dtype; mixed_float16 uses dynamic loss scaling; weights stay "
      "float32.", enum_values=mixed_precision.POLICIES)
  jit_compile: bool = _speed("bool", False, "Compile the forward and backward pass with XLA.")
  gradient_accumulation_steps: int = _speed(
      "integer", 1, "Micro-batches per optimizer step; the train batch size stays the number of "
      "examples per step and must be divisible by replicas * this.")
  steps_per_loop: int = _speed(
      "integer", 1000, "At most this many steps per call of the compiled training loop (a call "
      "also ends at each log line and checkpoint); larger saves host round trips on TPU.",
      aliases=("iterations_per_loop",))

  log_every_steps: int = _progress(
      "integer", 100, "Log a training line (step, loss, learning rate, examples/s, ETA) and "
      "write the TensorBoard scalars every this many steps.")
  log_every_seconds: float = _progress(
      "float", 60.0, "Also log at least this often (seconds), whatever --log_every_steps says.")

  output_dir: str | None = _output(
      "string", None, "Checkpoints, summaries and eval_results.txt; a run resumes from the "
      "latest checkpoint found here.")
  init_checkpoint: str | None = _output(
      "string", None, "Warm start (weights only) when output_dir holds no checkpoint. Its "
      "encoder must match the config both ways (same layers and variables). A path, or a "
      "released model's name (uncased_L-12_H-768_A-12, bert-base-uncased, ...) or a "
      "HuggingFace repo id (owner/name), downloaded once into $BERT_CACHE_DIR (default "
      "~/.cache/bert): see docs/pretrained_models.md.")
  partial_init_checkpoint: bool = _output(
      "bool", False, "Accept an --init_checkpoint whose encoder differs from the config (e.g. "
      "the first layers of a deeper model): what matches by name is loaded, the rest is "
      "logged.")
  save_checkpoints_steps: int = _output("integer", 1000, "Steps between checkpoints.")
  keep_checkpoint_max: int = _output(
      "integer", 5, "Checkpoints kept in output_dir (0 keeps all).")
  preemption_grace_seconds: float = _output(
      "float", 30.0, "On SIGTERM (a TPU or spot VM preempted, a pod evicted), training saves a "
      "checkpoint at the step it reached and exits with status 143 within this many seconds; "
      "the same command resumes it. Each call of the training loop is kept under a quarter of "
      "it.")

  seed: int | None = _seed(
      "integer", None, "Seed of the run's random draws (new layers' initial values, dropout, "
      "the order of the training data), with TensorFlow's ops made deterministic: the same "
      "seed, data and machine repeat a run. Unset, every run differs, as the original's. A run "
      "resumed from a checkpoint starts its draws anew.")

  optimizer: str = _optimizer(
      "enum", "adamw", "adamw: the original AdamWeightDecay; lamb: LAMB (layer-wise trust "
      "ratio).", enum_values=optimization.OPTIMIZER_TYPES)

  def validate(self):
    """The engine's own checks: every step and log interval positive.

    Raises:
      errors.ConfigError: a non-positive --save_checkpoints_steps, --steps_per_loop,
        --log_every_steps, --log_every_seconds, --gradient_accumulation_steps or
        --preemption_grace_seconds.
    """
    super().validate()
    for name in ("save_checkpoints_steps", "steps_per_loop", "log_every_steps",
                 "log_every_seconds", "gradient_accumulation_steps", "preemption_grace_seconds"):
      if not getattr(self, name) > 0:  # NaN too
        raise errors.ConfigError(f"--{name} must be positive, got {getattr(self, name)}")
    if self.distribution_strategy != "tpu" and not (self.tpu or self.use_tpu):
      self.warn_without_effect(("tpu_zone", "gcp_project", "num_tpu_cores", "master"),
                               "without a TPU (--distribution_strategy=tpu with --tpu, or "
                               "--use_tpu)")
    if self.distribution_strategy in ("tpu", "multi_worker_mirrored"):
      self.warn_without_effect(("num_gpus",), f"with --distribution_strategy="
                               f"{self.distribution_strategy}")

  def strategy(self):
    """The `tf.distribute` strategy of the distribution fields (see `distribution`)."""
    return distribution.strategy_from_config(self)

  def engine_run_config(self, num_train_steps, train_batch_size, eval_batch_size=8):
    """The `engine.RunConfig` of these settings plus the runner's step count and batch sizes."""
    return engine.RunConfig(
        output_dir=self.output_dir,
        num_train_steps=num_train_steps,
        train_batch_size=train_batch_size,
        eval_batch_size=eval_batch_size,
        steps_per_loop=self.steps_per_loop,
        log_every_steps=self.log_every_steps,
        log_every_seconds=self.log_every_seconds,
        save_checkpoints_steps=self.save_checkpoints_steps,
        keep_checkpoint_max=self.keep_checkpoint_max,
        init_checkpoint=self.init_checkpoint,
        partial_init_checkpoint=self.partial_init_checkpoint,
        gradient_accumulation_steps=self.gradient_accumulation_steps,
        mixed_precision=self.mixed_precision,
        jit_compile=self.jit_compile,
        seed=self.seed,
        preemption_grace_seconds=self.preemption_grace_seconds)


@dataclasses.dataclass(kw_only=True)
class InputCompressionConfig(config.FlagConfig):
  """--input_compression, for runners that read TFRecord files they did not write."""
  input_compression: str = _input(
      "enum", "none", "Compression of the input TFRecord files.",
      enum_values=sorted(input_pipeline.COMPRESSION_TYPES))


def eval_every_steps_field():
  """The --eval_every_steps field (evaluation while training) of a runner's config."""
  return _evaluation(
      "integer", None, "With --do_train, evaluate the dev data every this many steps and after "
      "the last: logged, in TensorBoard, and one JSON line each in "
      f"<output_dir>/{periodic_evaluation.HISTORY_FILENAME}.")


def check_positive(run_config, names):
  """Raises `errors.UsageError` for the first of the fields `names` that is set and not
  positive."""
  for name in names:
    value = getattr(run_config, name)
    if value is not None and not value > 0:  # NaN too
      raise errors.UsageError(f"--{name} must be positive, got {value}")


def check_starting_weights(run_config, bert_config, do_train, actions=()):
  """The checks of where a run's weights come from, before any work: a run that trains must
  not run under oneDNN's frozen-weights setting (`base.frozen_weights`), whose products keep the
  weights of their first call; a run that does not train needs weights (`check_weights_exist`);
  an --init_checkpoint a run will start from (none in --output_dir to resume) must fit the
  config.

  Args:
    run_config: an `EngineConfig` with `bert_config_file`.
    bert_config: the model's `BertConfig`.
    do_train: whether the run trains.
    actions: the flags of what the run does instead (named in the error), e.g. `("--do_eval",)`.

  Raises:
    errors.ConfigError: a run that trains under the frozen-weights setting; no weights for a
      run that does not train.
    checkpoint_io.CheckpointError: an --init_checkpoint of another shape than the config.
  """
  if do_train:
    frozen_weights.refuse_training("--do_train")
  else:
    check_weights_exist(run_config, actions)
  # A model's name is checked once `resolve_weights()` has fetched it, in the run.
  if (run_config.init_checkpoint and not pretrained_models.is_known_name(
      run_config.init_checkpoint) and not tf.train.latest_checkpoint(run_config.output_dir)):
    model_inputs.check_init_checkpoint(run_config.init_checkpoint, bert_config,
                                       run_config.bert_config_file,
                                       run_config.partial_init_checkpoint)


def check_weights_exist(run_config, actions):
  """Raises `errors.ConfigError` when a run that does not train has no weights to use: no
  checkpoint in --output_dir and no --init_checkpoint (it would evaluate, predict or export a
  randomly initialised model, whose scores look like results)."""
  if run_config.init_checkpoint or tf.train.latest_checkpoint(run_config.output_dir):
    return
  raise errors.ConfigError(
      f"{' and '.join(actions)} without --do_train needs a checkpoint in --output_dir="
      f"{run_config.output_dir} or an --init_checkpoint; there is none, and random weights "
      "would give results that look real")
