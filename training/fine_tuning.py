"""What the fine-tuning runners (run_classifier, run_ner, run_squad) share after their flags are
parsed: checks before any work, the step count, the optimizer, the label list file, the export."""

import os

import tensorflow as tf

from base import atomic_files
from base import errors
from data import tokenization
from modeling import optimization
from serving import saved_model_export
from training import flags as training_flags
from training import model_inputs

LABEL_LIST_FILENAME = "label_list.txt"


def check_flags(flag_values, bert_config):
  """The checks of `training.flags.define_fine_tuning_flags`' values, as `errors.UsageError`s.

  Raises:
    errors.UsageError: nothing to do, `--max_seq_length` beyond the position table or too short, a
      vocab larger than the config's, a non-positive size or rate, a warmup proportion outside
      [0, 1], no weights for a run that does not train, --export_ids_only without --export_dir.
    tokenization.VocabError: `--do_lower_case` contradicts a released checkpoint's name.
  """
  actions = [name for name in ("do_train", "do_eval", "do_predict", "export_dir")
             if name in flag_values]
  if not any(flag_values[name].value for name in actions):
    raise errors.UsageError(f"at least one of {', '.join('--' + name for name in actions)} is "
                         "needed")
  model_inputs.check_max_seq_length(flag_values.max_seq_length, bert_config,
                                    flag_values.bert_config_file)
  model_inputs.check_vocab(flag_values.vocab_file, bert_config, flag_values.bert_config_file)
  for name in ("train_batch_size", "eval_batch_size", "predict_batch_size", "learning_rate",
               "num_train_epochs"):
    if name in flag_values and flag_values[name].value <= 0:
      raise errors.UsageError(f"--{name} must be positive, got {flag_values[name].value}")
  if not 0 <= flag_values.warmup_proportion <= 1:
    raise errors.UsageError(
        f"--warmup_proportion must be in [0, 1], got {flag_values.warmup_proportion}")
  tokenization.validate_case_matches_checkpoint(flag_values.do_lower_case,
                                                flag_values.init_checkpoint)
  if flag_values.init_checkpoint and not tf.train.latest_checkpoint(flag_values.output_dir):
    model_inputs.check_init_checkpoint(flag_values.init_checkpoint, bert_config,
                                       flag_values.bert_config_file,
                                       flag_values.partial_init_checkpoint)
  if flag_values.export_ids_only and not flag_values.export_dir:
    raise errors.UsageError("--export_ids_only needs --export_dir")
  if not flag_values.do_train:
    training_flags.check_weights_exist(flag_values)
  if flag_values.export_dir:
    check_export_flags(flag_values)


def check_export_flags(flag_values):
  """Raises `errors.UsageError` for a taken or non-positive --export_version, before any work."""
  try:
    saved_model_export.check_version(flag_values.export_dir, flag_values.export_version)
  except saved_model_export.ExportError as error:
    raise errors.UsageError(str(error)) from None


def export(trainer, flag_values, make_server):
  """Writes the trained model for TensorFlow Serving (every worker builds the servable; only the
  chief writes it).

  Args:
    trainer: the runner's `engine.Trainer` (restored from --output_dir or --init_checkpoint if it
      has not trained).
    flag_values: the parsed flags (--export_dir, --export_version, --export_ids_only).
    make_server: `(model, with_text) -> servable` with a `signatures()` method.
  """
  trainer.initialize()
  server = make_server(trainer.model, not flag_values.export_ids_only)
  if trainer.is_chief:
    saved_model_export.export(server, flag_values.export_dir, server.signatures(),
                              flag_values.export_version)


def train_steps(flag_values, num_examples):
  """`(num_train_steps, num_warmup_steps)` as the original: int(examples / batch * epochs), at
  least 1 when training; warmup int(steps * warmup_proportion). (0, 0) without --do_train."""
  if not flag_values.do_train:
    return 0, 0
  num_train_steps = max(1, int(num_examples / flag_values.train_batch_size
                               * flag_values.num_train_epochs))
  return num_train_steps, int(num_train_steps * flag_values.warmup_proportion)


def optimizer_fn(flag_values, num_train_steps, num_warmup_steps):
  """The `engine.Trainer` optimizer factory of the flags, or None without --do_train."""
  if not flag_values.do_train:
    return None
  return lambda: optimization.create_optimizer(flag_values.learning_rate, num_train_steps,
                                               num_warmup_steps, flag_values.optimizer)


def write_label_list(output_dir, label_list):
  """Writes `output_dir/label_list.txt`, one label per line in label-id order, atomically."""
  with atomic_files.open_for_writing(os.path.join(output_dir, LABEL_LIST_FILENAME)) as f:
    f.write("".join(f"{label}\n" for label in label_list))
