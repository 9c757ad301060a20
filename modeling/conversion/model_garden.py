"""Conversion between TF Model Garden's BERT (checkpoints and TF Hub SavedModels) and the original
release's layout, without tf-models-official.

Model Garden's `BertEncoder` (functional) and `BertEncoderV2` write object-based checkpoints: each
variable is stored under the path of attribute names that leads to it from the checkpoint's root
(`encoder/_transformer_layers/0/_attention_layer/_query_dense/kernel`), recorded in the
checkpoint's object graph. Both classes expose the same attribute names (`_embedding_layer`,
`_transformer_layers`, `_pooler_layer`, ...), so a checkpoint is read by walking that graph to the
object that has them, whatever the root is (`encoder=` as Google's published TF2 checkpoints,
`model=` as older ones, a `BertPretrainerV2`, or the Keras model inside a TF Hub SavedModel, whose
`variables/variables` is such a checkpoint too). A `masked_lm` head maps to `cls/predictions`.

Written checkpoints hold the encoder under `encoder` (and a `masked_lm` head when the original has
`cls/predictions`), with those attribute paths: `tf.train.Checkpoint(encoder=...)` of either
Model Garden encoder restores them, as its TF1->TF2 converter's output.

This project's own TF Hub export (`serving/tf_hub_export.py`) is read too: its SavedModel holds
the encoder's variables as children of one object named by their original names
(`ORIGINAL_VARIABLES`), and its `bert_config.json` as an asset (`SAVED_MODEL_CONFIG`).

Attention weights are stored per head (`attention_heads`); everything else has the original
shapes. What the original cannot express is refused: factorised embeddings
(`_embedding_projection`), heads other than the masked LM, and, for SavedModels, whose graph can
be run, any encoder whose outputs the original architecture does not reproduce (pre-LayerNorm
`norm_first` encoders, other activations).
"""

import os

from absl import logging
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import encoder as encoder_lib
from modeling.conversion import attention_heads
from modeling.conversion import original_files
from modeling.conversion.original_files import ConversionError

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
SAVED_MODEL_VARIABLES = os.path.join("variables", "variables")
SAVED_MODEL_VOCAB = os.path.join("assets", "vocab.txt")
# This project's TF Hub encoder (`serving/tf_hub_export.py`): the child of the SavedModel's root
# whose children are the encoder's variables by original name, and the config it carries (with
# the heads, which the original-shaped attention kernels do not reveal, and the activation).
ORIGINAL_VARIABLES = "original_variables"
SAVED_MODEL_CONFIG = os.path.join("assets", "bert_config.json")
# An encoder object has these children; a masked-LM head these.
_ENCODER_CHILDREN = ("_embedding_layer", "_transformer_layers")
_MASKED_LM_CHILDREN = ("embedding_table", "dense", "layer_norm")
# Children of an object-based checkpoint's root that are training state, not weights.
_ROOT_TRAINING_STATE = ("save_counter", "optimizer", "global_step", "do_lower_case")

# (path under the encoder object, original name).
_ENCODER_VARIABLES = (
    (("_embedding_layer", "embeddings"), "bert/embeddings/word_embeddings"),
    (("_position_embedding_layer", "embeddings"), "bert/embeddings/position_embeddings"),
    (("_type_embedding_layer", "embeddings"), "bert/embeddings/token_type_embeddings"),
    (("_embedding_norm_layer", "gamma"), "bert/embeddings/LayerNorm/gamma"),
    (("_embedding_norm_layer", "beta"), "bert/embeddings/LayerNorm/beta"),
    (("_pooler_layer", "kernel"), "bert/pooler/dense/kernel"),
    (("_pooler_layer", "bias"), "bert/pooler/dense/bias"),
)
# (path under `_transformer_layers/<i>`, name under `bert/encoder/layer_<i>/`).
_LAYER_VARIABLES = tuple(
    (sublayer + (leaf,), f"{scope}/{leaf}")
    for sublayer, scope in (
        (("_attention_layer", "_query_dense"), "attention/self/query"),
        (("_attention_layer", "_key_dense"), "attention/self/key"),
        (("_attention_layer", "_value_dense"), "attention/self/value"),
        (("_attention_layer", "_output_dense"), "attention/output/dense"),
        (("_intermediate_dense",), "intermediate/dense"),
        (("_output_dense",), "output/dense"))
    for leaf in ("kernel", "bias")) + tuple(
        ((sublayer, leaf), f"{scope}/{leaf}")
        for sublayer, scope in (("_attention_layer_norm", "attention/output/LayerNorm"),
                                ("_output_layer_norm", "output/LayerNorm"))
        for leaf in ("gamma", "beta"))
# (path under the masked-LM object, original name).
_MASKED_LM_VARIABLES = (
    (("dense", "kernel"), "cls/predictions/transform/dense/kernel"),
    (("dense", "bias"), "cls/predictions/transform/dense/bias"),
    (("layer_norm", "gamma"), "cls/predictions/transform/LayerNorm/gamma"),
    (("layer_norm", "beta"), "cls/predictions/transform/LayerNorm/beta"),
    (("bias",), "cls/predictions/output_bias"),
)
# `BertPretrainerV2.checkpoint_items`' name of the next-sentence head's dense layer.
_NEXT_SENTENCE_POOLER = "next_sentence.pooler_dense"
# Model Garden's `MaskedLM` tracks its output bias under both names.
_MASKED_LM_BIAS_ALIAS = "output_bias/bias"
# Activations tried, in order, to reproduce a SavedModel's outputs (Model Garden's "gelu" is the
# tanh approximation, the original's).
_CANDIDATE_ACTIVATIONS = ("gelu", "gelu_exact", "relu")
# A SavedModel and the converted encoder agree to float32 rounding (measured ~1e-6 on the
# fixtures); another activation or normalisation order differs by orders of magnitude more.
_SAVED_MODEL_TOLERANCE = 1e-4


def _flatten(path):
  return "/".join(path)


class ObjectGraph:
  """The object graph of an object-based checkpoint: finds variables by attribute path.

  Args:
    reader: a `CheckpointReader` of the checkpoint.
    source: the path named in errors.
  """

  def __init__(self, reader, source):
    self.source = source
    if not reader.has_tensor(OBJECT_GRAPH_KEY):
      raise ConversionError(f"{source}: not an object-based checkpoint (no object graph): a "
                            "name-based one is already in the original layout")
    self.graph = trackable_object_graph_pb2.TrackableObjectGraph()
    self.graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))

  def children(self, node):
    """{local name: node id} of `node`'s children."""
    return {child.local_name: child.node_id for child in self.graph.nodes[node].children}

  def resolve(self, node, path):
    """The node reached from `node` along the names `path`, or None."""
    for name in path:
      node = self.children(node).get(name)
      if node is None:
        return None
    return node

  def variable_key(self, node, path):
    """The checkpoint key of the variable at `path` under `node`, or None."""
    target = self.resolve(node, path)
    if target is None:
      return None
    for attribute in self.graph.nodes[target].attributes:
      if attribute.name == "VARIABLE_VALUE":
        return attribute.checkpoint_key
    return None

  def find(self, child_names):
    """The path and id of the object nearest the root that has all `child_names` as children, or
    `(None, None)`."""
    queue, seen = [((), 0)], {0}
    while queue:
      path, node = queue.pop(0)
      children = self.children(node)
      if all(name in children for name in child_names):
        return path, node
      for name, child in children.items():
        if child not in seen:
          seen.add(child)
          queue.append((path + (name,), child))
    return None, None


def _readable(checkpoint_key):
  """The attribute path of a checkpoint key (`next_sentence.pooler_dense/bias` for
  `next_sentence..pooler_dense/bias/.ATTRIBUTES/VARIABLE_VALUE`)."""
  path = checkpoint_key.replace("/.ATTRIBUTES/VARIABLE_VALUE", "")
  return "/".join(part.replace("..", "\0").replace(".S", "/").replace("\0", ".")
                  for part in path.split("/"))


def _is_training_state(key):
  return key.split("/", 1)[0] in _ROOT_TRAINING_STATE or ".OPTIMIZER_SLOT" in key


def read_model_garden_weights(prefix, source=None, copy_pooler_dense_to_encoder=False):
  """Reads a Model Garden BERT from an object-based checkpoint.

  Args:
    prefix: the checkpoint prefix (a SavedModel's `variables/variables` too).
    source: the path named in errors (default `prefix`).
    copy_pooler_dense_to_encoder: take the pooler from the next-sentence head's
      `next_sentence.pooler_dense` (which Model Garden's pre-training trains, not the encoder's
      own pooler), as Model Garden's `export_tfhub --copy_pooler_dense_to_encoder`.

  Returns:
    `(weights, num_heads)`: dict original variable name -> numpy array (the encoder, and
    `cls/predictions/*` if the checkpoint holds a masked-LM head), and the number of attention
    heads (an axis of the stored attention kernels).

  Raises:
    ConversionError: no encoder in it, factorised embeddings, a variable missing, or variables
      that are neither the encoder, a masked-LM head nor training state.
  """
  source = source or prefix
  reader = checkpoint_io.CheckpointReader(prefix)
  graph = ObjectGraph(reader, source)
  encoder_path, encoder = graph.find(_ENCODER_CHILDREN)
  if encoder is None:
    raise ConversionError(f"{source}: no Model Garden BERT encoder in it (no object with "
                          f"children {' and '.join(_ENCODER_CHILDREN)})")
  if graph.resolve(encoder, ("_embedding_projection",)) is not None:
    raise ConversionError(
        f"{source}: {_flatten(encoder_path + ('_embedding_projection',))}: factorised "
        "embeddings (embedding_width != hidden_size), which the original cannot express")
  num_layers = len(graph.children(graph.resolve(encoder, ("_transformer_layers",))))
  variables = [(encoder_path, encoder, path, name) for path, name in _ENCODER_VARIABLES]
  for index in range(num_layers):
    layer_path = ("_transformer_layers", str(index))
    variables += [(encoder_path, encoder, layer_path + path, f"bert/encoder/layer_{index}/{name}")
                  for path, name in _LAYER_VARIABLES]
  masked_lm_path, masked_lm = graph.find(_MASKED_LM_CHILDREN)
  if masked_lm is not None:
    variables += [(masked_lm_path, masked_lm, path, name) for path, name in _MASKED_LM_VARIABLES]
  weights, used_keys, num_heads = {}, set(), None
  for root_path, root, path, name in variables:
    key = graph.variable_key(root, path)
    if key is None:
      raise ConversionError(f"{source}: variable {_flatten(root_path + path)} is missing")
    used_keys.add(key)
    value = reader.get_tensor(key)
    if name == "bert/encoder/layer_0/attention/self/query/kernel":
      num_heads = attention_heads.num_heads_of(value)
    attention = attention_heads.per_head_name(name)
    weights[name] = attention_heads.from_heads(attention, value) if attention else value
  if copy_pooler_dense_to_encoder:
    head = graph.children(0).get(_NEXT_SENTENCE_POOLER)
    if head is None:
      raise ConversionError(f"{source}: no {_NEXT_SENTENCE_POOLER} to copy to the encoder's "
                            "pooler")
    for leaf in ("kernel", "bias"):
      key = graph.variable_key(head, (leaf,))
      used_keys.add(key)
      weights[f"bert/pooler/dense/{leaf}"] = reader.get_tensor(key)
  if num_heads is None:
    raise ConversionError(f"{source}: {_flatten(encoder_path + ('_transformer_layers',))} holds "
                          "no layer")
  if masked_lm is not None:
    table_key = graph.variable_key(masked_lm, ("embedding_table",))
    used_keys.add(table_key)
    if table_key is not None and not np.array_equal(reader.get_tensor(table_key),
                                                     weights["bert/embeddings/word_embeddings"]):
      raise ConversionError(
          f"{source}: {_flatten(masked_lm_path + ('embedding_table',))} differs from the "
          "encoder's word embeddings: an untied output layer, which the original cannot express")
  unused = sorted(key for key in reader.get_variable_to_shape_map()
                  if key not in used_keys and key != OBJECT_GRAPH_KEY
                  and not _is_training_state(key))
  if unused:
    hint = (" (--copy_pooler_dense_to_encoder takes it as the pooler)"
            if _readable(unused[0]).startswith(_NEXT_SENTENCE_POOLER + "/") else "")
    raise ConversionError(
        f"{source}: {len(unused)} variable(s) outside the encoder and masked-LM head, e.g. "
        f"{_readable(unused[0])}: not a part the original layout has{hint}")
  return weights, num_heads


def read_original_variables(prefix, source):
  """Reads the encoder of this project's TF Hub export from its SavedModel's variables.

  Args:
    prefix: the SavedModel's `variables/variables`.
    source: the path named in errors.

  Returns:
    dict original variable name -> numpy array, or None if the root has no
    `ORIGINAL_VARIABLES` child (not this project's export).
  """
  reader = checkpoint_io.CheckpointReader(prefix)
  graph = ObjectGraph(reader, source)
  node = graph.children(0).get(ORIGINAL_VARIABLES)
  if node is None:
    return None
  return {name: reader.get_tensor(graph.variable_key(node, (name,)))
          for name in graph.children(node)}


def infer_config(weights, num_heads, hidden_act, source):
  """A `BertConfig` with the sizes of `weights` (original names), `num_heads` heads and
  `hidden_act`; dropout and initializer range are the original's defaults."""
  hidden_size = weights["bert/embeddings/word_embeddings"].shape[1]
  values = {
      "vocab_size": int(weights["bert/embeddings/word_embeddings"].shape[0]),
      "hidden_size": int(hidden_size),
      "num_hidden_layers": len({name.split("/")[2] for name in weights
                                if name.startswith("bert/encoder/layer_")}),
      "num_attention_heads": int(num_heads),
      "intermediate_size": int(weights["bert/encoder/layer_0/intermediate/dense/kernel"].shape[1]),
      "max_position_embeddings": int(weights["bert/embeddings/position_embeddings"].shape[0]),
      "type_vocab_size": int(weights["bert/embeddings/token_type_embeddings"].shape[0]),
      "hidden_act": hidden_act,
  }
  try:
    return bert_config_lib.BertConfig.from_dict(values, source=source)
  except bert_config_lib.ConfigError as error:
    raise ConversionError(str(error)) from None


def convert_model_garden_to_original(input_path, output_dir, bert_config_file=None,
                                     vocab_file=None, copy_pooler_dense_to_encoder=False):
  """Writes the original layout from a Model Garden checkpoint.

  Args:
    input_path: a checkpoint prefix, or a directory holding `bert_model.ckpt.*` (Google's TF2
      checkpoints) or a `checkpoint` state file (Model Garden training).
    output_dir: created if needed.
    bert_config_file: the config to write; default the directory's `bert_config.json` if there is
      one, else one inferred from the shapes with Model Garden's default activation (tanh GELU).
    vocab_file: the vocabulary, if not the directory's `vocab.txt` (a training directory has
      none).
    copy_pooler_dense_to_encoder: see `read_model_garden_weights`.

  Returns:
    the `BertConfig` written.
  """
  directory = input_path if tf.io.gfile.isdir(input_path) else os.path.dirname(input_path)
  prefix = os.path.join(input_path, original_files.BERT_CHECKPOINT)
  if not tf.io.gfile.exists(prefix + checkpoint_io.INDEX_SUFFIX):
    try:
      prefix = checkpoint_io.resolve_checkpoint(input_path)
    except checkpoint_io.CheckpointError as error:
      raise ConversionError(str(error)) from None
  weights, num_heads = read_model_garden_weights(
      prefix, copy_pooler_dense_to_encoder=copy_pooler_dense_to_encoder)
  config_path = bert_config_file or os.path.join(directory, original_files.BERT_CONFIG)
  if bert_config_file or tf.io.gfile.exists(config_path):
    config = original_files.read_config(config_path)
    if config.num_attention_heads != num_heads:
      raise ConversionError(f"{prefix}: its attention has {num_heads} heads, {config_path} "
                            f"num_attention_heads {config.num_attention_heads}")
  else:
    config = infer_config(weights, num_heads, "gelu", prefix)
    logging.info("no %s: inferred the sizes from the weights; hidden_act=gelu (Model Garden's "
                 "default, the tanh approximation)", config_path)
  original_files.check_weights_fit(weights, config, prefix, os.path.basename(config_path))
  vocab = original_files.read_bytes(vocab_file or os.path.join(directory, original_files.VOCAB))
  original_files.write_original(output_dir, config, weights, vocab)
  return config


def _probe_inputs(config):
  """Fixed inputs for comparing two encoders: 3 rows of 16 (or fewer) tokens with padding and two
  segments, as `(input_word_ids, input_mask, input_type_ids)` int32."""
  seq_length = min(16, config.max_position_embeddings)
  rng = np.random.default_rng(0)
  word_ids = rng.integers(0, config.vocab_size, (3, seq_length)).astype(np.int32)
  lengths = np.array([seq_length, seq_length * 3 // 4, max(1, seq_length // 3)])
  mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype(np.int32)
  type_ids = ((np.arange(seq_length)[None, :] >= lengths[:, None] // 2) * mask).astype(np.int32)
  if config.type_vocab_size == 1:
    type_ids = np.zeros_like(type_ids)
  return word_ids * mask, mask, type_ids


def _encoder_outputs(config, weights, word_ids, mask, type_ids):
  encoder = encoder_lib.BertEncoder(config)
  for name, variable in encoder.name_to_variable().items():
    variable.assign(weights[name])
  outputs = encoder({"input_ids": word_ids, "input_mask": mask, "segment_ids": type_ids},
                    training=False)
  return outputs["sequence_output"].numpy(), outputs["pooled_output"].numpy()


def _saved_model_outputs(loaded, word_ids, mask, type_ids, source):
  try:
    outputs = loaded({"input_word_ids": tf.constant(word_ids), "input_mask": tf.constant(mask),
                      "input_type_ids": tf.constant(type_ids)}, training=False)
    return outputs["sequence_output"].numpy(), outputs["pooled_output"].numpy()
  except (TypeError, ValueError, KeyError, tf.errors.OpError) as error:
    raise ConversionError(f"{source}: not a TF Hub BERT encoder (calling it with "
                          "input_word_ids/input_mask/input_type_ids failed: "
                          f"{str(error).splitlines()[0]})") from None


def _output_difference(loaded, config, weights, source):
  """Max abs difference of the SavedModel `loaded`'s sequence and pooled outputs from our encoder's
  with `config` and `weights`, on fixed inputs."""
  inputs = _probe_inputs(config)
  expected = _saved_model_outputs(loaded, *inputs, source)
  ours = _encoder_outputs(config, weights, *inputs)
  return max(float(np.abs(a - b).max()) for a, b in zip(ours, expected))


def match_activation(loaded, weights, num_heads, source):
  """The `BertConfig` whose encoder, with `weights`, reproduces the SavedModel `loaded`.

  Tries each activation the original has on fixed inputs.

  Raises:
    ConversionError: none reproduces its outputs (e.g. a pre-LayerNorm encoder).
  """
  differences = {}
  for hidden_act in _CANDIDATE_ACTIVATIONS:
    config = infer_config(weights, num_heads, hidden_act, source)
    differences[hidden_act] = _output_difference(loaded, config, weights, source)
    if differences[hidden_act] <= _SAVED_MODEL_TOLERANCE:
      return config, differences[hidden_act]
  closest = min(differences, key=differences.get)
  raise ConversionError(
      f"{source}: the original architecture does not reproduce its outputs (closest: hidden_act "
      f"{closest}, max difference {differences[closest]:.3g}): another normalisation order "
      "(norm_first) or activation")


def convert_tf_hub_to_original(saved_model_dir, output_dir):
  """Writes the original layout from a TF Hub BERT encoder SavedModel.

  The weights are read from its variables; its `vocab_file` asset gives `vocab.txt`. The config
  of a Model Garden export is inferred from the shapes, with the activation with which our
  encoder reproduces the SavedModel's outputs; this project's export (`ORIGINAL_VARIABLES`)
  carries its `bert_config.json`, which is checked the same way.

  Returns:
    `(config, do_lower_case, max_difference)`: the `BertConfig` written, the SavedModel's
    `do_lower_case`, and the max abs difference between its outputs and our encoder's.
  """
  variables_prefix = os.path.join(saved_model_dir, SAVED_MODEL_VARIABLES)
  if not tf.io.gfile.exists(variables_prefix + checkpoint_io.INDEX_SUFFIX):
    raise ConversionError(f"{saved_model_dir}: not a SavedModel ({variables_prefix}"
                          f"{checkpoint_io.INDEX_SUFFIX} does not exist)")
  exported = read_original_variables(variables_prefix, saved_model_dir)
  if exported is None:
    weights, num_heads = read_model_garden_weights(variables_prefix, source=saved_model_dir)
    config, config_name = infer_config(weights, num_heads, "gelu", saved_model_dir), (
        "inferred config")
  else:
    weights, config_name = exported, SAVED_MODEL_CONFIG
    config = original_files.read_config(os.path.join(saved_model_dir, config_name))
  original_files.check_weights_fit(weights, config, variables_prefix, config_name)
  vocab_path = os.path.join(saved_model_dir, SAVED_MODEL_VOCAB)
  if not tf.io.gfile.exists(vocab_path):
    raise ConversionError(f"{saved_model_dir}: no {SAVED_MODEL_VOCAB} asset (a SentencePiece "
                          "model such as ALBERT's is not a WordPiece BERT)")
  vocab = original_files.read_bytes(vocab_path)
  try:
    loaded = tf.saved_model.load(saved_model_dir)
  except (tf.errors.OpError, ValueError, OSError) as error:
    raise ConversionError(f"{saved_model_dir}: cannot load the SavedModel: "
                          f"{str(error).splitlines()[0]}") from None
  if exported is None:
    config, difference = match_activation(loaded, weights, num_heads, saved_model_dir)
  else:
    difference = _output_difference(loaded, config, weights, saved_model_dir)
    if difference > _SAVED_MODEL_TOLERANCE:
      raise ConversionError(f"{saved_model_dir}: its {SAVED_MODEL_CONFIG} does not reproduce its "
                            f"outputs (max difference {difference:.3g})")
  do_lower_case = bool(loaded.do_lower_case.numpy()) if hasattr(loaded, "do_lower_case") else None
  original_files.write_original(output_dir, config, weights, vocab)
  return config, do_lower_case, difference


class _Node(tf.Module):
  """One object of a written checkpoint's object graph; children are set as attributes."""


def _node(**children):
  node = _Node()
  for name, child in children.items():
    setattr(node, name, child)
  return node


def _model_garden_objects(weights, config):
  """The objects of a Model Garden checkpoint holding `weights` (original names), as children of
  a `tf.train.Checkpoint`: `encoder` and, if `weights` has `cls/predictions`, `masked_lm`."""
  def variable(name):
    value = weights[name]
    attention = attention_heads.per_head_name(name)
    if attention:
      value = attention_heads.to_heads(attention, value, config.num_attention_heads)
    return tf.Variable(value, name=name.replace("/", "_"))

  def nested(entries):
    """{path: variable} -> a tree of `_Node`s."""
    tree = {}
    for path, value in entries:
      branch = tree
      for name in path[:-1]:
        branch = branch.setdefault(name, {})
      branch[path[-1]] = value
    def build(branch):
      return _node(**{name: build(child) if isinstance(child, dict) else child
                      for name, child in branch.items()})
    return build(tree)

  word_embeddings = variable("bert/embeddings/word_embeddings")
  entries = [(path, word_embeddings if name == "bert/embeddings/word_embeddings" else
              variable(name)) for path, name in _ENCODER_VARIABLES]
  for index in range(config.num_hidden_layers):
    for path, name in _LAYER_VARIABLES:
      entries.append((("_transformer_layers", str(index)) + path,
                      variable(f"bert/encoder/layer_{index}/{name}")))
  objects = {"encoder": nested(entries)}
  if "cls/predictions/output_bias" in weights:
    masked_lm = nested([(path, variable(name)) for path, name in _MASKED_LM_VARIABLES])
    masked_lm.embedding_table = word_embeddings
    setattr(masked_lm, _MASKED_LM_BIAS_ALIAS, masked_lm.bias)
    objects["masked_lm"] = masked_lm
  return objects


def convert_original_to_model_garden(input_dir, output_dir, vocab_file=None):
  """Writes a Model Garden checkpoint `bert_model.ckpt.*` with `bert_config.json` and `vocab.txt`
  (the layout of Google's TF2 BERT checkpoints) from the original layout in `input_dir` (with
  `vocab_file`, if it has no `vocab.txt`).

  Returns:
    the original variable names left out (heads other than the masked LM; optimizer state is
    never converted).
  """
  config, weights, vocab = original_files.read_original(input_dir, vocab_file)
  weights = {name: np.asarray(value, np.float32) for name, value in weights.items()}
  objects = _model_garden_objects(weights, config)
  kept = {name for _, name in _ENCODER_VARIABLES} | {
      f"bert/encoder/layer_{index}/{name}" for index in range(config.num_hidden_layers)
      for _, name in _LAYER_VARIABLES}
  if "masked_lm" in objects:
    kept |= {name for _, name in _MASKED_LM_VARIABLES}
  checkpoint = tf.train.Checkpoint(**objects)
  # `.save()` numbers its checkpoints with this counter and Model Garden's restores expect it.
  checkpoint.save_counter.assign_add(1)
  original_files.write_outputs(
      output_dir, {original_files.VOCAB: vocab,
                   original_files.BERT_CONFIG: config.to_json_string().encode("utf-8")},
      {original_files.BERT_CHECKPOINT: checkpoint.write})
  return sorted(name for name in set(weights) - kept
                if not original_files.is_training_state(name))
