"""`convert_checkpoint.py`'s config: the direction, what to read and where to write."""

import dataclasses

from base import config
from base import errors
from base import output_locations
from modeling.conversion import hf_metadata

DIRECTIONS = ("hf_to_bert", "bert_to_hf", "keras_hub_to_bert", "bert_to_keras_hub",
              "model_garden_to_bert", "bert_to_model_garden", "tf_hub_to_bert", "bert_to_tf_hub")


@dataclasses.dataclass(kw_only=True)
class ConversionConfig(config.FlagConfig):
  """A conversion of BERT weights from `input_dir` to `output_dir` (see the flags' help).

  Example:
    >>> from tasks.conversion.config import ConversionConfig
    >>> conversion = ConversionConfig(direction="hf_to_bert", input_dir="all-MiniLM-L6-v2",
    ...                               output_dir="minilm_bert")
    >>> conversion.validate()
    >>> conversion.replace(direction="onnx_to_bert").validate()
    Traceback (most recent call last):
    ...
    base.errors.UsageError: --direction=onnx_to_bert: not one of hf_to_bert, ...
  """
  REQUIRED = ("direction", "input_dir", "output_dir")

  direction: str | None = config.flag(
      "enum", None, "<source>_to_bert: a directory of that source -> the original layout; "
      "bert_to_<target>: back.", enum_values=DIRECTIONS)
  input_dir: str | None = config.flag(
      "string", None, "Directory to convert; for hf_to_bert and bert_to_*, also a released "
      "model's name or a HuggingFace repo id (docs/pretrained_models.md).")
  output_dir: str | None = config.flag("string", None, "Directory to write (created if needed).")
  do_lower_case: bool = config.flag(
      "bool", True, "bert_to_keras_hub, bert_to_hf, bert_to_tf_hub: the written tokenizer "
      "lower-cases and strips accents, as the original's --do_lower_case (bert_to_hf and "
      "bert_to_tf_hub: unless --input_dir has a tokenizer_config.json, as hf_to_bert writes, "
      "which says it).")
  hf_architecture: str | None = config.flag(
      "enum", None, "bert_to_hf: the HuggingFace model class of config.json's architectures. "
      "Inferred from the checkpoint's heads, except for a classifier head (root-scope "
      "output_weights), which is BertForSequenceClassification's (run_classifier.py) or "
      "BertForTokenClassification's (run_ner.py): say which.",
      enum_values=hf_metadata.ARCHITECTURES)
  vocab_file: str | None = config.flag(
      "string", None, "bert_to_* and model_garden_to_bert: the vocabulary, when --input_dir has "
      "no vocab.txt (a run's --output_dir, read at its latest checkpoint; a Model Garden "
      "training directory).")
  bert_config_file: str | None = config.flag(
      "string", None, "model_garden_to_bert: the config of the checkpoint (default: the "
      "bert_config.json beside it, else sizes inferred from the weights with Model Garden's "
      "default activation, the tanh GELU).")
  copy_pooler_dense_to_encoder: bool = config.flag(
      "bool", False, "model_garden_to_bert: take the pooler from a BertPretrainerV2's "
      "next_sentence.pooler_dense (the one Model Garden's pre-training trains), as Model "
      "Garden's export_tfhub flag of that name.")

  def validate(self):
    """The checks before the input is read: a known direction and architecture, and a writable
    --output_dir (the converters check their input themselves before writing anything).

    Raises:
      errors.UserError: the first problem found (its message names the flag).
    """
    if self.direction not in DIRECTIONS:
      raise errors.UsageError(f"--direction={self.direction}: not one of "
                              f"{', '.join(DIRECTIONS)}")
    if self.hf_architecture not in (None,) + hf_metadata.ARCHITECTURES:
      raise errors.UsageError(f"--hf_architecture={self.hf_architecture}: not one of "
                              f"{', '.join(hf_metadata.ARCHITECTURES)}")
    output_locations.check_output_dir("output_dir", self.output_dir)
    super().validate()
