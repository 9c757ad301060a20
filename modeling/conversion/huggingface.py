"""Conversion between HuggingFace BERT directories and the original release's layout.

HuggingFace: `config.json` + `model.safetensors` (parameter names mirror the TF1 scopes with dots,
`Linear` weights stored `[out, in]`, LayerNorm `weight`/`bias`). Original: `bert_config.json` +
`bert_model.ckpt.*` (TF1 names, kernels `[in, out]`, LayerNorm `gamma`/`beta`) + `vocab.txt`.
Weights are read and written with safetensors' numpy API only (never torch or pickle), so no
checkpoint code runs on load.

Name rules (HuggingFace prefix `bert.` optional, as `BertModel` files omit it):
  embeddings.{word,position,token_type}_embeddings.weight <-> bert/embeddings/<name>
  <scope>.LayerNorm.{weight,bias}                          <-> <scope>/LayerNorm/{gamma,beta}
  <scope>.{weight,bias} of a Linear                        <-> <scope>/{kernel (transposed),bias}
  encoder.layer.<i>.<...>                                  <-> bert/encoder/layer_<i>/<...>
  cls.predictions.bias                                     <-> cls/predictions/output_bias
  cls.seq_relationship.{weight,bias}                       <-> cls/seq_relationship/output_{weights,bias}
  classifier.{weight,bias} (sequence classification)      <-> output_{weights,bias} (run_classifier)
  qa_outputs.{weight,bias} (question answering)            <-> cls/squad/output_{weights,bias}
The `[out, in]` heads keep their layout on both sides. `cls.predictions.decoder.*` is the tied
word-embedding matrix and the same bias again, and `embeddings.position_ids` a constant buffer:
neither is a weight, so neither is converted.
"""

import json
import os
import re

import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from modeling.conversion import original_files
from modeling.conversion.original_files import ConversionError

HF_CONFIG = "config.json"
HF_WEIGHTS = "model.safetensors"
HF_WEIGHTS_INDEX = "model.safetensors.index.json"

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


def bert_config_to_hf(config, architecture):
  """Returns a HuggingFace `config.json` dict for `config` (a `BertConfig`)."""
  hf_config = {key: value for key, value in config.to_dict().items()
               if key in bert_config_lib.BertConfig.__dataclass_fields__ and key != "extra"}
  hf_config.update({
      "architectures": [architecture],
      "model_type": "bert",
      "hidden_act": _BERT_TO_HF_ACTIVATION[config.hidden_act],
      "layer_norm_eps": 1e-12,
      "pad_token_id": 0,
      "position_embedding_type": "absolute",
  })
  return hf_config


def _weights_file(input_dir):
  """The file naming the weights of `input_dir`: the shard index if there is one, else
  `model.safetensors`."""
  index_path = os.path.join(input_dir, HF_WEIGHTS_INDEX)
  return index_path if tf.io.gfile.exists(index_path) else os.path.join(input_dir, HF_WEIGHTS)


def read_hf_weights(input_dir):
  """Reads `model.safetensors` (or the shards of its index) as {name: numpy array}."""
  listing = _weights_file(input_dir)
  if listing.endswith(HF_WEIGHTS_INDEX):
    shards = sorted(set(original_files.read_json(listing)["weight_map"].values()))
  else:
    shards = [HF_WEIGHTS]
  weights = {}
  for shard in shards:
    path = os.path.join(input_dir, shard)
    if not tf.io.gfile.exists(path):
      raise ConversionError(f"{path}: no such file (only safetensors weights are read)")
    try:
      with tf.io.gfile.GFile(path, "rb") as reader:
        weights.update(safetensors_numpy.load(reader.read()))
    except Exception as error:  # safetensors raises its own SafetensorError and OSError kinds.
      raise ConversionError(f"{path}: unreadable safetensors file: {error}") from None
  return weights


def hf_weights_to_original(hf_weights):
  """{HuggingFace name: array} -> {original name: array}, kernels transposed to `[in, out]`."""
  original = {}
  for hf_name, value in hf_weights.items():
    mapped = hf_to_original_name(hf_name)
    if mapped is None:
      continue
    name, transpose = mapped
    original[name] = np.ascontiguousarray(value.T) if transpose else value
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


def convert_hf_to_original(input_dir, output_dir):
  """Writes `bert_config.json`, `bert_model.ckpt.*` and `vocab.txt` into `output_dir`.

  Returns:
    the `BertConfig` written.
  """
  config_path = os.path.join(input_dir, HF_CONFIG)
  config = hf_config_to_bert(original_files.read_json(config_path), source=config_path)
  hf_weights = read_hf_weights(input_dir)
  weights = hf_weights_to_original(hf_weights)
  with_prefix = any(name.startswith("bert.") for name in hf_weights)
  original_files.check_weights_fit(
      weights, config, _weights_file(input_dir), HF_CONFIG,
      source_name=lambda name: original_to_hf_name(name, with_prefix))
  vocab = original_files.read_bytes(os.path.join(input_dir, original_files.VOCAB))
  original_files.write_original(output_dir, config, weights, vocab)
  return config


def convert_original_to_hf(input_dir, output_dir, vocab_file=None):
  """Writes `config.json`, `model.safetensors` and `vocab.txt` into `output_dir`.

  `input_dir` holds `bert_config.json`, `vocab.txt` and a checkpoint (`bert_model.ckpt`, or the
  latest of a `checkpoint` state file, as `run_pretraining.py` writes; then `vocab_file`, if it
  has no `vocab.txt`).

  Returns:
    the list of HuggingFace tensor names written.
  """
  config, original_weights, vocab = original_files.read_original(input_dir, vocab_file)
  hf_weights = original_weights_to_hf(original_weights)
  architecture = "BertForPreTraining" if "cls.predictions.bias" in hf_weights else "BertModel"
  config_json = json.dumps(bert_config_to_hf(config, architecture), indent=2, sort_keys=True)
  original_files.write_outputs(output_dir, {
      original_files.VOCAB: vocab,
      HF_WEIGHTS: safetensors_numpy.save(hf_weights, metadata={"format": "pt"}),
      HF_CONFIG: (config_json + "\n").encode("utf-8")})
  return sorted(hf_weights)
