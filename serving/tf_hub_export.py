"""A model in the original layout as TF Hub's two BERT SavedModels: encoder and preprocessing.

TF Hub users load them with `tf.saved_model.load` or `hub.KerasLayer` and no code of this
project, as they load Google's `bert_en_uncased_L-12_H-768_A-12` and
`bert_en_uncased_preprocess`: the interfaces are those of Model Garden's `export_tfhub`
(https://www.tensorflow.org/hub/common_saved_model_apis/text, "Text embeddings with Transformer
Encoders"); tokenization and packing are this project's (`data.graph_tokenization`,
`data.graph_packing`), so the ids equal `FullTokenizer`'s.

The encoder SavedModel holds each weight once: its root's `original_variables` maps the original
checkpoint names to the encoder's variables (`modeling.conversion.model_garden` reads them back by
those names), and `variables` / `trainable_variables` list the same variables for
`hub.KerasLayer`. Its `assets/bert_config.json` is the config, which the shapes alone do not give
(the number of heads, the activation).
"""

import dataclasses
import os

from absl import logging
import numpy as np
import tensorflow as tf

from base import atomic_files
from data import graph_packing
from data import graph_tokenization
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import encoder as encoder_lib
from modeling import keras_variables
from modeling.conversion import model_garden
from modeling.conversion import original_files
from serving import saved_model_export

ENCODER_DIR = "encoder"
PREPROCESSING_DIR = "preprocessing"
# The sequence length of the preprocessing's default call and of `bert_pack_inputs` (TF Hub's).
DEFAULT_SEQ_LENGTH = 128
# TF Hub's input names -> `BertEncoder`'s.
HUB_INPUTS = {"input_word_ids": "input_ids", "input_mask": "input_mask",
              "input_type_ids": "segment_ids"}
# Model Garden's `serving_default` names its outputs as Keras names a layer's flattened outputs:
# the encoder model's name, then `_1`, `_2`, ... (TF Hub's BERT encoders: `bert_encoder_<i>`).
_SIGNATURE_OUTPUT_NAME = "bert_encoder"


class ExportError(original_files.ConversionError):
  """The output directory already holds an export."""


@dataclasses.dataclass(frozen=True)
class TfHubExport:
  """What `export_tf_hub` wrote.

  Attributes:
    encoder_dir, preprocessing_dir: the two SavedModels.
    config: the encoder's `BertConfig`.
    default_seq_length: the preprocessing's sequence length when none is given.
    left_out: the original variable names not exported (pre-training and task heads; optimizer
      state is never exported).
  """
  encoder_dir: str
  preprocessing_dir: str
  config: bert_config_lib.BertConfig
  default_seq_length: int
  left_out: list


def _input_specs():
  return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in HUB_INPUTS}


class TfHubEncoder(tf.__internal__.tracking.AutoTrackable):
  """A `BertEncoder` in TF Hub's BERT encoder interface, for `tf.saved_model.save`.

  An `AutoTrackable` rather than a `tf.Module`, whose `variables` and `trainable_variables` are
  properties that are not saved: the reusable-SavedModel interface of `hub.KerasLayer` needs
  them as attributes of the loaded object.

  Once saved and loaded (`loaded = tf.saved_model.load(path)`):
    loaded(inputs, training=False): `inputs` a dict of int32 `[batch_size, seq_length]`
      `input_word_ids`, `input_mask` (1 for real tokens), `input_type_ids` -> dict
      `sequence_output` float32 `[batch_size, seq_length, hidden_size]`, `pooled_output` and
      `default` (the same) `[batch_size, hidden_size]`, `encoder_outputs`: list of
      `num_hidden_layers` `[batch_size, seq_length, hidden_size]`. `training=True` applies
      dropout, for fine-tuning.
    loaded.signatures["serving_default"]: the same inputs as keyword arguments -> the outputs
      flattened as Model Garden names them: `bert_encoder` (`default`), `bert_encoder_1` to
      `bert_encoder_<L>` (`encoder_outputs`), `bert_encoder_<L+1>` (`pooled_output`),
      `bert_encoder_<L+2>` (`sequence_output`).
    loaded.variables, loaded.trainable_variables, loaded.regularization_losses (empty): as
      `hub.KerasLayer(..., trainable=True)` reads them.
    loaded.vocab_file (asset `assets/vocab.txt`), loaded.do_lower_case (bool variable).
    loaded.original_variables: dict original checkpoint name -> variable.

  Args:
    encoder: a `BertEncoder` holding the weights.
    vocab_file: its vocabulary; copied into the SavedModel's assets.
    config_file: its `bert_config.json`; copied into the assets.
    do_lower_case: its casing.
  """

  def __init__(self, encoder, vocab_file, config_file, do_lower_case):
    super().__init__()
    self.vocab_file = tf.saved_model.Asset(vocab_file)
    self.bert_config_file = tf.saved_model.Asset(config_file)
    self.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
    weights = {name: keras_variables.as_tf_variable(variable)
               for name, variable in encoder.name_to_variable().items()}
    setattr(self, model_garden.ORIGINAL_VARIABLES, weights)
    self.trainable_variables = list(weights.values())
    # The dropout layers' seed states, which `training=True` updates, and, as in Model Garden's
    # export, the casing flag: non-trainable variables.
    trainable = {id(variable) for variable in encoder.trainable_variables}
    self.variables = self.trainable_variables + [
        keras_variables.as_tf_variable(variable) for variable in encoder.variables
        if id(variable) not in trainable] + [self.do_lower_case]
    # `hub.KerasLayer` adds these to its losses; BERT has none.
    self.regularization_losses = []

    # The encoder is reached through these functions only, so that the SavedModel's object graph
    # holds its variables once, under `original_variables`, and no Keras internals.
    @tf.function
    def call(inputs, training=False):
      outputs = encoder({ours: inputs[hub] for hub, ours in HUB_INPUTS.items()},
                        training=training)
      pooled_output = tf.cast(outputs["pooled_output"], tf.float32)
      return {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
              "pooled_output": pooled_output,
              "default": pooled_output,
              "encoder_outputs": [tf.cast(layer, tf.float32)
                                  for layer in outputs["encoder_outputs"]]}

    for training in (False, True):
      call.get_concrete_function(_input_specs(), training=training)
    self.__call__ = call

  def signatures(self):
    """{"serving_default": the concrete function of the signature}: the call's inputs, named by
    their specs, and its outputs flattened (see the class docstring)."""
    call = self.__call__

    @tf.function(input_signature=[_input_specs()])
    def serve(inputs):
      flat = tf.nest.flatten(call(inputs, training=False))
      return {_SIGNATURE_OUTPUT_NAME + (f"_{index}" if index else ""): output
              for index, output in enumerate(flat)}

    return {"serving_default": serve.get_concrete_function()}


class TfHubPreprocessor(tf.__internal__.tracking.AutoTrackable):
  """This project's tokenization and packing in TF Hub's BERT preprocessing interface, for
  `tf.saved_model.save`.

  Once saved and loaded (`loaded = tf.saved_model.load(path)`):
    loaded(sentences), loaded.signatures["serving_default"](sentences=...): string `[batch_size]`
      -> dict `input_word_ids`, `input_mask`, `input_type_ids` int32 `[batch_size,
      default_seq_length]`, each text packed alone as `[CLS] text [SEP]`, padded with 0.
    loaded.tokenize(sentences): string `[batch_size]` -> int32 RaggedTensor `[batch_size,
      (num_words), (num_pieces)]` of word-piece ids, `FullTokenizer`'s.
    loaded.tokenize.get_special_tokens_dict(): dict of int32 scalars `vocab_size`,
      `start_of_sequence_id` ([CLS]), `end_of_segment_id` ([SEP]), and `padding_id` ([PAD]),
      `mask_id` ([MASK]) if the vocabulary has them.
    loaded.bert_pack_inputs(segments, seq_length=default_seq_length): `segments` a list of one
      or two int32 RaggedTensors `[batch_size, (num_pieces)]` or `[batch_size, (num_words),
      (num_pieces)]` (what `tokenize` returns); `seq_length` an int32 scalar -> the dict above,
      `[batch_size, seq_length]`: `[CLS] A [SEP] (B [SEP])`, truncated as the original
      (`data.graph_packing.pack`).

  Args:
    vocab_file: the vocabulary.
    do_lower_case: lower-case and strip accents (uncased models).
    default_seq_length: the sequence length of the call and the default of `bert_pack_inputs`.
  """

  def __init__(self, vocab_file, do_lower_case, default_seq_length=DEFAULT_SEQ_LENGTH):
    super().__init__()
    # Reached through the functions only: the word-piece model is a constant of their graphs, and
    # the tokenizer's own `tf.function`s would otherwise be saved beside `tokenize`.
    tokenizer = graph_tokenization.GraphTokenizer(vocab_file, do_lower_case)
    vocab = tokenization.load_vocab(vocab_file)
    special_tokens = {"start_of_sequence_id": "[CLS]", "end_of_segment_id": "[SEP]",
                      "padding_id": "[PAD]", "mask_id": "[MASK]"}
    special_ids = {"vocab_size": len(vocab), **{key: vocab[token]
                                                 for key, token in special_tokens.items()
                                                 if token in vocab}}
    cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(sentences):
      return tf.cast(tokenizer.tokenize_words(sentences), tf.int32)

    # As Model Garden's: `tokenize` is an object, callable, with `get_special_tokens_dict`.
    self.tokenize = tf.__internal__.tracking.AutoTrackable()
    self.tokenize.__call__ = tokenize
    self.tokenize.get_special_tokens_dict = tf.function(
        lambda: {key: tf.constant(value, tf.int32) for key, value in special_ids.items()},
        input_signature=[])

    @tf.function(autograph=False)
    def bert_pack_inputs(inputs, seq_length=default_seq_length):
      if not 1 <= len(inputs) <= 2:
        raise ValueError(f"bert_pack_inputs packs one or two segments, got {len(inputs)}")
      segments = [segment.merge_dims(1, 2) if segment.ragged_rank == 2 else segment
                  for segment in inputs]
      # `pack` compares the budget with int64 row lengths.
      packed = graph_packing.pack(segments[0], segments[1] if len(segments) == 2 else None,
                                  tf.cast(seq_length, tf.int64), cls_id, sep_id)
      return {hub: tf.pad(packed[ours], [[0, 0], [0, seq_length - tf.shape(packed[ours])[1]]])
              for hub, ours in HUB_INPUTS.items()}

    # Model Garden's set of traces: one or two segments, with or without the word dimension.
    for ragged_rank in (1, 2):
      for num_segments in (1, 2):
        bert_pack_inputs.get_concrete_function(
            [tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank=ragged_rank)
             ] * num_segments, seq_length=tf.TensorSpec([], tf.int32))
    self.bert_pack_inputs = bert_pack_inputs

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def preprocess(sentences):
      packed = bert_pack_inputs([tokenize(sentences)], seq_length=default_seq_length)
      return {name: tf.ensure_shape(values, [None, default_seq_length])
              for name, values in packed.items()}

    self.__call__ = preprocess

  def signatures(self):
    """{"serving_default": the call's concrete function}."""
    return {"serving_default": self.__call__.get_concrete_function()}


def export_tf_hub(input_dir, output_dir, do_lower_case, vocab_file=None,
                  default_seq_length=DEFAULT_SEQ_LENGTH):
  """Writes `output_dir/encoder` and `output_dir/preprocessing`, TF Hub's BERT SavedModels, from
  the original layout.

  Both are saved in a temporary directory in `output_dir` and renamed into place only when both
  are complete, so a failure while saving (a full disk) leaves neither, and nothing
  half-written.

  Args:
    input_dir: `bert_config.json`, `bert_model.ckpt.*` (or a `checkpoint` state file) and
      `vocab.txt`: see `original_files.read_original`.
    output_dir: created if needed; must not hold `encoder/` or `preprocessing/` yet.
    do_lower_case: the model's casing (the original layout does not record it).
    vocab_file: the vocabulary, if not `input_dir`'s `vocab.txt`.
    default_seq_length: the preprocessing's sequence length when none is given; at most the
      model's `max_position_embeddings` (a longer one is cut to it, so that the default
      preprocessing always fits the encoder).

  Returns:
    a `TfHubExport`.

  Raises:
    ConversionError: the input cannot be read or does not fit its config.
    ExportError: `output_dir` holds an export already.

  Usage:
    export = tf_hub_export.export_tf_hub("uncased_L-12_H-768_A-12", "hub", do_lower_case=True)
    encoder = tf.saved_model.load(export.encoder_dir)
  """
  config, weights, vocab = original_files.read_original(input_dir, vocab_file)
  encoder = encoder_lib.BertEncoder(config)
  variables = encoder.name_to_variable()
  for name, variable in variables.items():
    variable.assign(np.asarray(weights[name], np.float32))
  left_out = sorted(name for name in set(weights) - set(variables)
                    if not original_files.is_training_state(name))
  if default_seq_length > config.max_position_embeddings:
    logging.info("default sequence length %d cut to the model's max_position_embeddings %d",
                 default_seq_length, config.max_position_embeddings)
    default_seq_length = config.max_position_embeddings
  final = {name: os.path.join(output_dir, name) for name in (ENCODER_DIR, PREPROCESSING_DIR)}
  for path in final.values():
    if tf.io.gfile.exists(path):
      raise ExportError(f"{path} exists already; remove it or choose another output directory")
  tf.io.gfile.makedirs(output_dir)
  temp_dir = atomic_files.temporary_name(os.path.join(output_dir, "tf_hub"))
  atomic_files.remove_stale_temporaries(output_dir, prefix="tf_hub")
  try:
    with atomic_files.no_space_is_one_line(output_dir):
      # The files the SavedModels copy into their assets.
      sources = os.path.join(temp_dir, "sources")
      tf.io.gfile.makedirs(sources)
      files = {original_files.VOCAB: vocab,
               original_files.BERT_CONFIG: config.to_json_string().encode("utf-8")}
      for name, contents in files.items():
        with tf.io.gfile.GFile(os.path.join(sources, name), "wb") as writer:
          writer.write(contents)
      vocab_path = os.path.join(sources, original_files.VOCAB)
      hub_encoder = TfHubEncoder(encoder, vocab_path,
                                 os.path.join(sources, original_files.BERT_CONFIG), do_lower_case)
      preprocessor = TfHubPreprocessor(vocab_path, do_lower_case, default_seq_length)
      for name, module in ((ENCODER_DIR, hub_encoder), (PREPROCESSING_DIR, preprocessor)):
        tf.saved_model.save(module, os.path.join(temp_dir, name), signatures=module.signatures())
      for name, path in final.items():
        # pylint: disable-next=protected-access
        saved_model_export._move_directory(os.path.join(temp_dir, name), path)
  finally:
    if tf.io.gfile.exists(temp_dir):
      tf.io.gfile.rmtree(temp_dir)
  logging.info("exported TF Hub SavedModels %s and %s (%d layers; left out %d variable(s))",
               final[ENCODER_DIR], final[PREPROCESSING_DIR], config.num_hidden_layers,
               len(left_out))
  return TfHubExport(final[ENCODER_DIR], final[PREPROCESSING_DIR], config, default_seq_length,
                     left_out)
