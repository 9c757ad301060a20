"""The encoder's runs: `extract_features(config)` writes the vectors of a text file's lines,
`export_model(config)` exports a pretrained checkpoint for TensorFlow Serving.

Usage, from Python (extract_features.py and export_model.py do the same with the configs of
their flags):
  from tasks.encoder import runner
  from tasks.encoder.config import ExportModelConfig, ExtractFeaturesConfig
  result = runner.extract_features(ExtractFeaturesConfig(
      input_file="input.txt", output_file="embeddings.npy", pooling="mean", layers="-1",
      vocab_file="vocab.txt", bert_config_file="bert_config.json",
      init_checkpoint="bert_model.ckpt"))
  export = runner.export_model(ExportModelConfig(
      vocab_file="vocab.txt", bert_config_file="bert_config.json",
      init_checkpoint="bert_model.ckpt", export_dir="export", export_version=1))
"""

import dataclasses

from absl import logging
import numpy as np
import tensorflow as tf

from base import atomic_files
from base import progress
from data import tokenization
from modeling import checkpoint_io
from modeling import encoder as encoder_lib
from modeling import pretraining_model
from modeling import sentence_pooling
from serving import encoder_server
from serving import export_precision
from serving import saved_model_export
from tasks.encoder import features


@dataclasses.dataclass(frozen=True)
class FeaturesResult:
  """What `extract_features` wrote.

  Attributes:
    output_file: the JSON lines or `.npy` array written.
    lines: the number of input lines (one output line, or array row, each).
  """
  output_file: str
  lines: int


@dataclasses.dataclass(frozen=True)
class ExportResult:
  """What `export_model` wrote.

  Attributes:
    export_path: the SavedModel, `<export_dir>/<version>`.
    with_mlm_logits: whether it serves masked-LM logits (False for a checkpoint without the
      masked-LM head, such as a converted sentence encoder).
  """
  export_path: str
  with_mlm_logits: bool


def extract_features(config):
  """Runs an `ExtractFeaturesConfig` in this process: `config.validate()`, then every line
  encoded and its vectors written; callable more than once in one process.

  Returns:
    the `FeaturesResult`.

  Raises:
    errors.UserError: a flag, file or checkpoint the run cannot use.
  """
  config = config.resolve_weights()
  bert_config = config.load_bert_config()
  total = config.validate(bert_config)
  layer_indices = config.layer_indices(bert_config.num_hidden_layers)
  tokenizer = tokenization.FullTokenizer(config.vocab_file, config.do_lower_case)

  encoder = encoder_lib.BertEncoder(bert_config)
  report = checkpoint_io.assign_from_checkpoint(encoder.name_to_variable(),
                                                config.init_checkpoint)
  logging.info("loaded %d variables from %s", len(report["loaded"]), config.init_checkpoint)

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3)
  def encode(input_ids, input_mask, segment_ids):
    outputs = encoder({"input_ids": input_ids, "input_mask": input_mask,
                       "segment_ids": segment_ids}, training=False)
    if config.pooling != "none":
      return [sentence_pooling.pool(outputs, input_mask, config.pooling, layer_indices)]
    return [outputs["encoder_outputs"][index] for index in layer_indices]

  as_npy = config.as_npy
  bar = progress.Progress(total=total, unit="lines")
  embeddings = []
  with atomic_files.open_for_writing(config.output_file, "wb" if as_npy else "w") as writer:
    for batch in features.batches(features.read_examples(config.input_file), tokenizer,
                                  config.max_seq_length, config.batch_size):
      # Padding to the longest input of the batch instead of max_seq_length: padded positions
      # are masked out of attention, so the real tokens' vectors are unchanged.
      length = max(len(packed.tokens) for _, packed in batch)
      arrays = [np.array([getattr(packed, name)[:length] for _, packed in batch], np.int32)
                for name in ("input_ids", "input_mask", "segment_ids")]
      outputs = [output.numpy() for output in encode(*arrays)]
      if as_npy:
        embeddings.append(outputs[0])
      for row, (line_index, packed) in enumerate(batch):
        if config.pooling == "none":
          writer.write(features.to_json_line(line_index, packed.tokens,
                                             [output[row] for output in outputs],
                                             layer_indices))
        elif not as_npy:
          writer.write(features.to_embedding_line(line_index, outputs[0][row]))
      bar.update(len(batch))
    if as_npy:
      np.save(writer, np.concatenate(embeddings).astype(np.float32))
  bar.close()
  logging.info("wrote %s", config.output_file)
  return FeaturesResult(output_file=config.output_file, lines=total)


def export_model(config):
  """Runs an `ExportModelConfig` in this process: `config.validate()`, then the checkpoint
  loaded and exported; callable more than once in one process.

  Returns:
    the `ExportResult`.

  Raises:
    errors.UserError: a flag, file, checkpoint or export version the run cannot use.
  """
  config = config.resolve_weights()
  bert_config = config.load_bert_config()
  config.validate(bert_config)
  with export_precision.compute_policy(config.export_precision):
    model = pretraining_model.BertPretrainingModel(bert_config)
  report = checkpoint_io.assign_from_checkpoint(model.name_to_variable(), config.init_checkpoint)
  logging.info("loaded %d variables from %s", len(report["loaded"]), config.init_checkpoint)
  head_missing = [name for name in report["missing"] if name.startswith("cls/predictions/")]
  if head_missing:
    # Converted sentence encoders (e.g. HuggingFace BertModel) carry no masked-LM head; random
    # logits would look like real ones, so the output is left out instead.
    logging.warning("%s has no masked-LM head (%s missing): exporting without mlm_logits",
                    config.init_checkpoint, head_missing[0])
  server = encoder_server.EncoderServer(
      model.encoder, None if head_missing else model.masked_lm, config.vocab_file,
      config.do_lower_case, config.max_seq_length, config.pooling,
      with_text=not config.export_ids_only)
  export_path = saved_model_export.export(server, config.export_dir, server.signatures(),
                                          config.export_version)
  return ExportResult(export_path=export_path, with_mlm_logits=not head_missing)
