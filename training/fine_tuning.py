"""What the fine-tuning runners (run_classifier, run_ner, run_squad) share after their flags are
parsed: checks before any work, the step count, the optimizer, the label list file."""

import os

from data import atomic_files
from data import tokenization
from modeling import optimization
from training import cli

LABEL_LIST_FILENAME = "label_list.txt"


def check_flags(flag_values, bert_config):
  """The checks of `training.flags.define_fine_tuning_flags`' values, as `cli.UsageError`s.

  Raises:
    cli.UsageError: nothing to do, `--max_seq_length` beyond the position table or too short, a
      non-positive size or rate, a warmup proportion outside [0, 1].
    tokenization.VocabError: `--do_lower_case` contradicts a released checkpoint's name.
  """
  actions = [name for name in ("do_train", "do_eval", "do_predict", "export_dir")
             if name in flag_values]
  if not any(flag_values[name].value for name in actions):
    raise cli.UsageError(f"at least one of {', '.join('--' + name for name in actions)} is "
                         "needed")
  if flag_values.max_seq_length > bert_config.max_position_embeddings:
    raise cli.UsageError(
        f"--max_seq_length={flag_values.max_seq_length} exceeds max_position_embeddings "
        f"{bert_config.max_position_embeddings} of {flag_values.bert_config_file}")
  if flag_values.max_seq_length < 3:
    raise cli.UsageError(f"--max_seq_length={flag_values.max_seq_length}: needs room for [CLS], "
                         "a word piece and [SEP]")
  for name in ("train_batch_size", "eval_batch_size", "predict_batch_size", "learning_rate",
               "num_train_epochs"):
    if name in flag_values and flag_values[name].value <= 0:
      raise cli.UsageError(f"--{name} must be positive, got {flag_values[name].value}")
  if not 0 <= flag_values.warmup_proportion <= 1:
    raise cli.UsageError(
        f"--warmup_proportion must be in [0, 1], got {flag_values.warmup_proportion}")
  tokenization.validate_case_matches_checkpoint(flag_values.do_lower_case,
                                                flag_values.init_checkpoint)


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
