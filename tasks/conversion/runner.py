"""Converting checkpoints: `run(config)` converts BERT weights in the direction a
`ConversionConfig` names.

Usage, from Python (convert_checkpoint.py does the same with the config of its flags):
  from tasks.conversion import runner
  from tasks.conversion.config import ConversionConfig
  result = runner.run(ConversionConfig(direction="hf_to_bert", input_dir="all-MiniLM-L6-v2",
                                       output_dir="minilm_bert"))
"""

import dataclasses

from absl import logging

from base import cluster
from base import output_locations
from modeling import pretrained_models
from modeling.conversion import hf_metadata
from modeling.conversion import huggingface
from modeling.conversion import keras_hub
from modeling.conversion import model_garden
from serving import tf_hub_export


@dataclasses.dataclass(frozen=True)
class ConversionResult:
  """What a conversion wrote.

  Attributes:
    direction: the --direction.
    output_dir: the directory written.
    left_out: the names of the variables the target had no place for (`bert_to_*`), else ().
    do_lower_case: the casing the converted tokenizer asks for (keras_hub_to_bert,
      tf_hub_to_bert, hf_to_bert when its tokenizer_config.json says it), or writes
      (bert_to_hf), else None.
    hf_architecture: the HuggingFace model class read (hf_to_bert, from config.json's
      architectures, when it names one) or written (bert_to_hf), else None.
    labels: the classifier's labels in id order that hf_to_bert wrote to label_list.txt or
      bert_to_hf to config.json's id2label, else ().
  """
  direction: str
  output_dir: str
  left_out: tuple = ()
  do_lower_case: bool | None = None
  hf_architecture: str | None = None
  labels: tuple = ()


def _log_left_out(names, target):
  if names:
    logging.info("left out %d variables (%s has no place for them): %s", len(names), target,
                 ", ".join(names[:5]) + (" ..." if len(names) > 5 else ""))


def _labels_note(labels, where):
  return f"; {len(labels)} labels in {where}" if labels else ""


def _with_hf_meaning(result, converted):
  """`result` with what a HuggingFace conversion (`huggingface.HfConversion`) carried."""
  return dataclasses.replace(result, do_lower_case=converted.do_lower_case,
                             hf_architecture=converted.architecture,
                             labels=tuple(converted.labels or ()),
                             left_out=tuple(converted.left_out))


def run(config):
  """Runs a `ConversionConfig` in this process: `config.validate()`, --output_dir claimed for
  the conversion, then the weights converted; callable more than once in one process.

  Returns:
    the `ConversionResult`.

  Raises:
    errors.UserError: a flag, or input that cannot be converted (nothing written then).
  """
  config.validate()
  config = config.replace(
      input_dir=pretrained_models.resolve_input_dir(config.input_dir, config.direction))
  with output_locations.claimed_output_dir("output_dir", config.output_dir,
                                           claim=cluster.is_chief_process()):
    return _convert(config)


def _convert(config):
  direction, input_dir, output_dir = config.direction, config.input_dir, config.output_dir
  result = ConversionResult(direction=direction, output_dir=output_dir)
  if direction == "hf_to_bert":
    converted = huggingface.convert_hf_to_original(input_dir, output_dir)
    logging.info("wrote %s in the original layout (hidden_act=%s, from %s)%s%s", output_dir,
                 converted.config.hidden_act, converted.architecture or "a config.json without "
                 "architectures", _labels_note(converted.labels, "label_list.txt"),
                 "" if converted.do_lower_case is None
                 else f"; pass --do_lower_case={converted.do_lower_case}")
    result = _with_hf_meaning(result, converted)
  elif direction == "bert_to_hf":
    converted = huggingface.convert_original_to_hf(
        input_dir, output_dir, config.vocab_file, config.hf_architecture, config.do_lower_case)
    _log_left_out(list(converted.left_out), converted.architecture)
    logging.info("wrote %d tensors to %s/%s as %s%s, tokenizer do_lower_case=%s",
                 converted.tensors, output_dir, huggingface.HF_WEIGHTS, converted.architecture,
                 _labels_note(converted.labels, "id2label"), converted.do_lower_case)
    result = _with_hf_meaning(result, converted)
  elif direction == "keras_hub_to_bert":
    bert_config, lowercase = keras_hub.convert_keras_hub_to_original(input_dir,
                                                                               output_dir)
    logging.info("wrote %s in the original layout (%d layers); its tokenizer %s: pass "
                 "--do_lower_case=%s", output_dir, bert_config.num_hidden_layers,
                 "lower-cases" if lowercase else "keeps case", lowercase)
    result = dataclasses.replace(result, do_lower_case=lowercase)
  elif direction == "bert_to_keras_hub":
    left_out = keras_hub.convert_original_to_keras_hub(
        input_dir, output_dir, config.do_lower_case, config.vocab_file)
    _log_left_out(left_out, "a BertBackbone")
    logging.info("wrote a keras-hub preset to %s", output_dir)
    result = dataclasses.replace(result, left_out=tuple(left_out))
  elif direction == "model_garden_to_bert":
    bert_config = model_garden.convert_model_garden_to_original(
        input_dir, output_dir, config.bert_config_file, config.vocab_file,
        config.copy_pooler_dense_to_encoder)
    logging.info("wrote %s in the original layout (%d layers, hidden_act=%s)", output_dir,
                 bert_config.num_hidden_layers, bert_config.hidden_act)
  elif direction == "bert_to_model_garden":
    left_out = model_garden.convert_original_to_model_garden(
        input_dir, output_dir, config.vocab_file)
    _log_left_out(left_out, "a Model Garden encoder with a masked LM")
    logging.info("wrote a Model Garden checkpoint to %s", output_dir)
    result = dataclasses.replace(result, left_out=tuple(left_out))
  elif direction == "tf_hub_to_bert":
    bert_config, do_lower_case, difference = model_garden.convert_tf_hub_to_original(
        input_dir, output_dir)
    logging.info("wrote %s in the original layout (%d layers, hidden_act=%s: outputs within "
                 "%.2g of the SavedModel's); pass --do_lower_case=%s", output_dir,
                 bert_config.num_hidden_layers, bert_config.hidden_act, difference,
                 do_lower_case)
    result = dataclasses.replace(result, do_lower_case=do_lower_case)
  elif direction == "bert_to_tf_hub":
    saved_lower_case = hf_metadata.read_do_lower_case(input_dir)
    lower_case = config.do_lower_case if saved_lower_case is None else saved_lower_case
    export = tf_hub_export.export_tf_hub(input_dir, output_dir, lower_case, config.vocab_file)
    _log_left_out(export.left_out, "a TF Hub BERT encoder")
    logging.info("wrote the TF Hub encoder %s and preprocessing %s (seq_length %d by default)",
                 export.encoder_dir, export.preprocessing_dir, export.default_seq_length)
    result = dataclasses.replace(result, left_out=tuple(export.left_out),
                                 do_lower_case=lower_case)
  return result
