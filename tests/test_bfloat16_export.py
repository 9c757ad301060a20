"""--export_precision=bfloat16: the export computes its matrix products in bfloat16, keeps the
float32 export's signatures, answers as it does within bfloat16's precision, and is refused on a
processor without bfloat16 dot products unless --allow_emulated_bfloat16.

The exports are whole runs (`slow`); the refusals and the rebuilt model are unit tests."""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (the in-graph tokenizer's ops)
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2

from base import cpu_features
from base import errors
from data import sequence_pairs
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import classifier_model
from modeling import encoder
from modeling import pretraining_model
from serving import export_precision
from training import mixed_precision
from tests import scripts
from tests.conftest import SAMPLES_DIR

# bfloat16 keeps 8 significant bits: each rounding is off by up to 2**-8 = 0.4% of the value,
# and an output is a few roundings deep (the tiny model's two layers; products accumulate in
# float32). Outputs agree within RELATIVE_TOLERANCE of their scale, about 8 roundings. A
# probability moves by at most half the largest change of a logit (softmax: p(1 - p) <= 1/4, times
# the difference of two logits' changes): PROBABILITY_TOLERANCE covers logits whose scale is about
# 1. The measured differences are in docs/serving.md ("Agreement").
RELATIVE_TOLERANCE = 3e-2
PROBABILITY_TOLERANCE = 2e-2
ENCODER_LENGTH = 24
MATMUL_OPS = ("MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum")
# On a processor without bfloat16 dot products a bfloat16 export is refused unless forced; the
# export tests force it there (an export made for another machine) to check what it holds.
FORCE_ON_THIS_PROCESSOR = (() if cpu_features.has_bfloat16_dot_product()
                           else ("--allow_emulated_bfloat16",))


def classifier_flags(tiny_model, tmp_path, *flags):
  vocab_file, config_file = tiny_model
  return ["--task_name=tsv", f"--data_dir={SAMPLES_DIR / 'classification'}",
          f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
          f"--output_dir={tmp_path / 'out'}", "--max_seq_length=16",
          "--distribution_strategy=one_device", f"--export_dir={tmp_path / 'export'}", *flags]


@pytest.fixture(scope="module")
def classifier_exports(tiny_model, tmp_path_factory):
  """A tiny classifier trained on the sample, exported from its checkpoint in float32 (version
  1) and in bfloat16 (version 2): {precision: (export path, the loaded SavedModel)}."""
  tmp_path = tmp_path_factory.mktemp("bfloat16_classifier")
  trained = scripts.run_in_process("run_classifier.py", *classifier_flags(
      tiny_model, tmp_path, "--do_train", "--num_train_epochs=20", "--train_batch_size=8",
      "--learning_rate=1e-3", "--seed=1", "--export_version=1"))
  assert trained.returncode == 0, trained.stderr[-3000:]
  exported = scripts.run_in_process("run_classifier.py", *classifier_flags(
      tiny_model, tmp_path, "--export_version=2", "--export_precision=bfloat16",
      *FORCE_ON_THIS_PROCESSOR))
  assert exported.returncode == 0, exported.stderr[-3000:]
  return {precision: (result.result.export_path,
                      tf.saved_model.load(result.result.export_path))
          for precision, result in (("float32", trained), ("bfloat16", exported))}


def signature_specs(loaded):
  """{signature: (input specs, output specs)} of a loaded SavedModel, as
  `{name: (dtype, shape)}`."""

  def specs(structure):
    return {name: (spec.dtype.name, spec.shape.as_list()) for name, spec in structure.items()}

  return {name: (specs(function.structured_input_signature[1]),
                 specs(function.structured_outputs))
          for name, function in loaded.signatures.items()}


def matmul_dtypes(export_path):
  """The dtypes (`T` attribute) of the matrix-product ops in a SavedModel's functions."""
  with open(f"{export_path}/saved_model.pb", "rb") as f:
    saved_model = saved_model_pb2.SavedModel.FromString(f.read())
  return {types_pb2.DataType.Name(node.attr["T"].type)
          for meta_graph in saved_model.meta_graphs
          for function in meta_graph.graph_def.library.function
          for node in function.node_def if node.op in MATMUL_OPS}


def relative_error(values, reference):
  """The largest difference of `values` from `reference` (float arrays of one shape), over the
  largest magnitude of `reference`."""
  return np.abs(values - reference).max() / np.abs(reference).max()


@pytest.mark.slow  # whole runs
def test_the_bfloat16_export_has_the_float32_exports_signatures(classifier_exports):
  float32 = signature_specs(classifier_exports["float32"][1])
  bfloat16 = signature_specs(classifier_exports["bfloat16"][1])
  assert bfloat16 == float32
  assert set(bfloat16) == {"serving_default", "predict_ids"}
  outputs = bfloat16["serving_default"][1]
  assert outputs["probabilities"][0] == outputs["logits"][0] == "float32"
  assert outputs["label"][0] == "string"


@pytest.mark.slow  # whole runs
def test_the_bfloat16_export_multiplies_in_bfloat16(classifier_exports):
  assert matmul_dtypes(classifier_exports["float32"][0]) == {"DT_FLOAT"}
  assert "DT_BFLOAT16" in matmul_dtypes(classifier_exports["bfloat16"][0])
  # Its weights are stored in bfloat16 (no cast per call), but the layer norms'.
  dtypes = tf.train.load_checkpoint(
      f"{classifier_exports['bfloat16'][0]}/variables/variables").get_variable_to_dtype_map()
  model_dtypes = {name: dtype for name, dtype in dtypes.items()
                  if name.startswith("model_variables/")}
  float32_names = {name for name, dtype in model_dtypes.items() if dtype == tf.float32}
  assert float32_names and all("norm" in name.lower() for name in float32_names), float32_names
  assert set(model_dtypes.values()) == {tf.float32, tf.bfloat16}


@pytest.mark.slow  # whole runs
def test_the_bfloat16_export_answers_as_the_float32_one(classifier_exports):
  rows = [line.split("\t") for path in ("train.tsv", "dev.tsv")
          for line in (SAMPLES_DIR / "classification" / path).read_text().splitlines()[1:]]
  texts = tf.constant([row[0] for row in rows])
  answers = {precision: loaded.signatures["serving_default"](text_a=texts)
             for precision, (_, loaded) in classifier_exports.items()}
  float32, bfloat16 = ({name: answers[p][name].numpy() for name in answers[p]}
                       for p in ("float32", "bfloat16"))
  assert relative_error(bfloat16["logits"], float32["logits"]) < RELATIVE_TOLERANCE
  difference = np.abs(bfloat16["probabilities"] - float32["probabilities"]).max()
  assert 0 < difference < PROBABILITY_TOLERANCE, difference  # 0 would mean float32 compute
  np.testing.assert_array_equal(bfloat16["probabilities"].argmax(axis=1),
                                float32["probabilities"].argmax(axis=1))
  np.testing.assert_array_equal(bfloat16["label"], float32["label"])


def mixed_bfloat16_classifier(config):
  """A classifier built as `--mixed_precision=mixed_bfloat16` trains it (float32 variables)."""
  previous = keras.mixed_precision.global_policy()
  mixed_precision.set_policy("mixed_bfloat16")
  try:
    return classifier_model.BertClassifier(config, num_outputs=3)
  finally:
    keras.mixed_precision.set_global_policy(previous)


def passing_encoder(precision, drop_padding, embedding_tables):
  """A 2-layer encoder built in `precision` whose matrix products add nothing (zero kernels and
  biases): its sequence output is its embeddings through every layer norm (gamma 1, beta 0).
  `embedding_tables`: {name: float32 Tensor}, the tables not zero."""
  config = bert_config_lib.BertConfig(vocab_size=20, hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=64,
                                      max_position_embeddings=8, type_vocab_size=2)
  with export_precision.compute_policy(precision):
    model = encoder.BertEncoder(config, drop_padding=drop_padding)
  for weight in model.weights:
    if weight.name in embedding_tables:
      weight.assign(tf.cast(embedding_tables[weight.name], weight.dtype))
    elif "LayerNorm" not in weight.path:
      weight.assign(tf.zeros(weight.shape, weight.dtype))
  return model


@pytest.mark.parametrize("drop_padding", [False, True])
def test_the_residual_stream_stays_float32_between_bfloat16_products(drop_padding):
  # Each layer norm's output is of float32's precision, not bfloat16's: rounded once on the way
  # (into a layer, the real tokens' gather, a residual add), the output would be about 2**-9 of
  # its scale away from the float32 encoder's.
  # The word vectors alone (the other tables zero), of bfloat16's values: their sum, which a
  # bfloat16 encoder takes in bfloat16, is then the same in both.
  word_vectors = np.random.default_rng(6).normal(size=(20, 32))
  tables = {"word_embeddings": tf.cast(tf.cast(word_vectors, tf.bfloat16), tf.float32)}
  ids = tf.constant([[2, 7, 8, 9, 3, 0], [2, 11, 3, 0, 0, 0]])
  inputs = {"input_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
            "segment_ids": tf.zeros_like(ids)}
  real_tokens = ids.numpy() > 0
  expected = passing_encoder("float32", drop_padding, tables)(inputs)["sequence_output"]
  bfloat16 = passing_encoder("bfloat16", drop_padding, tables)
  assert bfloat16.compute_dtype == "bfloat16"
  outputs = bfloat16(inputs)["sequence_output"]
  assert outputs.dtype == tf.float32
  np.testing.assert_allclose(outputs.numpy()[real_tokens], expected.numpy()[real_tokens],
                             rtol=0, atol=1e-5)
  # The tolerance tells a stream rounded once from one never rounded.
  rounded = tf.cast(tf.cast(expected, tf.bfloat16), tf.float32)
  assert np.abs(rounded.numpy() - expected.numpy())[real_tokens].max() > 1e-3


def test_a_model_built_in_mixed_precision_is_exported_in_the_precision_asked(tiny_model):
  config = bert_config_lib.BertConfig.from_json_file(tiny_model[1])
  mixed = mixed_bfloat16_classifier(config)
  ids = tf.constant([[2, 7, 8, 9, 3, 0]])
  inputs = {"input_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
            "segment_ids": tf.zeros_like(ids)}
  float32 = export_precision.model_in_precision(mixed, "float32")
  assert (float32.compute_dtype, float32.encoder.compute_dtype) == ("float32", "float32")
  for source, copy in zip(mixed.weights, float32.weights, strict=True):
    np.testing.assert_array_equal(copy.numpy(), source.numpy(), err_msg=source.path)
  # It computes as a model built in float32 with those weights; the mixed one does not.
  with export_precision.compute_policy("float32"):
    reference = classifier_model.BertClassifier(config, num_outputs=3)
  reference.set_weights(mixed.get_weights())
  expected = reference(inputs).numpy()
  np.testing.assert_allclose(float32(inputs).numpy(), expected, rtol=1e-6, atol=1e-7)
  assert np.abs(mixed(inputs).numpy() - expected).max() > 0
  # In bfloat16 its weights are stored in bfloat16, the layer norms' in float32, and it answers
  # as the mixed model does: mixed_bfloat16 casts each weight to the same bfloat16 values.
  bfloat16 = export_precision.model_in_precision(mixed, "bfloat16")
  assert {w.path for w in bfloat16.weights if w.dtype != "bfloat16"} == {
      w.path for w in bfloat16.weights if "LayerNorm" in w.path}
  np.testing.assert_array_equal(bfloat16(inputs).numpy(), mixed(inputs).numpy())


def test_bfloat16_is_refused_in_one_line_without_processor_support(tiny_model, tmp_path,
                                                                   monkeypatch):
  monkeypatch.setattr(cpu_features, "has_bfloat16_dot_product", lambda cpuinfo=None: False)
  flags = classifier_flags(tiny_model, tmp_path, "--do_train", "--export_precision=bfloat16")
  result = scripts.run_in_process("run_classifier.py", *flags)
  assert result.returncode == 1
  line = result.stderr.strip().splitlines()[-1]
  assert line.startswith("run_classifier.py: error: --export_precision=bfloat16: "), line
  assert "emulated bfloat16 is slower than float32" in line
  assert "--allow_emulated_bfloat16" in line
  assert not (tmp_path / "out").exists() and not (tmp_path / "export").exists()
  # Forced, the same flags pass every check; without --export_dir there is nothing to export.
  config_class = scripts.IN_PROCESS_RUNS["run_classifier.py"][0]
  config_class.from_args(*flags, "--allow_emulated_bfloat16").validate()
  without_export = [flag for flag in flags if not flag.startswith("--export_dir=")]
  with pytest.raises(errors.UsageError, match=r"^--export_precision=bfloat16 needs --export_dir$"):
    config_class.from_args(*without_export, "--allow_emulated_bfloat16").validate()


@pytest.fixture(scope="module")
def pretrained_checkpoint(tiny_model, tmp_path_factory):
  """A tiny pretraining model's checkpoint (original layout) of seeded random weights, drawn as
  the model initialises them: normal(0, 0.02), layer-norm scales around 1."""
  model = pretraining_model.BertPretrainingModel(
      bert_config_lib.BertConfig.from_json_file(tiny_model[1]))
  rng = np.random.default_rng(0)
  prefix = str(tmp_path_factory.mktemp("bfloat16_pretrained") / "model.ckpt-1")
  checkpoint_io.write_checkpoint(prefix, {
      name: (rng.normal(0, 0.02, variable.shape) + name.endswith("gamma")).astype(np.float32)
      for name, variable in model.name_to_variable().items()})
  return prefix


def export_encoder(tiny_model, checkpoint, export_dir, *flags):
  vocab_file, config_file = tiny_model
  return scripts.run_in_process(
      "export_model.py", f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--init_checkpoint={checkpoint}", f"--max_seq_length={ENCODER_LENGTH}",
      f"--export_dir={export_dir}", *flags)


@pytest.mark.slow  # whole runs
def test_the_encoder_exports_in_bfloat16(tiny_model, pretrained_checkpoint, tmp_path):
  # Token ids alone (--export_ids_only): the in-graph tokenizer is the same in both precisions
  # and triples the time of an export.
  tokenizer = tokenization.FullTokenizer(tiny_model[0])
  packed = [sequence_pairs.pack(tokenizer, tokenizer.tokenize(line.split("\t")[0]), None,
                                ENCODER_LENGTH)
            for line in (SAMPLES_DIR / "classification" / "dev.tsv").read_text().splitlines()[1:]]
  inputs = {name: tf.constant([getattr(p, name) for p in packed])
            for name in ("input_ids", "input_mask", "segment_ids")}
  real_tokens = inputs["input_mask"].numpy().astype(bool)
  loaded = {}
  for version, precision in enumerate(("float32", "bfloat16"), start=1):
    result = export_encoder(tiny_model, pretrained_checkpoint, tmp_path / "export",
                            f"--export_version={version}", f"--export_precision={precision}",
                            "--export_ids_only",
                            *(FORCE_ON_THIS_PROCESSOR if precision == "bfloat16" else ()))
    assert result.returncode == 0, result.stderr[-3000:]
    loaded[precision] = tf.saved_model.load(result.result.export_path)
    assert ("DT_BFLOAT16" in matmul_dtypes(result.result.export_path)) == (
        precision == "bfloat16")
  assert signature_specs(loaded["bfloat16"]) == signature_specs(loaded["float32"])
  outputs = {precision: model.signatures["predict_ids"](**inputs)
             for precision, model in loaded.items()}
  for name in ("embedding", "pooled_output", "sequence_output", "mlm_logits"):
    float32, bfloat16 = (outputs[p][name].numpy() for p in ("float32", "bfloat16"))
    assert bfloat16.dtype == np.float32, name
    if float32.ndim == 3:  # one vector per real token
      float32, bfloat16 = float32[real_tokens], bfloat16[real_tokens]
    # Each vector within RELATIVE_TOLERANCE of its length.
    errors = np.linalg.norm(bfloat16 - float32, axis=-1) / np.linalg.norm(float32, axis=-1)
    assert 0 < errors.max() < RELATIVE_TOLERANCE, (name, errors.max())


def test_export_model_refuses_bfloat16_without_processor_support(
    tiny_model, pretrained_checkpoint, tmp_path, monkeypatch):
  monkeypatch.setattr(cpu_features, "has_bfloat16_dot_product", lambda cpuinfo=None: False)
  result = export_encoder(tiny_model, pretrained_checkpoint, tmp_path / "export",
                          "--export_precision=bfloat16")
  assert result.returncode == 1
  line = result.stderr.strip().splitlines()[-1]
  assert line.startswith("export_model.py: error: --export_precision=bfloat16: "), line
  assert not (tmp_path / "export").exists()
