"""Packed pretraining rows give each instance what its own unpacked row gives: the same logits,
losses and gradients, so the same optimizer update (no cross-contamination between instances)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import attention
from modeling import bert_config as bert_config_lib
from modeling import keras_variables
from modeling import losses
from modeling import optimization
from modeling import pretraining_model
from tasks.pretraining import task as pretraining_task

CONFIG = bert_config_lib.BertConfig(
    vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    # Wide initial weights: logits of order 1, not 0.01, so that 1e-5 is a tight tolerance.
    initializer_range=0.5)
SEQ_LENGTH = 24
MAX_PREDICTIONS = 4
MAX_SEQUENCES_PER_PACK = 3
CLS_ID, SEP_ID = 1, 2
# Instance lengths, and which instances share a packed row (one row keeps a slot empty).
LENGTHS = (13, 9, 7, 5, 11, 6)
PACKS = ((0, 1), (2, 3, 5), (4,))


def _instances(seed=0):
  """`[CLS] A [SEP] B [SEP]` instances with masked positions and next-sentence labels."""
  rng = np.random.default_rng(seed)
  instances = []
  for length in LENGTHS:
    split = int(rng.integers(2, length - 2))
    ids = rng.integers(3, CONFIG.vocab_size, size=length)
    ids[[0, split, length - 1]] = CLS_ID, SEP_ID, SEP_ID
    segments = (np.arange(length) > split).astype(np.int64)
    candidates = [i for i in range(1, length - 1) if i != split]
    num_predictions = min(MAX_PREDICTIONS, max(1, round(length * 0.3)))
    positions = np.sort(rng.choice(candidates, num_predictions, replace=False))
    instances.append({
        "input_ids": ids, "segment_ids": segments, "masked_lm_positions": positions,
        "masked_lm_ids": rng.integers(3, CONFIG.vocab_size, size=num_predictions),
        "next_sentence_label": int(rng.integers(0, 2)),
    })
  return instances


def _unpacked_batch(instances):
  """One row per instance, padded to SEQ_LENGTH, as the original records."""
  batch = {name: np.zeros([len(instances), SEQ_LENGTH], np.int32)
           for name in ("input_ids", "input_mask", "segment_ids")}
  for name in ("masked_lm_positions", "masked_lm_ids"):
    batch[name] = np.zeros([len(instances), MAX_PREDICTIONS], np.int32)
  batch["masked_lm_weights"] = np.zeros([len(instances), MAX_PREDICTIONS], np.float32)
  batch["next_sentence_labels"] = np.zeros([len(instances), 1], np.int32)
  for row, instance in enumerate(instances):
    length, count = len(instance["input_ids"]), len(instance["masked_lm_positions"])
    batch["input_ids"][row, :length] = instance["input_ids"]
    batch["input_mask"][row, :length] = 1
    batch["segment_ids"][row, :length] = instance["segment_ids"]
    batch["masked_lm_positions"][row, :count] = instance["masked_lm_positions"]
    batch["masked_lm_ids"][row, :count] = instance["masked_lm_ids"]
    batch["masked_lm_weights"][row, :count] = 1.0
    batch["next_sentence_labels"][row] = instance["next_sentence_label"]
  return batch


def _packed_batch(instances, packs):
  """The instances laid out as `tasks.pretraining.features.packed_pretraining_feature_spec`
  describes, written here independently of the data writer."""
  slots = MAX_PREDICTIONS + MAX_SEQUENCES_PER_PACK
  batch = {name: np.zeros([len(packs), SEQ_LENGTH], np.int32)
           for name in ("input_ids", "input_mask", "segment_ids", "position_ids",
                        "instance_ids")}
  for name in ("masked_lm_positions", "masked_lm_ids"):
    batch[name] = np.zeros([len(packs), slots], np.int32)
  batch["masked_lm_weights"] = np.zeros([len(packs), slots], np.float32)
  for name in ("next_sentence_positions", "next_sentence_labels"):
    batch[name] = np.zeros([len(packs), MAX_SEQUENCES_PER_PACK], np.int32)
  batch["next_sentence_weights"] = np.zeros([len(packs), MAX_SEQUENCES_PER_PACK], np.float32)
  for row, pack in enumerate(packs):
    start = predicted = 0
    for slot, index in enumerate(pack):
      instance = instances[index]
      length, count = len(instance["input_ids"]), len(instance["masked_lm_positions"])
      span = slice(start, start + length)
      batch["input_ids"][row, span] = instance["input_ids"]
      batch["input_mask"][row, span] = 1
      batch["segment_ids"][row, span] = instance["segment_ids"]
      batch["position_ids"][row, span] = np.arange(length)
      batch["instance_ids"][row, span] = slot + 1
      predictions = slice(predicted, predicted + count)
      batch["masked_lm_positions"][row, predictions] = instance["masked_lm_positions"] + start
      batch["masked_lm_ids"][row, predictions] = instance["masked_lm_ids"]
      batch["masked_lm_weights"][row, predictions] = 1.0
      batch["next_sentence_positions"][row, slot] = start
      batch["next_sentence_labels"][row, slot] = instance["next_sentence_label"]
      batch["next_sentence_weights"][row, slot] = 1.0
      start += length
      predicted += count
  return batch


def _twin_models(seed=0):
  """An unpacked and a packed `BertPretrainingModel` holding the same weights."""
  keras.utils.set_random_seed(seed)
  unpacked = pretraining_model.BertPretrainingModel(CONFIG)
  packed = pretraining_model.BertPretrainingModel(CONFIG, packed=True)
  unpacked_names = unpacked.name_to_variable()
  packed_names = packed.name_to_variable()
  assert sorted(unpacked_names) == sorted(packed_names)
  for name, variable in packed_names.items():
    variable.assign(unpacked_names[name])
  return unpacked, packed


def _per_instance_outputs(outputs, instances, packs=None):
  """{instance index: (masked-LM logits of its predictions, next-sentence logits)} of an
  unpacked batch (`packs` None: row i holds instance i) or a packed one."""
  mlm = outputs["masked_lm_logits"].numpy()
  nsp = outputs["next_sentence_logits"].numpy()
  counts = [len(instance["masked_lm_positions"]) for instance in instances]
  if packs is None:
    return {row: (mlm[row, :counts[row]], nsp[row]) for row in range(len(instances))}
  per_instance = {}
  for row, pack in enumerate(packs):
    predicted = 0
    for slot, index in enumerate(pack):
      per_instance[index] = (mlm[row, predicted:predicted + counts[index]], nsp[row, slot])
      predicted += counts[index]
  return per_instance


def test_packed_attention_mask_is_block_diagonal_without_padding():
  mask = attention.PackedAttentionMask()(tf.constant([[1, 1, 2, 2, 2, 0]])).numpy()[0]
  expected = np.zeros([6, 6], np.int32)
  expected[:2, :2] = 1
  expected[2:5, 2:5] = 1
  np.testing.assert_array_equal(mask, expected)


def test_hand_packing_keeps_every_instance_once():
  assert sorted(index for pack in PACKS for index in pack) == list(range(len(LENGTHS)))
  assert all(sum(LENGTHS[i] for i in pack) <= SEQ_LENGTH for pack in PACKS)
  assert max(map(len, PACKS)) == MAX_SEQUENCES_PER_PACK
  assert min(map(len, PACKS)) < MAX_SEQUENCES_PER_PACK  # an empty slot is exercised


def test_packed_forward_pass_equals_the_unpacked_one_per_instance():
  instances = _instances()
  unpacked_batch = _unpacked_batch(instances)
  packed_batch = _packed_batch(instances, PACKS)
  unpacked, packed = _twin_models()
  unpacked_outputs = unpacked(unpacked_batch, training=False)
  packed_outputs = packed(packed_batch, training=False)
  assert packed_outputs["next_sentence_logits"].shape == (len(PACKS), MAX_SEQUENCES_PER_PACK, 2)

  expected = _per_instance_outputs(unpacked_outputs, instances)
  actual = _per_instance_outputs(packed_outputs, instances, PACKS)
  assert sorted(actual) == sorted(expected)
  for index, (mlm, nsp) in expected.items():
    assert actual[index][0].shape == mlm.shape
    np.testing.assert_allclose(actual[index][0], mlm, atol=1e-5, rtol=0)
    np.testing.assert_allclose(actual[index][1], nsp, atol=1e-5, rtol=0)
  # Real work was compared: the logits differ between instances.
  assert np.abs(expected[0][1] - expected[1][1]).max() > 0.1

  unpacked_losses = losses.pretraining_loss(unpacked_outputs, unpacked_batch)
  packed_losses = losses.pretraining_loss(packed_outputs, packed_batch)
  np.testing.assert_allclose([float(x) for x in packed_losses],
                             [float(x) for x in unpacked_losses], atol=1e-5, rtol=0)
  unpacked_metrics = losses.pretraining_metrics(unpacked_outputs, unpacked_batch)
  packed_metrics = losses.pretraining_metrics(packed_outputs, packed_batch)
  for name, (total, count) in unpacked_metrics.items():
    np.testing.assert_allclose(float(packed_metrics[name][1]), float(count), rtol=0)
    # A float32 sum near 90 (the masked LM loss) moves by a few ulps (7.6e-6 each) when its
    # terms differ in their last bits, as the two batches' shapes let them.
    np.testing.assert_allclose(float(packed_metrics[name][0]), float(total), atol=1e-5, rtol=1e-6)
  assert float(unpacked_metrics["next_sentence_loss"][1]) == len(LENGTHS)


def test_without_the_block_mask_instances_would_contaminate_each_other():
  """The check above can fail: attending across a packed row changes the logits."""
  instances = _instances()
  packed_batch = _packed_batch(instances, PACKS)
  _, packed = _twin_models()
  separate = packed(packed_batch, training=False)["masked_lm_logits"].numpy()
  one_instance = dict(packed_batch, instance_ids=np.minimum(packed_batch["instance_ids"], 1))
  mixed = packed(one_instance, training=False)["masked_lm_logits"].numpy()
  assert np.abs(separate - mixed).max() > 1e-3


LEARNING_RATE = 1e-2
# Adam's first step moves each weight by about LEARNING_RATE * g / (|g| + 1e-6): where |g| is
# near 1e-6, a rounding difference of 1e-8 in g moves the update by a few 1e-5 (seen on the word
# embeddings' smallest gradients). The updates are compared to 1% of the step size.
UPDATE_TOLERANCE = 0.01 * LEARNING_RATE
# Gradients that are 0 in exact arithmetic: a key bias adds the same score to every key of a
# query, which the softmax cancels. Both runs leave them at float noise (about 1e-8), which
# Adam's first step turns into updates of either sign: their gradients alone are compared.
ZERO_GRADIENT_VARIABLES = "attention/self/key/bias"


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_one_optimizer_step_on_packed_rows_makes_the_unpacked_update(optimizer):
  instances = _instances(seed=1)
  batches = {False: _unpacked_batch(instances), True: _packed_batch(instances, PACKS)}
  models = dict(zip((False, True), _twin_models(seed=1)))
  gradients, updated = {}, {}
  for packed, model in models.items():
    # As the engine steps: the optimizer works on the tf.Variables behind Keras's.
    variables = {name: keras_variables.as_tf_variable(variable)
                 for name, variable in model.name_to_variable().items()}
    step_optimizer = optimization.create_optimizer(LEARNING_RATE, 10, 0, optimizer)
    step_optimizer.build(variables)
    with tf.GradientTape() as tape:
      total_loss, _, _ = losses.pretraining_loss(model(batches[packed], training=True),
                                                 batches[packed])
    step_gradients = tape.gradient(total_loss, list(variables.values()))
    gradients[packed] = {name: tf.convert_to_tensor(gradient).numpy()
                         for name, gradient in zip(variables, step_gradients)}
    step_optimizer.apply_gradients(zip(step_gradients, variables.values()))
    updated[packed] = {name: variable.numpy() for name, variable in variables.items()}
  before = _twin_models(seed=1)[0].name_to_variable()
  compared = 0
  for name, value in updated[False].items():
    np.testing.assert_allclose(gradients[True][name], gradients[False][name], atol=1e-6, rtol=0,
                               err_msg=name)
    if ZERO_GRADIENT_VARIABLES in name:
      assert np.abs(gradients[False][name]).max() < 1e-6
      continue
    np.testing.assert_allclose(updated[True][name], value, atol=UPDATE_TOLERANCE, rtol=0,
                               err_msg=name)
    assert not np.allclose(value, before[name].numpy()), name  # the step moved it
    compared += 1
  assert compared == len(updated[False]) - CONFIG.num_hidden_layers


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_a_last_layer_at_the_heads_positions_alone_gives_the_same_logits_and_gradients(packed):
  """`last_layer_at_predictions` (what `run_pretraining.py` trains): the same logits, loss and
  gradients as the full last layer, both layouts; packed rows also compiled by XLA (the TPU path;
  the unpacked layout's gather compiles in `test_modeling`'s first-position test)."""
  instances = _instances(seed=2)
  batch = _packed_batch(instances, PACKS) if packed else _unpacked_batch(instances)
  keras.utils.set_random_seed(2)
  full = pretraining_model.BertPretrainingModel(CONFIG, packed=packed)
  heads_only = full.rebuilt(last_layer_at_predictions=True)

  def outputs_loss_and_gradients(model):
    with tf.GradientTape() as tape:
      outputs = model(batch, training=True)
      total_loss, _, _ = losses.pretraining_loss(outputs, batch)
    gradients = tape.gradient(total_loss, [v.value for v in model.trainable_variables])
    return outputs, total_loss, gradients

  expected = outputs_loss_and_gradients(full)
  results = [outputs_loss_and_gradients(heads_only)]
  if packed:
    results.append(tf.function(lambda: outputs_loss_and_gradients(heads_only),
                               jit_compile=True)())
  for outputs, total_loss, gradients in results:
    num_cls = MAX_SEQUENCES_PER_PACK if packed else 1
    assert outputs["sequence_output"].shape[1] == num_cls + batch["masked_lm_positions"].shape[1]
    for name in ("masked_lm_logits", "next_sentence_logits", "pooled_output"):
      # Logits of a few units: products over other row counts round differently, about 1e-6
      # of the value per product.
      np.testing.assert_allclose(outputs[name], expected[0][name], atol=1e-5, rtol=1e-5,
                                 err_msg=name)
    np.testing.assert_allclose(total_loss, expected[1], atol=1e-5, rtol=1e-6)
    for variable, gradient, full_gradient in zip(full.trainable_variables, gradients,
                                                 expected[2], strict=True):
      np.testing.assert_allclose(tf.convert_to_tensor(gradient),
                                 tf.convert_to_tensor(full_gradient), atol=1e-5, rtol=1e-4,
                                 err_msg=variable.path)
  assert heads_only.get_config()["last_layer_at_predictions"]
  assert "last_layer_at_predictions" not in full.get_config()
  assert pretraining_task.PretrainingTask(CONFIG, packed).build_model().last_layer_at_predictions
