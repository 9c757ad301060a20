"""`run_squad.py`'s config: the shared fine-tuning fields (no dev split: the predict file is
scored when it has answers) plus the SQuAD files, windows and answer search."""

import dataclasses

from base import config
from base import errors
from tasks import config as tasks_config
from tasks.squad import spec as squad_spec
from training import config as training_config
from training import model_inputs


@dataclasses.dataclass(kw_only=True)
class SquadConfig(tasks_config.FineTuningConfig):
  """A SQuAD v1.1 or v2.0 run (see the flags' help).

  Example:
    >>> from tasks.squad.config import SquadConfig
    >>> SquadConfig(train_file="train-v1.1.json", vocab_file="vocab.txt",
    ...             bert_config_file="bert_config.json", output_dir="/tmp/squad").max_seq_length
    384
  """
  max_seq_length: int = tasks_config.max_seq_length_field(384)
  train_batch_size: int = tasks_config.batch_size_field(
      "Windows", "optimizer step, over all replicas.", 32)
  predict_batch_size: int = tasks_config.batch_size_field("Windows", "prediction step.", 8)

  train_file: str | None = config.flag(
      "string", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
  predict_file: str | None = config.flag(
      "string", None, "SQuAD JSON for predictions, e.g. dev-v1.1.json; scored when it has "
      "answers.")
  doc_stride: int = config.flag(
      "integer", 128, "How far each window of a long context starts after the previous one, in "
      "word pieces.")
  max_query_length: int = config.flag(
      "integer", 64, "Question word pieces kept (the rest is cut).")
  n_best_size: int = config.flag(
      "integer", 20, "Start and end candidates per window, and length of the n-best lists in "
      "nbest_predictions.json.")
  max_answer_length: int = config.flag("integer", 30, "Longest answer, in word pieces.")
  verbose_logging: bool = config.flag(
      "bool", False, "Log the windows of the first 20 questions (pieces, which window scores "
      "each piece, the answer span).")
  version_2_with_negative: bool = config.flag(
      "bool", False, "SQuAD v2.0: some questions have no answer.")
  null_score_diff_threshold: float = config.flag(
      "float", 0.0, "v2.0: answer \"\" when the null score exceeds the best span's score by "
      "more than this.")

  def validate_family(self, bert_config):
    if self.do_train and not self.train_file:
      raise errors.UsageError("--do_train needs --train_file")
    if self.do_predict and not self.predict_file:
      raise errors.UsageError("--do_predict needs --predict_file")
    model_inputs.check_segments(2, bert_config, self.bert_config_file,
                                "SQuAD packs question and context as two segments")
    if self.max_seq_length <= self.max_query_length + 3:
      raise errors.UsageError(
          f"--max_seq_length={self.max_seq_length} leaves no room for the context: it must be "
          f"more than --max_query_length + 3 = {self.max_query_length + 3}")
    training_config.check_positive(self, ("doc_stride", "n_best_size", "max_answer_length"))
    context_room = self.max_seq_length - self.max_query_length - 3
    if not (self.do_train or self.do_predict):
      self.warn_without_effect(("doc_stride",), "without --do_train or --do_predict")
    elif self.doc_stride > context_room:
      self.warn_without_effect(
          ("doc_stride",), f"beyond {context_room}, the context a window holds beside a question "
          f"of --max_query_length tokens (--max_seq_length - --max_query_length - 3): windows "
          "then follow each other without overlap")
    if not self.version_2_with_negative:
      self.warn_without_effect(("null_score_diff_threshold",), "without --version_2_with_negative")

  def make_spec(self):
    return squad_spec.SquadSpec()
