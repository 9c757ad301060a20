"""Conversion between HuggingFace BERT directories and the original release's layout.

HuggingFace: `config.json` + weights (`hf_files` reads `model.safetensors`, `pytorch_model.bin`
and `tf_model.h5`, in that order of preference, as PyTorch names: `Linear` weights `[out, in]`,
LayerNorm `weight`/`bias`) + `vocab.txt` + `tokenizer_config.json`. Original: `bert_config.json` +
`bert_model.ckpt.*` (TF1 names, kernels `[in, out]`, LayerNorm `gamma`/`beta`) + `vocab.txt`, and
what `hf_metadata` keeps of the rest (the labels, the casing). HuggingFace directories are written
with safetensors' numpy API only.

Name rules (HuggingFace prefix `bert.` optional, as `BertModel` files omit it):
  embeddings.{word,position,token_type}_embeddings.weight <-> bert/embeddings/<name>
  <scope>.LayerNorm.{weight,bias}                          <-> <scope>/LayerNorm/{gamma,beta}
  <scope>.{weight,bias} of a Linear                        <-> <scope>/{kernel (transposed),bias}
  encoder.layer.<i>.<...>                                  <-> bert/encoder/layer_<i>/<...>
  cls.predictions.bias                                     <-> cls/predictions/output_bias
  cls.seq_relationship.{weight,bias}                       <-> cls/seq_relationship/output_{weights,bias}
  classifier.{weight,bias} (sequence or token              <-> output_{weights,bias} (run_classifier,
    classification)                                            run_ner)
  qa_outputs.{weight,bias} (question answering)            <-> cls/squad/output_{weights,bias}
The `[out, in]` heads keep their layout on both sides. `cls.predictions.decoder.*` is the tied
word-embedding matrix and the same bias again, and `embeddings.position_ids` a constant buffer:
neither is a weight, so neither is converted.
"""

import dataclasses
import json
import os
import re

from absl import logging
import keras
import numpy as np
from safetensors import numpy as safetensors_numpy

from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling.conversion import hf_files
from modeling.conversion import hf_metadata
from modeling.conversion import original_files
from modeling.conversion.original_files import ConversionError

HF_CONFIG = "config.json"
HF_WEIGHTS = "model.safetensors"

# HuggingFace `hidden_act` -> this project's; HuggingFace's "gelu" is the exact erf GELU.
_HF_TO_BERT_ACTIVATION = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                          "relu": "relu", "tanh": "tanh", "linear": "linear"}
_BERT_TO_HF_ACTIVATION = {"gelu_exact": "gelu", "gelu": "gelu_new", "relu": "relu",
                          "tanh": "tanh", "linear": "linear"}
_NOT_WEIGHTS = re.compile(r"^(bert\.)?(embeddings\.position_ids|cls\.predictions\.decoder\..*)$")
_TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")
_OUTPUT_PROJECTIONS = {"cls.seq_relationship": "cls/seq_relationship", "classifier": "",
                       "qa_outputs": "cls/squad"}


def hf_to_original_name(hf_name):
  """Maps a HuggingFace parameter name to `(original name, transpose)`; None for non-weights.

  Raises:
    ConversionError: a name outside the BERT layout.
  """
  if _NOT_WEIGHTS.match(hf_name):
    return None
  name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
  scope, _, leaf = name.rpartition(".")
  if leaf not in ("weight", "bias"):
    raise ConversionError(f"unexpected HuggingFace tensor {hf_name}")
  if scope in _OUTPUT_PROJECTIONS:
    prefix = _OUTPUT_PROJECTIONS[scope] + "/" if _OUTPUT_PROJECTIONS[scope] else ""
    return prefix + ("output_weights" if leaf == "weight" else "output_bias"), False
  if name == "cls.predictions.bias":
    return "cls/predictions/output_bias", False
  path = re.sub(r"^encoder\.layer\.(\d+)\.", r"encoder.layer_\1.", scope).replace(".", "/")
  if not path.startswith("cls/"):
    path = "bert/" + path
  if not re.fullmatch(r"bert/(embeddings(/\w+)?|encoder/layer_\d+/[\w/]+|pooler/dense)"
                      r"|cls/predictions/transform/[\w/]+", path):
    raise ConversionError(f"unexpected HuggingFace tensor {hf_name}")
  if path.endswith("/LayerNorm"):
    return f"{path}/{'gamma' if leaf == 'weight' else 'beta'}", False
  if path.rpartition("/")[2] in _TABLES:
    if leaf != "weight":
      raise ConversionError(f"unexpected HuggingFace tensor {hf_name}")
    return path, False
  return f"{path}/{'kernel' if leaf == 'weight' else 'bias'}", leaf == "weight"


def original_to_hf_name(original_name, with_bert_prefix):
  """Maps an original variable name to `(HuggingFace name, transpose)`; None for training state.

  Args:
    original_name: e.g. `bert/encoder/layer_0/attention/self/query/kernel`.
    with_bert_prefix: prefix encoder names with `bert.` (files with heads, `BertForPreTraining`).

  Raises:
    ConversionError: a name outside the BERT layout.
  """
  if original_files.is_training_state(original_name):
    return None
  for hf_scope, scope in _OUTPUT_PROJECTIONS.items():
    prefix = scope + "/" if scope else ""
    if original_name in (prefix + "output_weights", prefix + "output_bias"):
      return f"{hf_scope}.{'weight' if original_name.endswith('weights') else 'bias'}", False
  if original_name == "cls/predictions/output_bias":
    return "cls.predictions.bias", False
  path, _, leaf = original_name.rpartition("/")
  if original_name.startswith("bert/embeddings/") and leaf in _TABLES:
    path, leaf, hf_leaf, transpose = original_name, "", "weight", False
  elif leaf in ("gamma", "beta"):
    hf_leaf, transpose = ("weight" if leaf == "gamma" else "bias"), False
  elif leaf in ("kernel", "bias"):
    hf_leaf, transpose = ("weight" if leaf == "kernel" else "bias"), leaf == "kernel"
  else:
    raise ConversionError(f"unexpected variable {original_name}")
  if path.startswith("bert/"):
    path = path[len("bert/"):]
    prefix = "bert." if with_bert_prefix else ""
  elif path.startswith("cls/predictions/transform"):
    prefix = ""
  else:
    raise ConversionError(f"unexpected variable {original_name}")
  path = re.sub(r"^encoder/layer_(\d+)/", r"encoder/layer/\1/", path).replace("/", ".")
  return f"{prefix}{path}.{hf_leaf}", transpose


def hf_config_to_bert(hf_config, source=HF_CONFIG):
  """Builds a `BertConfig` from a HuggingFace `config.json` dict.

  Raises:
    ConversionError: an activation, position embedding type or LayerNorm epsilon the original
      architecture does not have.
  """
  hidden_act = hf_config.get("hidden_act", "gelu")
  if hidden_act not in _HF_TO_BERT_ACTIVATION:
    raise ConversionError(f"{source}: hidden_act {hidden_act!r} has no equivalent here")
  if hf_config.get("position_embedding_type", "absolute") != "absolute":
    raise ConversionError(f"{source}: position_embedding_type "
                          f"{hf_config['position_embedding_type']!r} is not the original's "
                          "absolute positions")
  epsilon = hf_config.get("layer_norm_eps", 1e-12)
  if not np.isclose(epsilon, 1e-12, rtol=0, atol=1e-15):
    raise ConversionError(f"{source}: layer_norm_eps {epsilon} differs from the original's 1e-12")
  keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
          "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
          "max_position_embeddings", "type_vocab_size", "initializer_range")
  values = {key: hf_config[key] for key in keys if key in hf_config}
  values["hidden_act"] = _HF_TO_BERT_ACTIVATION[hidden_act]
  try:
    return bert_config_lib.BertConfig.from_dict(values, source=source)
  except bert_config_lib.ConfigError as error:
    raise ConversionError(str(error)) from None


def bert_config_to_hf(config, architecture, label_fields=None):
  """Returns a HuggingFace `config.json` dict.

  Args:
    config: the `BertConfig`.
    architecture: one of `hf_metadata.ARCHITECTURES`.
    label_fields: `id2label` and `label2id` of a classifier head (`hf_metadata.hf_label_fields`).
  """
  hf_config = {key: value for key, value in config.to_dict().items()
               if key in bert_config_lib.BertConfig.__dataclass_fields__ and key != "extra"}
  hf_config.update({
      "architectures": [architecture],
      "model_type": "bert",
      "hidden_act": _BERT_TO_HF_ACTIVATION[config.hidden_act],
      "layer_norm_eps": 1e-12,
      "pad_token_id": 0,
      "position_embedding_type": "absolute",
      **(label_fields or {}),
  })
  return hf_config


def hf_weights_to_original(hf_weights):
  """{HuggingFace name: array} -> {original name: array}, kernels transposed to `[in, out]`."""
  original = {}
  for hf_name, value in hf_weights.items():
    mapped = hf_to_original_name(hf_name)
    if mapped is None:
      continue
    name, transpose = mapped
    original[name] = np.ascontiguousarray(value.T if transpose else value)
  return original


def original_weights_to_hf(original_weights):
  """{original name: array} -> {HuggingFace name: array}; optimizer slots and step dropped.

  Encoder names get the `bert.` prefix when the checkpoint holds heads (`BertForPreTraining`-style
  files) and none otherwise (`BertModel` files).
  """
  with_prefix = any(not name.startswith("bert/") and not original_files.is_training_state(name)
                    for name in original_weights)
  hf_weights = {}
  for name, value in original_weights.items():
    mapped = original_to_hf_name(name, with_prefix)
    if mapped is None:
      continue
    hf_name, transpose = mapped
    hf_weights[hf_name] = np.ascontiguousarray(value.T) if transpose else value
  return hf_weights


@dataclasses.dataclass(frozen=True)
class HfConversion:
  """What a conversion from or to a HuggingFace directory carried besides the weights.

  Attributes:
    config: the `BertConfig`.
    architecture: the HuggingFace architecture (`hf_to_bert`: `config.json`'s first
      `architectures` entry, or None without; `bert_to_hf`: the one written).
    labels: the classifier's labels in id order, or None.
    do_lower_case: the tokenizer's casing, or None when the source does not say it.
    tensors: the number of tensors written.
    left_out: the original names the HuggingFace class has no place for (`bert_to_hf`: the
      pooler of the classes without one), else ().
  """
  config: object
  architecture: str | None
  labels: list | None
  do_lower_case: bool | None
  tensors: int
  left_out: tuple = ()


_POOLER = "bert/pooler/dense/"


def _initial_pooler(config):
  """The pooler's weights as the original initializes them (truncated normal kernel of stddev
  `initializer_range`, zero bias; seeded, so that a conversion gives the same file twice)."""
  hidden = config.hidden_size
  kernel = keras.initializers.TruncatedNormal(stddev=config.initializer_range, seed=0)(
      (hidden, hidden))
  return {_POOLER + "kernel": np.asarray(kernel, np.float32),
          _POOLER + "bias": np.zeros([hidden], np.float32)}


def _classifier_outputs(original_weights):
  """The outputs of the root-scope classifier head, or None without one."""
  bias = original_weights.get("output_bias")
  return None if bias is None else int(np.shape(bias)[0])


def convert_hf_to_original(input_dir, output_dir):
  """Converts a HuggingFace BERT directory to the original layout.

  Reads `config.json`, `vocab.txt`, the weights (`hf_files`: `model.safetensors`, else
  `pytorch_model.bin`, else `tf_model.h5`) and `tokenizer_config.json` if there is one. Writes
  `bert_config.json`, `bert_model.ckpt.*` and `vocab.txt`; `label_list.txt` for a classifier
  head with named labels; `tokenizer_config.json` (`do_lower_case` alone) when the source says
  its casing. All or nothing, every tensor checked first. A source without a pooler
  (`hf_metadata.WITHOUT_POOLER`) gets one initialized as the original initializes it.

  Returns:
    the `HfConversion`.

  Raises:
    ConversionError: input that cannot be converted (nothing written then).
  """
  config_path = os.path.join(input_dir, HF_CONFIG)
  hf_config = original_files.read_json(config_path)
  config = hf_config_to_bert(hf_config, source=config_path)
  hf_weights = hf_files.read_weights(input_dir)
  try:
    weights = hf_weights_to_original(hf_weights.tensors)
  except ConversionError as error:
    raise ConversionError(f"{hf_weights.path}: {error}") from None
  if not any(name.startswith(_POOLER) for name in weights):
    # BertForTokenClassification and BertForQuestionAnswering have none; the original's encoder
    # (and every runner's --init_checkpoint) has one, which their heads do not read.
    weights.update(_initial_pooler(config))
    logging.info("%s has no pooler (%s have none): bert/pooler/dense initialized as the "
                 "original initializes it", hf_weights.path,
                 " and ".join(hf_metadata.WITHOUT_POOLER))
  with_prefix = any(name.startswith("bert.") for name in hf_weights.tensors)

  def name_in_file(name):
    hf_name, transpose = original_to_hf_name(name, with_prefix)
    return (hf_weights.names_in_file.get(hf_name, hf_name),
            transpose and hf_weights.pytorch_layout)

  original_files.check_weights_fit(weights, config, hf_weights.path, HF_CONFIG,
                                   source_name=name_in_file)
  labels = hf_metadata.labels_from_hf_config(hf_config, _classifier_outputs(weights),
                                             config_path)
  do_lower_case = hf_metadata.read_do_lower_case(input_dir)
  files = {original_files.VOCAB: original_files.read_bytes(
               os.path.join(input_dir, original_files.VOCAB)),
           original_files.BERT_CONFIG: config.to_json_string().encode("utf-8")}
  if labels is not None:
    files[hf_metadata.LABEL_LIST] = hf_metadata.label_list_bytes(labels)
  if do_lower_case is not None:
    files[hf_metadata.TOKENIZER_CONFIG] = hf_metadata.lower_case_config_bytes(do_lower_case)
  original_files.write_outputs(output_dir, files, {
      original_files.BERT_CHECKPOINT: lambda prefix: checkpoint_io.save_bundle(prefix, weights)})
  architectures = hf_config.get("architectures") or [None]
  return HfConversion(config, architectures[0], labels, do_lower_case, len(weights))


def convert_original_to_hf(input_dir, output_dir, vocab_file=None, architecture=None,
                           do_lower_case=True):
  """Converts a directory in the original layout (or a run's --output_dir) to HuggingFace's.

  Reads `bert_config.json`, `vocab.txt` (or `vocab_file`), the checkpoint (`bert_model.ckpt`, or
  the latest of a `checkpoint` state file), and if there, `label_list.txt` and
  `tokenizer_config.json`. Writes `config.json` (its `architectures` from the heads, and
  `id2label` / `label2id` for a classifier head), `model.safetensors`, `vocab.txt` and
  `tokenizer_config.json`. The pooler is left out for the classes without one
  (`hf_metadata.WITHOUT_POOLER`).

  Args:
    input_dir: the directory to convert.
    output_dir: the directory to write.
    vocab_file: the vocabulary, when `input_dir` has no `vocab.txt`.
    architecture: the HuggingFace architecture, needed only to tell a sequence classifier from a
      token classifier (`hf_metadata.architecture_of`).
    do_lower_case: the tokenizer's casing, unless `input_dir`'s `tokenizer_config.json` says it.

  Returns:
    the `HfConversion`.

  Raises:
    ConversionError: input that cannot be converted (nothing written then).
  """
  config, original_weights, vocab = original_files.read_original(input_dir, vocab_file)
  architecture = hf_metadata.architecture_of(
      [name for name in original_weights if not original_files.is_training_state(name)],
      architecture, input_dir)
  left_out = ()
  if architecture in hf_metadata.WITHOUT_POOLER:
    left_out = tuple(sorted(name for name in original_weights if name.startswith(_POOLER)
                            and not original_files.is_training_state(name)))
    original_weights = {name: value for name, value in original_weights.items()
                        if not name.startswith(_POOLER)}
  hf_weights = original_weights_to_hf(original_weights)
  labels, label_fields = None, None
  if architecture in hf_metadata.CLASSIFIERS:
    num_outputs = _classifier_outputs(original_weights)
    labels = hf_metadata.read_label_list(input_dir, num_outputs)
    label_fields = hf_metadata.hf_label_fields(labels, num_outputs)
  saved_lower_case = hf_metadata.read_do_lower_case(input_dir)
  if saved_lower_case is not None:
    do_lower_case = saved_lower_case
  config_json = json.dumps(bert_config_to_hf(config, architecture, label_fields), indent=2,
                           sort_keys=True)
  original_files.write_outputs(output_dir, {
      original_files.VOCAB: vocab,
      HF_WEIGHTS: safetensors_numpy.save(hf_weights, metadata={"format": "pt"}),
      HF_CONFIG: (config_json + "\n").encode("utf-8"),
      hf_metadata.TOKENIZER_CONFIG: hf_metadata.hf_tokenizer_config_bytes(
          do_lower_case, config.max_position_embeddings)})
  return HfConversion(config, architecture, labels, do_lower_case, len(hf_weights), left_out)
