"""Conversion between keras-hub BERT presets and the original release's layout.

A keras-hub preset directory holds `config.json` (a serialised `keras_hub.models.BertBackbone`),
`model.weights.h5` (Keras 3's weights file: one HDF5 group per layer, `vars/0`, `vars/1`, ... in
the order the layer creates them), `tokenizer.json` (a `BertTokenizer`) and
`assets/tokenizer/vocabulary.txt`. Both directions read and write those files directly with h5py
(which Keras itself needs), so keras-hub is not needed to convert; `BertBackbone.from_preset`
loads what `write_preset` writes.

What keras-hub's `BertBackbone` cannot express is refused: it has one dropout rate, the tanh GELU
only and no pre-training heads (heads are left out, with a log line).

Variable map (layer names as in `BertBackbone`; per-layer ones under `transformer_layer_<i>`):
  token_embedding / segment_embedding / position_embedding <-> bert/embeddings/{word,token_type,position}_embeddings
  embeddings_layer_norm                                    <-> bert/embeddings/LayerNorm
  _self_attention_layer/{query,key,value}_dense            <-> attention/self/{query,key,value} (per head)
  _self_attention_layer/output_dense                       <-> attention/output/dense (per head)
  _self_attention_layer_norm                               <-> attention/output/LayerNorm
  _feedforward_intermediate_dense / _feedforward_output_dense <-> intermediate/dense / output/dense
  _feedforward_layer_norm                                  <-> output/LayerNorm
  pooled_dense                                             <-> bert/pooler/dense
"""

import io
import json
import os

from absl import logging
import h5py
import keras
import numpy as np
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from modeling.conversion import attention_heads
from modeling.conversion import original_files
from modeling.conversion.original_files import ConversionError

PRESET_CONFIG = "config.json"
PRESET_WEIGHTS = "model.weights.h5"
PRESET_TOKENIZER = "tokenizer.json"
PRESET_METADATA = "metadata.json"
PRESET_VOCAB = os.path.join("assets", "tokenizer", "vocabulary.txt")

_BACKBONE = {"module": "keras_hub.src.models.bert.bert_backbone", "class_name": "BertBackbone",
             "registered_name": "keras_hub>BertBackbone"}
_TOKENIZER = {"module": "keras_hub.src.models.bert.bert_tokenizer", "class_name": "BertTokenizer",
              "registered_name": "keras_hub>BertTokenizer"}
_FLOAT32 = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
            "registered_name": None}
# `BertBackbone` settings that carry no weights or numerics.
_IGNORED_SETTINGS = ("name", "trainable", "dtype")
# keras-hub's `bert_kernel_initializer` default.
_INITIALIZER_RANGE = 0.02

# (h5 group, layer name, original variable names in creation order) of the backbone's layers, in
# the order `BertBackbone` builds its functional graph (Keras names each group after the layer's
# class, numbered in that order); variable-free layers are listed too, as Keras writes them.
_BACKBONE_LAYERS = (
    ("add", "embeddings_add", ()),
    ("dense", "pooled_dense", ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")),
    ("dropout", "embeddings_dropout", ()),
    ("embedding", "segment_embedding", ("bert/embeddings/token_type_embeddings",)),
    ("input_layer", "token_ids", ()),
    ("input_layer_1", "segment_ids", ()),
    ("input_layer_2", "padding_mask", ()),
    ("layer_normalization", "embeddings_layer_norm",
     ("bert/embeddings/LayerNorm/gamma", "bert/embeddings/LayerNorm/beta")),
    ("position_embedding", "position_embedding", ("bert/embeddings/position_embeddings",)),
    ("reversible_embedding", "token_embedding", ("bert/embeddings/word_embeddings",)),
)
# (h5 group under a transformer layer's group, layer name, variable names under
# `bert/encoder/layer_<i>/`).
_TRANSFORMER_SUBLAYERS = (
    ("_feedforward_dropout", "feedforward_dropout", ()),
    ("_feedforward_intermediate_dense", "feedforward_intermediate_dense",
     ("intermediate/dense/kernel", "intermediate/dense/bias")),
    ("_feedforward_layer_norm", "feedforward_layer_norm",
     ("output/LayerNorm/gamma", "output/LayerNorm/beta")),
    ("_feedforward_output_dense", "feedforward_output_dense",
     ("output/dense/kernel", "output/dense/bias")),
    ("_self_attention_dropout", "self_attention_dropout", ()),
    ("_self_attention_layer", "self_attention_layer", ()),
    ("_self_attention_layer/_dropout_layer", "dropout", ()),
    ("_self_attention_layer/_softmax", "softmax", ()),
    ("_self_attention_layer/key_dense", "key",
     ("attention/self/key/kernel", "attention/self/key/bias")),
    ("_self_attention_layer/output_dense", "attention_output",
     ("attention/output/dense/kernel", "attention/output/dense/bias")),
    ("_self_attention_layer/query_dense", "query",
     ("attention/self/query/kernel", "attention/self/query/bias")),
    ("_self_attention_layer/value_dense", "value",
     ("attention/self/value/kernel", "attention/self/value/bias")),
    ("_self_attention_layer_norm", "self_attention_layer_norm",
     ("attention/output/LayerNorm/gamma", "attention/output/LayerNorm/beta")),
)


def _transformer_group(index):
  return "transformer_encoder" if index == 0 else f"transformer_encoder_{index}"


def _layer_variables(num_layers):
  """Yields `(h5 group path, layer name, original variable names)` of every layer of a
  `BertBackbone` with `num_layers` transformer layers, with per-layer names made absolute."""
  for group, name, variables in _BACKBONE_LAYERS:
    yield f"layers/{group}", name, variables
  for index in range(num_layers):
    group = f"layers/{_transformer_group(index)}"
    yield group, f"transformer_layer_{index}", ()
    for subgroup, name, variables in _TRANSFORMER_SUBLAYERS:
      yield (f"{group}/{subgroup}", name,
             tuple(f"bert/encoder/layer_{index}/{variable}" for variable in variables))


def backbone_config_to_bert(backbone_config, source):
  """A `BertConfig` from the `config` of a `BertBackbone`'s `config.json`.

  Raises:
    ConversionError: an unknown setting, or weights in another dtype than float32.
  """
  renames = {"vocabulary_size": "vocab_size", "num_layers": "num_hidden_layers",
             "num_heads": "num_attention_heads", "hidden_dim": "hidden_size",
             "intermediate_dim": "intermediate_size", "dropout": "hidden_dropout_prob",
             "max_sequence_length": "max_position_embeddings", "num_segments": "type_vocab_size"}
  for key in backbone_config:
    if key not in renames and key not in _IGNORED_SETTINGS:
      raise ConversionError(f"{source}: unknown BertBackbone setting {key!r}: not a BERT this "
                            "converter knows")
  dtype = backbone_config.get("dtype", "float32")
  dtype_name = dtype.get("config", {}).get("name") if isinstance(dtype, dict) else dtype
  if dtype_name not in (None, "float32"):
    raise ConversionError(f"{source}: dtype {dtype_name!r}: only float32 presets are converted")
  values = {renames[key]: value for key, value in backbone_config.items() if key in renames}
  values["attention_probs_dropout_prob"] = values.get("hidden_dropout_prob", 0.1)
  values["hidden_act"] = "gelu"
  values["initializer_range"] = _INITIALIZER_RANGE
  try:
    return bert_config_lib.BertConfig.from_dict(values, source=source)
  except bert_config_lib.ConfigError as error:
    raise ConversionError(str(error)) from None


def bert_config_to_backbone(config, source):
  """The `config` of a `BertBackbone`'s `config.json` for a `BertConfig`.

  Raises:
    ConversionError: an activation or dropout split `BertBackbone` does not have.
  """
  if config.hidden_act != "gelu":
    raise ConversionError(f"{source}: hidden_act {config.hidden_act!r}: keras-hub's BertBackbone "
                          "has only the tanh GELU ('gelu')")
  if config.attention_probs_dropout_prob != config.hidden_dropout_prob:
    raise ConversionError(
        f"{source}: attention_probs_dropout_prob {config.attention_probs_dropout_prob} differs "
        f"from hidden_dropout_prob {config.hidden_dropout_prob}: keras-hub's BertBackbone has "
        "one dropout rate")
  return {"name": "bert_backbone", "trainable": True, "dtype": _FLOAT32,
          "vocabulary_size": config.vocab_size, "num_layers": config.num_hidden_layers,
          "num_heads": config.num_attention_heads, "hidden_dim": config.hidden_size,
          "intermediate_dim": config.intermediate_size, "dropout": config.hidden_dropout_prob,
          "max_sequence_length": config.max_position_embeddings,
          "num_segments": config.type_vocab_size}


def _check_class(serialised, expected, source):
  if serialised.get("class_name") != expected["class_name"]:
    raise ConversionError(f"{source}: class {serialised.get('class_name')!r}, not keras-hub's "
                          f"{expected['class_name']}")


def read_tokenizer(preset_dir):
  """Reads the preset's `tokenizer.json`.

  Returns:
    whether it lower-cases its input.

  Raises:
    ConversionError: a tokenizer other than keras-hub's WordPiece `BertTokenizer`.
  """
  path = os.path.join(preset_dir, PRESET_TOKENIZER)
  tokenizer = original_files.read_json(path)
  _check_class(tokenizer, _TOKENIZER, path)
  settings = tokenizer.get("config", {})
  if settings.get("suffix_indicator", "##") != "##":
    raise ConversionError(f"{path}: suffix_indicator {settings['suffix_indicator']!r}: the "
                          "original's WordPiece marks continuations with '##'")
  lowercase = bool(settings.get("lowercase", False))
  if lowercase and not settings.get("strip_accents", False):
    logging.warning("%s lower-cases without stripping accents; the original's --do_lower_case "
                    "does both", path)
  return lowercase


def _canonical_group(layer_name, group):
  """The h5 group `write_preset` gives the top-level layer `layer_name` (Keras numbers groups in
  graph order, which another keras-hub version may change; layer names are stable)."""
  for canonical, name, _ in _BACKBONE_LAYERS:
    if name == layer_name:
      return f"layers/{canonical}"
  prefix = "transformer_layer_"
  if layer_name.startswith(prefix) and layer_name[len(prefix):].isdigit():
    return f"layers/{_transformer_group(int(layer_name[len(prefix):]))}"
  return group


def read_preset_weights(path):
  """Reads a Keras weights file.

  Args:
    path: `model.weights.h5`.

  Returns:
    dict h5 group path (top-level groups named as `write_preset` names them) ->
    `(layer name, [arrays of its vars])`, for layers holding variables.
  """
  try:
    with tf.io.gfile.GFile(path, "rb") as reader:
      contents = reader.read()
  except tf.errors.NotFoundError:
    raise ConversionError(f"{path}: no such file") from None
  found = {}
  try:
    with h5py.File(io.BytesIO(contents), "r") as weights_file:
      renames = {}
      for group, item in weights_file.get("layers", {}).items():
        variables = item.get("vars")
        name = str(variables.attrs.get("name", group)) if variables is not None else group
        renames[f"layers/{group}"] = _canonical_group(name, f"layers/{group}")

      def visit(group_path, item):
        if not (isinstance(item, h5py.Group) and group_path.endswith("/vars") and len(item)):
          return
        layer_group = group_path[:-len("/vars")]
        top, _, rest = layer_group.partition("/")[2].partition("/")
        canonical = renames.get(f"layers/{top}", f"layers/{top}") + (f"/{rest}" if rest else "")
        found[canonical] = (str(item.attrs.get("name", layer_group)),
                            [np.asarray(item[str(index)]) for index in range(len(item))])
      weights_file.visititems(visit)
  except (OSError, KeyError) as error:
    raise ConversionError(f"{path}: not a Keras weights file: {error}") from None
  return found


def preset_weights_to_original(layers, num_layers, source):
  """Maps a `BertBackbone`'s weights to the original names.

  Args:
    layers: what `read_preset_weights` returns.
    num_layers: the backbone's number of transformer layers.
    source: the path named in errors.

  Returns:
    dict original variable name -> array.

  Raises:
    ConversionError: a layer missing, one `BertBackbone` does not have, or another variable count.
  """
  layers = dict(layers)
  weights = {}
  for group, name, variables in _layer_variables(num_layers):
    if not variables:
      continue
    if group not in layers:
      raise ConversionError(f"{source}: no weights for layer {name} ({group})")
    found_name, arrays = layers.pop(group)
    if len(arrays) != len(variables):
      raise ConversionError(f"{source}: layer {found_name} ({group}) has {len(arrays)} "
                            f"variables, BertBackbone's {name} {len(variables)}")
    for variable, array in zip(variables, arrays):
      attention = attention_heads.per_head_name(variable)
      weights[variable] = (attention_heads.from_heads(attention, array) if attention else array)
  if layers:
    group, (name, _) = sorted(layers.items())[0]
    raise ConversionError(f"{source}: layer {name} ({group}) is not part of a BertBackbone "
                          f"of {num_layers} layers")
  return weights


def convert_keras_hub_to_original(preset_dir, output_dir):
  """Writes `bert_config.json`, `bert_model.ckpt.*` and `vocab.txt` from a keras-hub preset.

  Returns:
    `(config, lowercase)`: the `BertConfig` written and whether the preset's tokenizer lower-cases
    (pass it as `--do_lower_case`).
  """
  config_path = os.path.join(preset_dir, PRESET_CONFIG)
  serialised = original_files.read_json(config_path)
  _check_class(serialised, _BACKBONE, config_path)
  config = backbone_config_to_bert(serialised.get("config", {}), config_path)
  lowercase = read_tokenizer(preset_dir)
  vocab = original_files.read_bytes(os.path.join(preset_dir, PRESET_VOCAB))
  weights_path = os.path.join(preset_dir, PRESET_WEIGHTS)
  weights = preset_weights_to_original(read_preset_weights(weights_path),
                                       config.num_hidden_layers, weights_path)
  original_files.check_weights_fit(weights, config, weights_path, PRESET_CONFIG)
  original_files.write_original(output_dir, config, weights, vocab)
  return config, lowercase


def _h5_bytes(weights, num_layers, num_heads):
  """The bytes of a `model.weights.h5` holding `weights` (original names) as Keras writes it."""
  buffer = io.BytesIO()
  with h5py.File(buffer, "w") as weights_file:
    weights_file.create_group("vars").attrs["name"] = "bert_backbone"
    for group, name, variables in _layer_variables(num_layers):
      weights_file.require_group(group).create_group("vars").attrs["name"] = name
      for index, variable in enumerate(variables):
        attention = attention_heads.per_head_name(variable)
        value = weights[variable]
        if attention:
          value = attention_heads.to_heads(attention, value, num_heads)
        weights_file[f"{group}/vars"].create_dataset(str(index), data=value)
  return buffer.getvalue()


def convert_original_to_keras_hub(input_dir, output_dir, lowercase, vocab_file=None):
  """Writes a keras-hub `BertBackbone` preset (with its `BertTokenizer`) into `output_dir`.

  Args:
    input_dir: a directory in the original layout.
    output_dir: the preset directory, created if needed.
    lowercase: the tokenizer lower-cases and strips accents (the original's `--do_lower_case`).
    vocab_file: the vocabulary, if not `input_dir`'s `vocab.txt`.

  Returns:
    the original variable names left out (heads; optimizer state is never converted).
  """
  config, weights, vocab = original_files.read_original(input_dir, vocab_file)
  backbone_config = bert_config_to_backbone(
      config, os.path.join(input_dir, original_files.BERT_CONFIG))
  names = {variable for _, _, variables in _layer_variables(config.num_hidden_layers)
           for variable in variables}
  weights = {name: np.asarray(value, np.float32) for name, value in weights.items()}
  left_out = sorted(name for name in set(weights) - names
                    if not original_files.is_training_state(name))
  weights_file = _h5_bytes(weights, config.num_hidden_layers, config.num_attention_heads)
  tokenizer = dict(_TOKENIZER, config={
      "name": "bert_tokenizer", "trainable": True,
      "dtype": dict(_FLOAT32, config={"name": "int32"}), "config_file": PRESET_TOKENIZER,
      "vocabulary": None, "sequence_length": None, "lowercase": lowercase,
      "strip_accents": lowercase, "split": True, "suffix_indicator": "##", "oov_token": "[UNK]",
      "special_tokens": None, "special_tokens_in_strings": False})
  metadata = {"keras_version": keras.__version__,
              "parameter_count": int(sum(weights[name].size for name in names)),
              "tasks": ["MaskedLM", "TextClassifier", "TextEmbedder"]}
  files = {PRESET_VOCAB: vocab, PRESET_WEIGHTS: weights_file}
  for file_name, contents in ((PRESET_TOKENIZER, tokenizer), (PRESET_METADATA, metadata),
                              (PRESET_CONFIG, dict(_BACKBONE, config=backbone_config))):
    files[file_name] = (json.dumps(contents, indent=4) + "\n").encode("utf-8")
  original_files.write_outputs(output_dir, files)
  return left_out
