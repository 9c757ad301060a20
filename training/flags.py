"""Flag groups shared by the runners (run_pretraining and the fine-tuning runners of `tasks.runner`).

Each runner defines its own task flags (as the original scripts) and calls the `define_*` functions
below for the engine's flags; `run_config_from_flags` turns the values into an `engine.RunConfig`.
The original's TPU flags (`--use_tpu`, `--tpu_name`, `--tpu_zone`, `--gcp_project`, `--master`,
`--num_tpu_cores`) and `--iterations_per_loop` keep working.
"""

from absl import flags
import tensorflow as tf

from base import cli
from base import errors
from modeling import optimization
from training import distribution
from training import engine
from training import input_pipeline
from training import mixed_precision
from training import model_inputs
from training import periodic_evaluation


@cli.help_group("Distribution: GPUs, hosts, TPU")
def define_distribution_flags(flag_values=flags.FLAGS):
  """--distribution_strategy, --num_gpus, --tpu and the original's TPU flags."""
  fv = {"flag_values": flag_values}
  flags.DEFINE_enum("distribution_strategy", "mirrored", distribution.STRATEGIES,
                    "one_device, mirrored (all local GPUs, or the CPU), multi_worker_mirrored "
                    "(hosts described by TF_CONFIG) or tpu.", **fv)
  flags.DEFINE_integer("num_gpus", None,
                       "GPUs for one_device/mirrored; default all visible GPUs.", **fv)
  flags.DEFINE_string("tpu", None, "Cloud TPU name, 'local', or grpc://host:port address.", **fv)
  flags.DEFINE_bool("use_tpu", False,
                    "Original flag: run on the TPU given by --tpu_name/--master.", **fv)
  flags.DEFINE_string("tpu_name", None, "Original flag: Cloud TPU name (same as --tpu).", **fv)
  flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU (default: detected).", **fv)
  flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU (default: detected).",
                      **fv)
  flags.DEFINE_string("master", None,
                      "Original flag: TPU gRPC address, used when --tpu_name is unset.", **fv)
  flags.DEFINE_integer("num_tpu_cores", 8,
                       "Original flag: TPU cores; the TPU's own count is used.", **fv)


@cli.help_group("Speed: mixed precision, XLA, accumulation")
def define_speed_flags(flag_values=flags.FLAGS):
  """--mixed_precision, --jit_compile, --gradient_accumulation_steps, --steps_per_loop."""
  fv = {"flag_values": flag_values}
  flags.DEFINE_enum("mixed_precision", "float32", mixed_precision.POLICIES,
                    "Compute dtype; mixed_float16 uses dynamic loss scaling; weights stay "
                    "float32.", **fv)
  flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass with XLA.", **fv)
  flags.DEFINE_integer("gradient_accumulation_steps", 1,
                       "Micro-batches per optimizer step; the train batch size stays the number "
                       "of examples per step and must be divisible by replicas * this.", **fv)
  flags.DEFINE_integer("steps_per_loop", 1000,
                       "At most this many steps per call of the compiled training loop (a call "
                       "also ends at each log line and checkpoint); larger saves host round "
                       "trips on TPU.", **fv)
  flags.DEFINE_alias("iterations_per_loop", "steps_per_loop", **fv)


@cli.help_group("Progress: log lines and TensorBoard")
def define_logging_flags(flag_values=flags.FLAGS):
  """--log_every_steps, --log_every_seconds."""
  fv = {"flag_values": flag_values}
  flags.DEFINE_integer("log_every_steps", 100,
                       "Log a training line (step, loss, learning rate, examples/s, ETA) and "
                       "write the TensorBoard scalars every this many steps.", **fv)
  flags.DEFINE_float("log_every_seconds", 60.0,
                     "Also log at least this often (seconds), whatever --log_every_steps says.", **fv)


@cli.help_group("Output and checkpoints")
def define_checkpoint_flags(flag_values=flags.FLAGS):
  """--output_dir, --init_checkpoint, --partial_init_checkpoint, --save_checkpoints_steps,
  --keep_checkpoint_max."""
  fv = {"flag_values": flag_values}
  flags.DEFINE_string("output_dir", None,
                      "Checkpoints, summaries and eval_results.txt; a run resumes from the latest "
                      "checkpoint found here.", **fv)
  flags.DEFINE_string("init_checkpoint", None,
                      "Warm start (weights only) when output_dir holds no checkpoint. Its "
                      "encoder must match the config both ways (same layers and variables).",
                      **fv)
  flags.DEFINE_bool("partial_init_checkpoint", False,
                    "Accept an --init_checkpoint whose encoder differs from the config (e.g. "
                    "the first layers of a deeper model): what matches by name is loaded, the "
                    "rest is logged.", **fv)
  flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between checkpoints.", **fv)
  flags.DEFINE_integer("keep_checkpoint_max", 5,
                       "Checkpoints kept in output_dir (0 keeps all).", **fv)


@cli.help_group("Reproducibility")
def define_seed_flag(flag_values=flags.FLAGS):
  """--seed."""
  flags.DEFINE_integer("seed", None,
                       "Seed of the run's random draws (new layers' initial values, dropout, the "
                       "order of the training data), with TensorFlow's ops made deterministic: "
                       "the same seed, data and machine repeat a run. Unset, every run differs, "
                       "as the original's. A run resumed from a checkpoint starts its draws "
                       "anew.", flag_values=flag_values)


@cli.help_group("Optimizer")
def define_optimizer_flags(flag_values=flags.FLAGS):
  """--optimizer."""
  flags.DEFINE_enum("optimizer", "adamw", optimization.OPTIMIZER_TYPES,
                    "adamw: the original AdamWeightDecay; lamb: LAMB (layer-wise trust ratio).",
                    flag_values=flag_values)


@cli.help_group("Input")
def define_input_flags(flag_values=flags.FLAGS):
  """--input_compression."""
  flags.DEFINE_enum("input_compression", "none", sorted(input_pipeline.COMPRESSION_TYPES),
                    "Compression of the input TFRecord files.", flag_values=flag_values)


@cli.help_group("Input")
def define_padding_flags(flag_values=flags.FLAGS):
  """--dynamic_padding (fine-tuning runners)."""
  flags.DEFINE_bool("dynamic_padding", None,
                    "Pad each batch to its longest example (training batches grouped by length) "
                    "instead of --max_seq_length. Default: on, except on TPU, which needs static "
                    "shapes.", flag_values=flag_values)


def dynamic_padding_from_flags(flag_values, strategy):
  """--dynamic_padding, defaulting to True unless `strategy` is a TPUStrategy."""
  if flag_values.dynamic_padding is None:
    return not isinstance(strategy, tf.distribute.TPUStrategy)
  return flag_values.dynamic_padding


@cli.help_group("Model files, what to do, batch sizes, schedule")
def define_fine_tuning_flags(example_unit="Examples", max_seq_length=128, with_eval=True,
                             flag_values=flags.FLAGS):
  """The original fine-tuning runners' flags: model files, sequence length, what to do, batch
  sizes and the learning-rate schedule (`example_unit` names what a batch holds; `with_eval`
  False leaves out --do_eval and --eval_batch_size, which run_squad.py never had)."""
  fv = {"flag_values": flag_values}
  flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pretrained model.", **fv)
  flags.DEFINE_string("vocab_file", None, "vocab.txt of the pretrained model.", **fv)
  flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).",
                    **fv)
  flags.DEFINE_integer("max_seq_length", max_seq_length, "Word pieces per input after packing, [CLS] and "
                       "[SEP] included.", **fv)
  flags.DEFINE_bool("do_train", False, "Fine-tune on the training set.", **fv)
  if with_eval:
    flags.DEFINE_bool("do_eval", False, "Evaluate on the dev set.", **fv)
  flags.DEFINE_bool("do_predict", False, "Predict the test set.", **fv)
  flags.DEFINE_integer("train_batch_size", 32,
                       f"{example_unit} per optimizer step, over all replicas.", **fv)
  if with_eval:
    flags.DEFINE_integer("eval_batch_size", 8, f"{example_unit} per evaluation step.", **fv)
  flags.DEFINE_integer("predict_batch_size", 8, f"{example_unit} per prediction step.", **fv)
  flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.", **fv)
  flags.DEFINE_float("num_train_epochs", 3.0, "Passes over the training set.", **fv)
  flags.DEFINE_float("warmup_proportion", 0.1,
                     "Fraction of the training steps with a linear learning-rate warmup.", **fv)


@cli.help_group("Evaluation while training, best checkpoint, early stopping")
def define_evaluation_flags(with_best_checkpoint=True, flag_values=flags.FLAGS):
  """--eval_every_steps; with `with_best_checkpoint` (the fine-tuning runners) also
  --best_checkpoint_metric/_mode, --early_stopping_patience, --final_checkpoint."""
  fv = {"flag_values": flag_values}
  flags.DEFINE_integer("eval_every_steps", None,
                       "With --do_train, evaluate the dev data every this many steps and after "
                       "the last: logged, in TensorBoard, and one JSON line each in "
                       f"<output_dir>/{periodic_evaluation.HISTORY_FILENAME}.", **fv)
  if not with_best_checkpoint:
    return
  flags.DEFINE_string("best_checkpoint_metric", None,
                      "The dev metric that chooses the best checkpoint, kept in "
                      f"<output_dir>/{periodic_evaluation.BEST_DIRNAME}/ (default: the task's "
                      "usual figure, e.g. f1 for MRPC, matthews_corrcoef for CoLA, pearson for "
                      "STS-B, f1 for NER and SQuAD, else eval_accuracy).", **fv)
  flags.DEFINE_enum("best_checkpoint_mode", None, periodic_evaluation.MODES,
                    "Whether a higher or lower --best_checkpoint_metric is better (default: min "
                    "for a loss, else max).", **fv)
  flags.DEFINE_integer("early_stopping_patience", None,
                       "Stop training after this many evaluations in a row without a better "
                       "--best_checkpoint_metric.", **fv)
  flags.DEFINE_enum("final_checkpoint", "best", ("best", "last"),
                    "Which checkpoint --do_eval, --do_predict and --export_dir use after "
                    "evaluation while training kept a best one.", **fv)


def evaluation_config_from_flags(flag_values, metric_names, default_metric, eval_data):
  """The `periodic_evaluation.EvaluationConfig` of the flags, or None without
  --eval_every_steps (with no best checkpoint when the flags of one are not defined).

  Args:
    flag_values: the parsed flags.
    metric_names: the names the task's evaluation reports (a metric to choose by must be one).
    default_metric: the task's usual figure.
    eval_data: what the run evaluates on, or None when it has none (named in the error).

  Raises:
    errors.UsageError: a non-positive value, a flag of this group without --eval_every_steps,
      evaluation without --do_train or without dev data, an unknown metric.
  """
  every_steps = flag_values.eval_every_steps
  best_flags = [name for name in ("best_checkpoint_metric", "best_checkpoint_mode",
                                  "early_stopping_patience") if name in flag_values]
  if every_steps is None:
    for name in best_flags:
      if flag_values[name].value is not None:
        raise errors.UsageError(f"--{name} needs --eval_every_steps")
    return None
  check_positive(flag_values, ("eval_every_steps", "early_stopping_patience"))
  if not flag_values.do_train:
    raise errors.UsageError("--eval_every_steps evaluates while training: it needs --do_train")
  if eval_data is None:
    raise errors.UsageError(f"--eval_every_steps needs dev data to evaluate on ({default_metric}"
                            " is computed on it)")
  if not best_flags:
    return periodic_evaluation.EvaluationConfig(every_steps=every_steps)
  metric = flag_values.best_checkpoint_metric or default_metric
  if metric not in metric_names:
    raise errors.UsageError(f"--best_checkpoint_metric={metric}: not a metric of this task; "
                            f"its metrics: {', '.join(sorted(metric_names))}")
  return periodic_evaluation.EvaluationConfig(
      every_steps=every_steps, metric=metric,
      mode=flag_values.best_checkpoint_mode or periodic_evaluation.default_mode(metric),
      patience=flag_values.early_stopping_patience)


@cli.help_group("Export for TensorFlow Serving")
def define_export_flags(flag_values=flags.FLAGS):
  """--export_dir, --export_version (fine-tuning runners)."""
  fv = {"flag_values": flag_values}
  flags.DEFINE_string("export_dir", None,
                      "Write a SavedModel for TensorFlow Serving to <export_dir>/<version> after "
                      "training (or from --init_checkpoint / --output_dir's checkpoint alone).",
                      **fv)
  flags.DEFINE_integer("export_version", None,
                       "Version directory of the export; default the Unix time.", **fv)
  flags.DEFINE_bool("export_ids_only", False,
                    "Export the predict_ids signature alone, without the in-graph tokenizer: a "
                    "stock TensorFlow Serving binary lacks the tensorflow-text ops.", **fv)


def define_engine_flags(flag_values=flags.FLAGS):
  """The groups every runner of the training engine has: distribution, speed, logging,
  checkpoints, seed, optimizer."""
  define_distribution_flags(flag_values)
  define_speed_flags(flag_values)
  define_logging_flags(flag_values)
  define_checkpoint_flags(flag_values)
  define_seed_flag(flag_values)
  define_optimizer_flags(flag_values)


def define_fine_tuning_runner_flags(example_unit="Examples", max_seq_length=128, with_eval=True,
                                    flag_values=flags.FLAGS):
  """Every flag group of a fine-tuning runner: the engine's, padding, the original's fine-tuning
  flags (arguments as `define_fine_tuning_flags`) and export."""
  define_engine_flags(flag_values)
  define_padding_flags(flag_values)
  define_fine_tuning_flags(example_unit, max_seq_length, with_eval, flag_values)
  define_evaluation_flags(flag_values)
  define_export_flags(flag_values)


def define_all(flag_values=flags.FLAGS):
  """The groups of the pretraining runner (and the test runners): the engine's and the input's."""
  define_engine_flags(flag_values)
  define_input_flags(flag_values)


def check_positive(flag_values, names):
  """Raises `errors.UsageError` for the first of the flags `names` (those defined and set) that is
  not positive."""
  for name in names:
    if (name in flag_values and flag_values[name].value is not None
        and flag_values[name].value <= 0):
      raise errors.UsageError(f"--{name} must be positive, got {flag_values[name].value}")


def check_starting_weights(flag_values, bert_config):
  """The checks of where a run's weights come from, before any work: a run that does not train
  needs weights (`check_weights_exist`); an --init_checkpoint a run will start from (none in
  --output_dir to resume) must fit the config.

  Raises:
    engine.ConfigError: no weights for a run that does not train.
    checkpoint_io.CheckpointError: an --init_checkpoint of another shape than the config.
  """
  if not flag_values.do_train:
    check_weights_exist(flag_values)
  if flag_values.init_checkpoint and not tf.train.latest_checkpoint(flag_values.output_dir):
    model_inputs.check_init_checkpoint(flag_values.init_checkpoint, bert_config,
                                       flag_values.bert_config_file,
                                       flag_values.partial_init_checkpoint)


def check_weights_exist(flag_values):
  """Raises `engine.ConfigError` when a run that does not train has no weights to use: no
  checkpoint in --output_dir and no --init_checkpoint (it would evaluate, predict or export a
  randomly initialised model, whose scores look like results)."""
  if flag_values.init_checkpoint or tf.train.latest_checkpoint(flag_values.output_dir):
    return
  actions = [f"--{name}" for name in ("do_eval", "do_predict", "export_dir")
             if name in flag_values and flag_values[name].value]
  raise engine.ConfigError(
      f"{' and '.join(actions)} without --do_train needs a checkpoint in --output_dir="
      f"{flag_values.output_dir} or an --init_checkpoint; there is none, and random weights "
      "would give results that look real")


def run_config_from_flags(flag_values, num_train_steps, train_batch_size, eval_batch_size=8):
  """Returns the `engine.RunConfig` of the shared flags plus the runner's own settings.

  Args:
    flag_values: `absl.flags.FLAGS` after parsing, with every group above defined.
    num_train_steps: the runner's step count (a flag for pretraining, derived from epochs when
      fine-tuning).
    train_batch_size, eval_batch_size: the runner's `--train_batch_size` / `--eval_batch_size`.
  """
  if flag_values.save_checkpoints_steps <= 0:
    raise engine.ConfigError(f"--save_checkpoints_steps must be positive, got "
                     f"{flag_values.save_checkpoints_steps}")
  if flag_values.steps_per_loop <= 0:
    raise engine.ConfigError(f"--steps_per_loop must be positive, got {flag_values.steps_per_loop}")
  if flag_values.log_every_steps <= 0:
    raise engine.ConfigError(f"--log_every_steps must be positive, got "
                             f"{flag_values.log_every_steps}")
  if flag_values.log_every_seconds <= 0:
    raise engine.ConfigError(f"--log_every_seconds must be positive, got "
                             f"{flag_values.log_every_seconds}")
  if flag_values.gradient_accumulation_steps <= 0:
    raise engine.ConfigError(f"--gradient_accumulation_steps must be positive, got "
                     f"{flag_values.gradient_accumulation_steps}")
  return engine.RunConfig(
      output_dir=flag_values.output_dir,
      num_train_steps=num_train_steps,
      train_batch_size=train_batch_size,
      eval_batch_size=eval_batch_size,
      steps_per_loop=flag_values.steps_per_loop,
      log_every_steps=flag_values.log_every_steps,
      log_every_seconds=flag_values.log_every_seconds,
      save_checkpoints_steps=flag_values.save_checkpoints_steps,
      keep_checkpoint_max=flag_values.keep_checkpoint_max,
      init_checkpoint=flag_values.init_checkpoint,
      partial_init_checkpoint=flag_values.partial_init_checkpoint,
      gradient_accumulation_steps=flag_values.gradient_accumulation_steps,
      mixed_precision=flag_values.mixed_precision,
      jit_compile=flag_values.jit_compile,
      seed=flag_values.seed)
