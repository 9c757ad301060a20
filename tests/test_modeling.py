"""The encoder, heads and losses: original names and sizes, numerics against NumPy, dtypes."""

import json
import math
import os
import platform

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import activations
from modeling import attention as attention_lib
from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import classifier_model
from modeling import encoder as encoder_lib
from modeling import losses
from modeling import multiple_choice_model
from modeling import pretraining_model
from modeling import token_rows as token_rows_lib
from tests import xla_functions

BASE_CONFIG = bert_config_lib.BertConfig(vocab_size=30522, type_vocab_size=2)
TINY = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=24, type_vocab_size=2)


def _tiny_features(batch_size=3, seq_length=10, num_predictions=4, seed=0):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(4, seq_length + 1, size=batch_size)
  input_mask = (np.arange(seq_length)[None] < lengths[:, None]).astype(np.int32)
  positions = np.stack([np.sort(rng.choice(np.arange(1, n), num_predictions, replace=False))
                        for n in lengths])
  weights = np.ones([batch_size, num_predictions], np.float32)
  weights[0, -1] = 0.0  # a padding slot
  return {
      "input_ids": (rng.integers(1, TINY["vocab_size"], size=(batch_size, seq_length))
                    * input_mask).astype(np.int32),
      "input_mask": input_mask,
      "segment_ids": (np.arange(seq_length)[None] >= lengths[:, None] // 2).astype(np.int32)
                     * input_mask,
      "masked_lm_positions": positions.astype(np.int32),
      "masked_lm_ids": rng.integers(0, TINY["vocab_size"],
                                    size=(batch_size, num_predictions)).astype(np.int32),
      "masked_lm_weights": weights,
      "next_sentence_labels": rng.integers(0, 2, size=(batch_size, 1)).astype(np.int32),
  }


@pytest.fixture(autouse=True)
def _float32_policy():
  yield
  keras.mixed_precision.set_global_policy("float32")


def test_config_defaults_and_json_round_trip(tmp_path):
  config = bert_config_lib.BertConfig(vocab_size=100)
  assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
          config.intermediate_size, config.hidden_act, config.hidden_dropout_prob,
          config.attention_probs_dropout_prob, config.max_position_embeddings,
          config.type_vocab_size, config.initializer_range) == (
              768, 12, 12, 3072, "gelu", 0.1, 0.1, 512, 16, 0.02)
  path = tmp_path / "bert_config.json"
  released = dict(json.loads(BASE_CONFIG.to_json_string()), directionality="bidi",
                  pooler_type="first_token_transform")
  path.write_text(json.dumps(released))
  loaded = bert_config_lib.BertConfig.from_json_file(path)
  assert loaded.extra == {"directionality": "bidi", "pooler_type": "first_token_transform"}
  assert json.loads(loaded.to_json_string()) == released
  assert loaded.to_json_string() == json.dumps(released, indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("content, message", [
    (None, "cannot read config"),
    ("{", "malformed JSON at line 1"),
    ('{"hidden_size": 8}', "missing required key vocab_size"),
    ('{"vocab_size": 10, "hidden_size": 10, "num_attention_heads": 3}',
     "hidden_size 10 is not a multiple of num_attention_heads 3"),
    ('{"vocab_size": 10, "hidden_act": "swish"}', "unknown hidden_act 'swish'"),
    ('{"vocab_size": 0}', "vocab_size must be a positive integer, got 0"),
    ('{"vocab_size": 10, "num_hidden_layers": -1}', "num_hidden_layers must be a positive"),
    ('{"vocab_size": 10, "hidden_dropout_prob": 1.5}', "hidden_dropout_prob must be in"),
    # float() and json take NaN and Infinity; they passed the check "> 0" (issue 38).
    ('{"vocab_size": 10, "initializer_range": NaN}', "initializer_range must be positive and "
     "finite, got nan"),
    ('{"vocab_size": 10, "initializer_range": Infinity}', "initializer_range must be positive"),
    ('{"vocab_size": 10, "hidden_dropout_prob": true}', "hidden_dropout_prob must be in"),
    # json.loads raised RecursionError and a bare ValueError for these.
    ("[" * 5000, "malformed JSON: arrays or objects nested too deeply"),
    ('{"vocab_size": ' + "1" * 5000 + "}", "malformed JSON: a number of more than 4300 digits"),
    (b'{\n"hidden_act": "g\xe9lu"}', "not UTF-8 text at line 2 (invalid continuation byte at "
     "byte 18)"),
    ('{"vocab_size": 10, "num_hiden_layers": 2}',
     "unknown key 'num_hiden_layers'; did you mean 'num_hidden_layers'?"),
    ('{"vocab_size": 10, "num_hidden_layers": 12, "num_hiden_layers": 2}',
     "unknown key 'num_hiden_layers' beside 'num_hidden_layers': a misspelt duplicate?"),
])
def test_config_errors_name_the_file_and_the_problem(tmp_path, content, message):
  path = tmp_path / "bert_config.json"
  if content is not None:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
  with pytest.raises(bert_config_lib.ConfigError) as error:
    bert_config_lib.BertConfig.from_json_file(path)
  assert str(path) in str(error.value) and message in str(error.value)


def test_a_key_only_loosely_like_one_the_config_sets_is_kept_as_extra():
  config = bert_config_lib.BertConfig.from_dict(
      {"vocab_size": 10, "hidden_act": "relu", "hidden_dropout_prob": 0.1, "hidden_dropout": 0.2,
       "pooler_num_attention_heads": 12, "layer_norm_eps": 1e-12, "pad_token_id": 0,
       "position_embedding_type": "absolute", "classifier_dropout": None})
  assert config.hidden_act == "relu"
  assert set(config.extra) == {"hidden_dropout", "pooler_num_attention_heads", "layer_norm_eps",
                               "pad_token_id", "position_embedding_type", "classifier_dropout"}


def test_activations_match_their_formulas():
  x = np.linspace(-6, 6, 101).astype(np.float32)
  tanh_gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
  erf_gelu = 0.5 * x * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
  np.testing.assert_allclose(activations.get_activation("gelu")(x), tanh_gelu, atol=1e-6)
  np.testing.assert_allclose(activations.get_activation("gelu_exact")(x), erf_gelu, atol=1e-6)
  assert not np.allclose(tanh_gelu, erf_gelu, atol=1e-5)
  assert activations.canonical_name("") == activations.canonical_name(None) == "linear"


@pytest.mark.parametrize("name", ["gelu", "gelu_exact"])
def test_training_gelu_is_the_same_function_compiled_by_xla(name):
  x = tf.constant(np.linspace(-8, 8, 2001), tf.float32)
  plain = activations.get_activation(name)
  fused = activations.get_training_activation(name)

  def value_and_gradient(activation):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = activation(x)
    return y, tape.gradient(y, x, output_gradients=tf.cos(x))

  expected_value, expected_gradient = value_and_gradient(plain)
  traced = tf.function(value_and_gradient)
  for run in (value_and_gradient, traced, tf.function(value_and_gradient, jit_compile=True)):
    value, gradient = run(fused)
    np.testing.assert_allclose(value, expected_value, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-5, atol=1e-5)
  graph_def = traced.get_concrete_function(fused).graph.as_graph_def()
  assert len(xla_functions.xla_compiled_functions(graph_def)) == 2  # the value and the gradient
  plain_graph_def = traced.get_concrete_function(plain).graph.as_graph_def()
  assert not xla_functions.xla_compiled_functions(plain_graph_def)
  assert activations.get_training_activation("relu") is activations.get_activation("relu")


@pytest.mark.parametrize("name", ["gelu", "gelu_exact"])
def test_training_gelu_of_bfloat16_is_the_float32_one_rounded(name):
  x = tf.constant(np.linspace(-8, 8, 2001), tf.float32)
  upstream = tf.cos(x)
  fused = activations.get_training_activation(name)

  def value_and_gradient(inputs, output_gradients):
    with tf.GradientTape() as tape:
      tape.watch(inputs)
      y = fused(inputs)
    return y, tape.gradient(y, inputs, output_gradients=output_gradients)

  half_x, half_upstream = tf.cast(x, tf.bfloat16), tf.cast(upstream, tf.bfloat16)
  value, gradient = value_and_gradient(half_x, half_upstream)
  assert value.dtype == gradient.dtype == tf.bfloat16
  # Computed in float32 from the same bfloat16 operands, rounded once.
  expected_value, expected_gradient = value_and_gradient(tf.cast(half_x, tf.float32),
                                                         tf.cast(half_upstream, tf.float32))
  np.testing.assert_array_equal(tf.cast(value, tf.float32),
                                tf.cast(tf.cast(expected_value, tf.bfloat16), tf.float32))
  np.testing.assert_array_equal(tf.cast(gradient, tf.float32),
                                tf.cast(tf.cast(expected_gradient, tf.bfloat16), tf.float32))


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64")
                    or os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0",
                    reason="oneDNN's CPU kernels: x86-64 only, and not turned off")
def test_bfloat16_attention_softmax_is_the_float32_one_rounded():
  # Attention's softmax runs in the compute dtype (modeling/attention.py): safe because oneDNN's
  # bfloat16 kernel sums in float32 and rounds once, which this holds it to (docs/model.md).
  scores = tf.cast(tf.random.stateless_normal([2, 3, 40, 40], seed=[1, 2], stddev=3.0),
                   tf.bfloat16)
  scores += attention_lib.attention_mask_adder(tf.sequence_mask([40, 25], 40, tf.int32),
                                               tf.bfloat16)
  softmax = tf.function(lambda logits: tf.nn.softmax(logits, axis=-1))
  probabilities = softmax(scores)
  assert probabilities.dtype == tf.bfloat16
  expected = tf.cast(softmax(tf.cast(scores, tf.float32)), tf.bfloat16)
  np.testing.assert_array_equal(tf.cast(probabilities, tf.float32), tf.cast(expected, tf.float32))


def test_only_training_runs_the_xla_compiled_activation():
  config = bert_config_lib.BertConfig(**dict(TINY, hidden_dropout_prob=0.0,
                                             attention_probs_dropout_prob=0.0))
  model = pretraining_model.BertPretrainingModel(config)
  features = _tiny_features()
  graphs = {training: tf.function(lambda batch, training=training: model(batch, training=training))
            .get_concrete_function(features).graph.as_graph_def()
            for training in (False, True)}
  assert not xla_functions.xla_compiled_functions(graphs[False])  # exports trace this path
  assert xla_functions.xla_compiled_functions(graphs[True])
  np.testing.assert_allclose(model(features, training=True)["masked_lm_logits"],
                             model(features, training=False)["masked_lm_logits"], atol=1e-5)


@pytest.mark.slow
def test_bert_base_has_the_original_names_shapes_and_parameter_counts(tmp_path):
  model = pretraining_model.BertPretrainingModel(BASE_CONFIG)
  assert model.encoder.count_params() == 109_482_240
  assert model.count_params() == 110_106_428
  names = model.name_to_variable()
  assert len(names) == 206 and len(model.encoder.name_to_variable()) == 199
  # Every variable of the model has exactly one original name.
  assert {id(v) for v in names.values()} == {id(v) for v in model.weights}
  prefix = checkpoint_io.write_checkpoint(str(tmp_path / "model.ckpt"), names)
  listed = dict(tf.train.list_variables(prefix))
  h, v, i = 768, 30522, 3072
  expected = {
      "bert/embeddings/word_embeddings": [v, h],
      "bert/embeddings/token_type_embeddings": [2, h],
      "bert/embeddings/position_embeddings": [512, h],
      "bert/embeddings/LayerNorm/beta": [h], "bert/embeddings/LayerNorm/gamma": [h],
      "bert/pooler/dense/kernel": [h, h], "bert/pooler/dense/bias": [h],
      "cls/predictions/transform/dense/kernel": [h, h],
      "cls/predictions/transform/dense/bias": [h],
      "cls/predictions/transform/LayerNorm/beta": [h],
      "cls/predictions/transform/LayerNorm/gamma": [h],
      "cls/predictions/output_bias": [v],
      "cls/seq_relationship/output_weights": [2, h],
      "cls/seq_relationship/output_bias": [2],
  }
  for layer in range(12):
    scope = f"bert/encoder/layer_{layer}"
    for name in ("query", "key", "value"):
      expected[f"{scope}/attention/self/{name}/kernel"] = [h, h]
      expected[f"{scope}/attention/self/{name}/bias"] = [h]
    expected.update({
        f"{scope}/attention/output/dense/kernel": [h, h],
        f"{scope}/attention/output/dense/bias": [h],
        f"{scope}/attention/output/LayerNorm/beta": [h],
        f"{scope}/attention/output/LayerNorm/gamma": [h],
        f"{scope}/intermediate/dense/kernel": [h, i],
        f"{scope}/intermediate/dense/bias": [i],
        f"{scope}/output/dense/kernel": [i, h],
        f"{scope}/output/dense/bias": [h],
        f"{scope}/output/LayerNorm/beta": [h],
        f"{scope}/output/LayerNorm/gamma": [h],
    })
  assert listed == expected


def _layer_norm(x, gamma, beta):
  mean = x.mean(-1, keepdims=True)
  variance = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(variance + 1e-12) * gamma + beta


def _numpy_encoder(weights, config, input_ids, input_mask, segment_ids):
  """A NumPy transcription of the original's `BertModel` forward pass (no dropout)."""
  act = {"gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))}
  w = {name: np.asarray(value, np.float64) for name, value in weights.items()}
  seq_length = input_ids.shape[1]
  x = (w["bert/embeddings/word_embeddings"][input_ids]
       + w["bert/embeddings/token_type_embeddings"][segment_ids]
       + w["bert/embeddings/position_embeddings"][:seq_length][None])
  x = _layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
  heads, size = config.num_attention_heads, config.attention_head_size
  adder = (1.0 - input_mask[:, None, None, :]) * -10000.0
  for layer in range(config.num_hidden_layers):
    s = f"bert/encoder/layer_{layer}"

    def dense(inputs, scope):
      return inputs @ w[f"{scope}/kernel"] + w[f"{scope}/bias"]

    def split(t):
      return t.reshape(t.shape[0], t.shape[1], heads, size).transpose(0, 2, 1, 3)

    q, k, v = (split(dense(x, f"{s}/attention/self/{n}")) for n in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + adder
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
    attention = _layer_norm(dense(context, f"{s}/attention/output/dense") + x,
                            w[f"{s}/attention/output/LayerNorm/gamma"],
                            w[f"{s}/attention/output/LayerNorm/beta"])
    intermediate = act[config.hidden_act](dense(attention, f"{s}/intermediate/dense"))
    x = _layer_norm(dense(intermediate, f"{s}/output/dense") + attention,
                    w[f"{s}/output/LayerNorm/gamma"], w[f"{s}/output/LayerNorm/beta"])
  pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
  return x, pooled


def _log_softmax(logits):
  shifted = logits - logits.max(-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_forward_pass_and_pretraining_losses_equal_a_numpy_transcription_of_the_original():
  config = bert_config_lib.BertConfig(**TINY)
  model = pretraining_model.BertPretrainingModel(config)
  # Non-zero biases and LayerNorm parameters so every term of the formulas is exercised.
  rng = np.random.default_rng(7)
  for variable in model.weights:
    variable.assign(rng.normal(scale=0.3, size=variable.shape).astype(np.float32))
  features = _tiny_features()
  outputs = model(features, training=False)
  weights = {name: v.numpy() for name, v in model.name_to_variable().items()}

  sequence, pooled = _numpy_encoder(weights, config, features["input_ids"],
                                    features["input_mask"], features["segment_ids"])
  np.testing.assert_allclose(outputs["sequence_output"], sequence, atol=2e-5)
  np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=2e-5)

  # Masked LM: gather -> dense(gelu) -> LayerNorm -> tied embeddings + bias; weighted mean + 1e-5.
  gathered = np.take_along_axis(sequence, features["masked_lm_positions"][..., None], axis=1)
  hidden = gathered @ weights["cls/predictions/transform/dense/kernel"] + weights[
      "cls/predictions/transform/dense/bias"]
  hidden = 0.5 * hidden * (1 + np.tanh(np.sqrt(2 / np.pi) * (hidden + 0.044715 * hidden ** 3)))
  hidden = _layer_norm(hidden, weights["cls/predictions/transform/LayerNorm/gamma"],
                       weights["cls/predictions/transform/LayerNorm/beta"])
  mlm_logits = hidden @ weights["bert/embeddings/word_embeddings"].T + weights[
      "cls/predictions/output_bias"]
  np.testing.assert_allclose(outputs["masked_lm_logits"], mlm_logits, atol=1e-4)
  log_probs = _log_softmax(mlm_logits)
  nll = -np.take_along_axis(log_probs, features["masked_lm_ids"][..., None], -1)[..., 0]
  w = features["masked_lm_weights"]
  expected_mlm = (w * nll).sum() / (w.sum() + 1e-5)
  # Next sentence: pooled . output_weights^T + bias, mean cross-entropy.
  nsp_logits = pooled @ weights["cls/seq_relationship/output_weights"].T + weights[
      "cls/seq_relationship/output_bias"]
  labels = features["next_sentence_labels"][:, 0]
  expected_nsp = -_log_softmax(nsp_logits)[np.arange(len(labels)), labels].mean()

  total, mlm, nsp = losses.pretraining_loss(outputs, features)
  np.testing.assert_allclose(mlm, expected_mlm, rtol=1e-5)
  np.testing.assert_allclose(nsp, expected_nsp, rtol=1e-5)
  np.testing.assert_allclose(total, expected_mlm + expected_nsp, rtol=1e-5)
  metrics = losses.pretraining_metrics(outputs, features)
  mlm_sum, mlm_count = metrics["masked_lm_loss"]
  np.testing.assert_allclose(mlm_sum / mlm_count, (w * nll).sum() / w.sum(), rtol=1e-5)
  correct = (mlm_logits.argmax(-1) == features["masked_lm_ids"]) * w
  np.testing.assert_allclose(metrics["masked_lm_accuracy"][0], correct.sum(), rtol=1e-6)
  np.testing.assert_allclose(metrics["next_sentence_accuracy"][0],
                             (nsp_logits.argmax(-1) == labels).sum(), rtol=1e-6)


def test_masked_lm_loss_of_a_batch_without_predictions_is_zero_not_nan():
  logits = tf.random.normal([2, 3, 7])
  loss = losses.masked_lm_loss(logits, tf.zeros([2, 3], tf.int32), tf.zeros([2, 3]))
  assert float(loss) == 0.0


def test_padding_does_not_change_the_real_tokens_outputs():
  encoder = encoder_lib.BertEncoder(bert_config_lib.BertConfig(**TINY))
  features = _tiny_features(batch_size=1, seq_length=6)
  features = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  features["input_mask"][:] = 1
  padded = {k: np.pad(v, [(0, 0), (0, 5)]) for k, v in features.items()}
  short = encoder(features)
  long = encoder(padded)
  np.testing.assert_allclose(long["sequence_output"][:, :6], short["sequence_output"], atol=1e-5)
  np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)
  assert len(long["encoder_outputs"]) == TINY["num_hidden_layers"]
  assert long["embedding_output"].shape == (1, 11, TINY["hidden_size"])
  np.testing.assert_array_equal(long["encoder_outputs"][-1], long["sequence_output"])


@pytest.mark.parametrize("policy, tolerance", [("float32", 1e-5), ("bfloat16", 0.02)])
def test_an_encoder_that_drops_padding_gives_the_same_outputs_at_the_real_tokens(policy,
                                                                               tolerance):
  keras.mixed_precision.set_global_policy(policy)
  encoder = encoder_lib.BertEncoder(bert_config_lib.BertConfig(**TINY))
  dropping = encoder.rebuilt(drop_padding=True)
  features = _tiny_features(batch_size=4, seq_length=12)
  features = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  features["input_mask"][-1] = 1  # a row without padding beside padded ones
  padded, dropped = encoder(features), dropping(features)
  real = features["input_mask"].astype(bool)
  assert not real.all()
  def numpy(tensor):
    return tf.cast(tensor, tf.float32).numpy()

  layer_pairs = [(dropped[name], padded[name]) for name in ("sequence_output", "embedding_output")]
  layer_pairs += zip(dropped["encoder_outputs"], padded["encoder_outputs"])
  for dropped_output, padded_output in layer_pairs:
    np.testing.assert_allclose(numpy(dropped_output)[real], numpy(padded_output)[real],
                               atol=tolerance)
  np.testing.assert_allclose(numpy(dropped["pooled_output"]), numpy(padded["pooled_output"]),
                             atol=tolerance)
  # Every layer's output is laid out with zeros at padding; without the option it is not.
  for layer_output in dropped["encoder_outputs"]:
    assert not np.any(numpy(layer_output)[~real])
  assert np.all(np.any(numpy(padded["sequence_output"])[~real], axis=-1))
  assert dropping.get_config()["drop_padding"] and "drop_padding" not in encoder.get_config()


def test_training_rounds_the_real_token_rows_up_with_the_first_padding_rows():
  lengths = np.array([10, 64, 5, 30, 0])
  input_mask = (np.arange(64)[None] < lengths[:, None]).astype(np.int32)  # 109 real of 320 rows
  real_rows = np.flatnonzero(input_mask.reshape(-1))
  layer = token_rows_lib.RealTokenRows()
  np.testing.assert_array_equal(layer(input_mask)[:, 0], real_rows)
  rows = layer(input_mask, training=True).numpy()[:, 0]
  assert len(rows) == token_rows_lib.TRAINING_ROW_MULTIPLE
  padding_rows = np.setdiff1d(np.arange(input_mask.size), real_rows)
  np.testing.assert_array_equal(rows,
                                np.sort(np.concatenate([real_rows, padding_rows[:128 - 109]])))
  # A count already a multiple takes no padding row; rounding never goes past the batch.
  np.testing.assert_array_equal(layer(np.ones([2, 64], np.int32), training=True)[:, 0],
                                np.arange(128))
  np.testing.assert_array_equal(layer(input_mask[:3, :40], training=True)[:, 0], np.arange(120))


def test_spread_rows_copies_token_states_to_their_rows_and_takes_their_gradients():
  input_mask = np.array([[0, 1, 1, 0, 0], [1, 0, 1, 1, 0]], np.int32)  # starts with padding
  token_rows = token_rows_lib.RealTokenRows()(input_mask)
  states = tf.constant(np.arange(10, 60, dtype=np.float32).reshape(5, 10))
  state_rows = token_rows_lib.source_rows(token_rows, input_mask.size)
  np.testing.assert_array_equal(state_rows, [0, 0, 1, 1, 1, 2, 2, 3, 4, 4])
  upstream = tf.random.normal([input_mask.size, 10])
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(states)
    spread = token_rows_lib.spread_rows(states, token_rows, state_rows)
    scattered = token_rows_lib.scatter_rows(states, token_rows, input_mask.size)
  held = input_mask.reshape(-1).astype(bool)
  np.testing.assert_array_equal(spread.numpy()[held], scattered.numpy()[held])
  np.testing.assert_array_equal(spread.numpy()[~held], states.numpy()[[0, 1, 1, 2, 4]])
  # The held rows' gradient alone: the scatter's.
  np.testing.assert_array_equal(tape.gradient(spread, states, output_gradients=upstream),
                                tape.gradient(scattered, states, output_gradients=upstream))
  no_token = token_rows_lib.RealTokenRows()(np.zeros([2, 3], np.int32))
  empty = token_rows_lib.spread_rows(tf.zeros([0, 4]), no_token,
                                     token_rows_lib.source_rows(no_token, 6))
  np.testing.assert_array_equal(empty, np.zeros([6, 4]))


@pytest.mark.parametrize("input_mask", [[[0, 1, 1], [1, 0, 1]], [[1, 1, 1], [1, 1, 1]]],
                         ids=["padded", "full"])
def test_row_layouts_and_their_gradients_are_tensorflow_s_gather_and_scatter(input_mask):
  """With padding, `gather_rows` / `scatter_rows` are `tf.gather_nd` / `tf.scatter_nd`; without,
  the same values through their identity branch."""
  input_mask = np.array(input_mask, np.int32)
  token_rows = token_rows_lib.RealTokenRows()(input_mask)
  rows = tf.random.normal([input_mask.size, 4])
  states = tf.random.normal([len(token_rows), 4])
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([rows, states])
    gathered = token_rows_lib.gather_rows(rows, token_rows)
    reference_gathered = tf.gather_nd(rows, token_rows)
    scattered = token_rows_lib.scatter_rows(states, token_rows, input_mask.size)
    reference_scattered = tf.scatter_nd(token_rows, states, [input_mask.size, 4])
  np.testing.assert_array_equal(gathered, reference_gathered)
  np.testing.assert_array_equal(scattered, reference_scattered)
  gathered_upstream = tf.random.normal(gathered.shape)
  scattered_upstream = tf.random.normal(scattered.shape)
  for output, reference, source, upstream in (
      (gathered, reference_gathered, rows, gathered_upstream),
      (scattered, reference_scattered, states, scattered_upstream)):
    np.testing.assert_array_equal(
        tape.gradient(output, source, output_gradients=upstream),
        tf.convert_to_tensor(tape.gradient(reference, source, output_gradients=upstream)))
  spread = token_rows_lib.spread_rows(states, token_rows,
                                      token_rows_lib.source_rows(token_rows, input_mask.size))
  held = input_mask.reshape(-1).astype(bool)
  np.testing.assert_array_equal(spread.numpy()[held], scattered.numpy()[held])


def test_training_on_the_real_tokens_alone_gives_the_padded_encoder_s_gradients():
  config = bert_config_lib.BertConfig(**{**TINY, "max_position_embeddings": 64,
                                         "hidden_dropout_prob": 0.0,
                                         "attention_probs_dropout_prob": 0.0})
  encoder = encoder_lib.BertEncoder(config)
  dropping = encoder.rebuilt(drop_padding=True)
  features = _tiny_features(batch_size=8, seq_length=40, num_predictions=2)
  features = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  assert 0 < features["input_mask"].sum() % token_rows_lib.TRAINING_ROW_MULTIPLE
  real = tf.cast(features["input_mask"][:, :, tf.newaxis], tf.float32)
  rng = np.random.default_rng(1)
  pooled_weights = rng.normal(size=[TINY["hidden_size"]]).astype(np.float32)
  token_weights = rng.normal(size=[40, TINY["hidden_size"]]).astype(np.float32)

  def loss_and_gradients(model):
    """A loss of the pooled output and of the real tokens' last states (a classifier's and a
    tagger's), its gradients for every variable."""
    with tf.GradientTape() as tape:
      outputs = model(features, training=True)
      loss = (tf.reduce_sum(tf.tanh(outputs["pooled_output"]) * pooled_weights)
              + tf.reduce_sum(tf.tanh(outputs["sequence_output"]) * real * token_weights))
    gradients = tape.gradient(loss, [v.value for v in model.trainable_variables])
    return loss.numpy(), [tf.convert_to_tensor(g).numpy() for g in gradients]

  padded_loss, padded_gradients = loss_and_gradients(encoder)
  dropped_loss, dropped_gradients = loss_and_gradients(dropping)
  np.testing.assert_allclose(dropped_loss, padded_loss, rtol=1e-5)
  for variable, dropped, padded in zip(encoder.trainable_variables, dropped_gradients,
                                       padded_gradients, strict=True):
    assert np.any(padded), variable.path
    np.testing.assert_allclose(dropped, padded, atol=1e-5, rtol=1e-4, err_msg=variable.path)


@pytest.mark.parametrize("drop_padding", [False, True], ids=["padded", "real_tokens"])
def test_an_encoder_computing_the_first_position_alone_gives_the_pooled_output_and_gradients(
    drop_padding):
  config = bert_config_lib.BertConfig(**{**TINY, "max_position_embeddings": 64,
                                         "hidden_dropout_prob": 0.0,
                                         "attention_probs_dropout_prob": 0.0})
  encoder = encoder_lib.BertEncoder(config)
  first_only = encoder.rebuilt(drop_padding=drop_padding, first_position_only=True)
  features = _tiny_features(batch_size=8, seq_length=40, num_predictions=2)
  features = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  features["input_mask"][-1] = 0  # a sequence of padding alone: its output is not compared
  weights = np.random.default_rng(2).normal(size=[TINY["hidden_size"]]).astype(np.float32)

  def outputs_and_gradients(model, training):
    with tf.GradientTape() as tape:
      outputs = model(features, training=training)
      pooled = outputs["pooled_output"][:-1]
      loss = tf.reduce_sum(tf.tanh(pooled) * weights)
    gradients = tape.gradient(loss, [v.value for v in model.trainable_variables])
    return outputs, [tf.convert_to_tensor(g).numpy() for g in gradients]

  for training in (False, True):
    full, full_gradients = outputs_and_gradients(encoder, training)
    ours, gradients = outputs_and_gradients(first_only, training)
    assert ours["sequence_output"].shape == (8, 1, TINY["hidden_size"])
    np.testing.assert_array_equal(ours["encoder_outputs"][-1], ours["sequence_output"])
    np.testing.assert_allclose(ours["sequence_output"][:-1], full["sequence_output"][:-1, :1],
                               atol=1e-5)
    np.testing.assert_allclose(ours["pooled_output"][:-1], full["pooled_output"][:-1], atol=1e-5)
    for variable, first_gradient, full_gradient in zip(encoder.trainable_variables, gradients,
                                                       full_gradients, strict=True):
      np.testing.assert_allclose(first_gradient, full_gradient, atol=1e-5, rtol=1e-4,
                                 err_msg=variable.path)
  assert first_only.get_config()["first_position_only"]
  assert "first_position_only" not in encoder.get_config()
  no_tokens = {k: np.zeros_like(v) for k, v in features.items()}
  assert first_only(no_tokens)["pooled_output"].shape == (8, TINY["hidden_size"])


def test_the_first_position_alone_compiles_under_xla_to_the_full_encoder_s_values():
  config = bert_config_lib.BertConfig(**{**TINY, "hidden_dropout_prob": 0.0,
                                         "attention_probs_dropout_prob": 0.0})
  encoder = encoder_lib.BertEncoder(config)
  first_only = encoder.rebuilt(first_position_only=True)
  features = _tiny_features(batch_size=4, seq_length=12)
  features = {k: tf.constant(features[k]) for k in ("input_ids", "input_mask", "segment_ids")}

  def pooled_and_gradients(model):
    with tf.GradientTape() as tape:
      pooled = model(features, training=True)["pooled_output"]
      loss = tf.reduce_sum(tf.tanh(pooled))
    return pooled, tape.gradient(loss, [v.value for v in model.trainable_variables])

  full_pooled, full_gradients = pooled_and_gradients(encoder)
  pooled, gradients = tf.function(lambda: pooled_and_gradients(first_only), jit_compile=True)()
  np.testing.assert_allclose(pooled, full_pooled, atol=1e-5)
  for variable, gradient, full_gradient in zip(encoder.trainable_variables, gradients,
                                               full_gradients, strict=True):
    np.testing.assert_allclose(tf.convert_to_tensor(gradient), tf.convert_to_tensor(full_gradient),
                               atol=1e-5, err_msg=variable.path)


def test_a_sequence_classifier_computes_its_last_layer_at_cls_alone():
  config = bert_config_lib.BertConfig(**TINY)
  assert classifier_model.BertClassifier(config, num_outputs=2).encoder.first_position_only
  assert not classifier_model.BertClassifier(config, num_outputs=2,
                                             per_token=True).encoder.first_position_only
  assert multiple_choice_model.BertMultipleChoice(config).encoder.first_position_only


def test_an_encoder_with_transposed_feed_forward_kernels_gives_the_same_outputs():
  encoder = encoder_lib.BertEncoder(bert_config_lib.BertConfig(**TINY))
  transposed = encoder.rebuilt(drop_padding=True, intermediate_kernel_transposed=True)
  source = encoder.transformer_layers[1].intermediate_dense.kernel
  stored = transposed.transformer_layers[1].intermediate_dense.kernel_transposed
  assert tuple(stored.shape) == (TINY["intermediate_size"], TINY["hidden_size"])
  assert stored.path == "layer_1/intermediate_dense/kernel_transposed"
  np.testing.assert_array_equal(stored.numpy(), source.numpy().T)
  features = _tiny_features(batch_size=3, seq_length=10)
  features = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  real = features["input_mask"].astype(bool)
  np.testing.assert_allclose(transposed(features)["sequence_output"].numpy()[real],
                             encoder(features)["sequence_output"].numpy()[real], atol=1e-5)
  assert transposed.get_config()["intermediate_kernel_transposed"]
  assert "intermediate_kernel_transposed" not in encoder.get_config()
  with pytest.raises(ValueError, match="does not hold the checkpoint layout"):
    transposed.name_to_variable()


def test_a_rebuilt_model_refuses_weights_that_do_not_match():
  encoder = encoder_lib.BertEncoder(bert_config_lib.BertConfig(**TINY))
  wider = bert_config_lib.BertConfig(**{**TINY, "intermediate_size": TINY["intermediate_size"] + 1})
  with pytest.raises(ValueError, match="the rebuilt BertEncoder differs: "
                     "layer_0/intermediate_dense/kernel .* has no counterpart"):
    encoder.rebuilt(config=wider.to_dict(), intermediate_kernel_transposed=True)


def test_a_multiple_choice_model_that_drops_padding_scores_the_same():
  model = multiple_choice_model.BertMultipleChoice(bert_config_lib.BertConfig(**TINY))
  dropping = model.rebuilt(drop_padding=True)
  features = _tiny_features(batch_size=6, seq_length=12, num_predictions=2)
  choices = {k: features[k].reshape(2, 3, 12) for k in ("input_ids", "input_mask", "segment_ids")}
  assert not choices["input_mask"].all()
  assert dropping.drop_padding and dropping.get_config()["drop_padding"]
  np.testing.assert_allclose(dropping(choices).numpy(), model(choices).numpy(), atol=1e-5)


@pytest.mark.parametrize("option", ["drop_padding", "first_position_only"])
def test_options_taking_a_padding_mask_are_refused_with_packed_rows(option):
  with pytest.raises(ValueError, match="take a padding mask"):
    encoder_lib.BertEncoder(bert_config_lib.BertConfig(**TINY), packed=True, **{option: True})


def test_dropout_is_active_only_when_training():
  model = pretraining_model.BertPretrainingModel(bert_config_lib.BertConfig(**TINY))
  features = _tiny_features()
  eval_a = model(features, training=False)["masked_lm_logits"]
  eval_b = model(features, training=False)["masked_lm_logits"]
  train = model(features, training=True)["masked_lm_logits"]
  np.testing.assert_array_equal(eval_a, eval_b)
  assert not np.allclose(eval_a, train)


def test_sequence_longer_than_the_position_table_is_refused():
  encoder = encoder_lib.BertEncoder(bert_config_lib.BertConfig(**TINY))
  too_long = np.ones([1, TINY["max_position_embeddings"] + 1], np.int32)
  with pytest.raises(Exception, match="max_position_embeddings|Incompatible shapes|incompatible"):
    encoder({"input_ids": too_long, "input_mask": too_long, "segment_ids": 0 * too_long})


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_keeps_weights_layer_norm_and_logits_in_float32(policy):
  config = bert_config_lib.BertConfig(**TINY)
  reference = pretraining_model.BertPretrainingModel(config)
  keras.mixed_precision.set_global_policy(policy)
  model = pretraining_model.BertPretrainingModel(config)
  for target, source in zip(model.weights, reference.weights):
    target.assign(source)
  features = _tiny_features()
  outputs = model(features)
  half = tf.float16 if policy == "mixed_float16" else tf.bfloat16
  assert all(v.dtype == tf.float32 for v in model.weights)
  assert outputs["masked_lm_logits"].dtype == tf.float32
  assert model.encoder.transformer_layers[0].output_layer_norm.compute_dtype == "float32"
  assert model.encoder.transformer_layers[0].intermediate_dense.compute_dtype == half.name
  expected = reference(features)["masked_lm_logits"]
  tolerance = 0.05 if policy == "mixed_float16" else 0.3
  np.testing.assert_allclose(outputs["masked_lm_logits"], expected, atol=tolerance)


@pytest.mark.slow
def test_jit_compiled_training_step_matches_eager():
  model = pretraining_model.BertPretrainingModel(bert_config_lib.BertConfig(**TINY))
  features = _tiny_features()

  def loss_and_gradients(batch):
    with tf.GradientTape() as tape:
      total, _, _ = losses.pretraining_loss(model(batch, training=False), batch)
    return total, tape.gradient(total, model.trainable_variables)

  eager_loss, eager_grads = loss_and_gradients(features)
  xla_loss, xla_grads = tf.function(loss_and_gradients, jit_compile=True)(features)
  np.testing.assert_allclose(xla_loss, eager_loss, rtol=1e-5)
  for xla, eager in zip(xla_grads, eager_grads):
    np.testing.assert_allclose(tf.convert_to_tensor(xla), tf.convert_to_tensor(eager), atol=1e-5)


def test_serialization_round_trip_rebuilds_the_same_architecture():
  model = pretraining_model.BertPretrainingModel(bert_config_lib.BertConfig(**TINY))
  rebuilt = pretraining_model.BertPretrainingModel.from_config(model.get_config())
  assert rebuilt.config == model.config
  assert sorted(rebuilt.name_to_variable()) == sorted(model.name_to_variable())
