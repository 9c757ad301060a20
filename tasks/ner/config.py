"""`run_ner.py`'s config: the shared fine-tuning fields plus the CoNLL files and the tags."""

import dataclasses

from base import config
from tasks import config as tasks_config
from tasks.ner import spec as ner_spec


@dataclasses.dataclass(kw_only=True)
class NerConfig(tasks_config.FineTuningWithEvalConfig):
  """A named-entity recognition run on CoNLL column files (see the flags' help).

  Example:
    >>> from tasks.ner.config import NerConfig
    >>> NerConfig(data_dir="samples/ner", vocab_file="vocab.txt",
    ...           bert_config_file="bert_config.json", output_dir="/tmp/ner").train_batch_size
    32
  """
  train_batch_size: int = tasks_config.batch_size_field(
      "Windows", "optimizer step, over all replicas.", 32)
  eval_batch_size: int = tasks_config.batch_size_field("Windows", "evaluation step.", 8)
  predict_batch_size: int = tasks_config.batch_size_field("Windows", "prediction step.", 8)

  data_dir: str | None = config.flag("string", None,
                                     "Directory with train.txt, dev.txt and test.txt.")
  train_file: str | None = config.flag("string", None,
                                       "Training file (default: <data_dir>/train.txt).")
  dev_file: str | None = config.flag("string", None,
                                     "Evaluation file (default: <data_dir>/dev.txt).")
  predict_file: str | None = config.flag(
      "string", None, "File to tag (default: <data_dir>/test.txt); it may have the token "
      "column only.")
  labels: list | None = config.flag(
      "list", None, "The tags, in label-id order; default the tags of the training file (O "
      "first, then sorted).")
  doc_context: bool = config.flag(
      "bool", False, "Fill each window with the neighbouring sentences of the same -DOCSTART- "
      "document (unlabelled), as the BERT paper's NER setting.")

  def make_spec(self):
    return ner_spec.NerSpec()
