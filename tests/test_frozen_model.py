"""`serving.frozen_model`: a model's inference call with its weights as graph constants answers as
the model, reads no variable, multiplies by expanding weights stored `[out, in]`, and a
SavedModel calling it from two signatures holds the weights once and no variables."""

import keras
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from modeling import bert_config as bert_config_lib
from modeling import classifier_model
from serving import frozen_model

CONFIG = bert_config_lib.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                                    num_attention_heads=2, intermediate_size=48,
                                    max_position_embeddings=16, type_vocab_size=2)
INPUT_SPEC = {name: tf.TensorSpec([None, None], tf.int32)
              for name in ("input_ids", "input_mask", "segment_ids")}


def classifier_and_inputs():
  keras.utils.set_random_seed(3)
  model = classifier_model.BertClassifier(CONFIG, num_outputs=3, drop_padding=True)
  ids = tf.constant([[2, 7, 8, 9, 3, 0], [2, 5, 3, 0, 0, 0], [2, 6, 6, 6, 6, 3]])
  inputs = {"input_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
            "segment_ids": tf.constant([[0, 0, 0, 1, 1, 0]] * 3)}
  return model, inputs


def test_the_frozen_model_answers_as_the_model():
  model, inputs = classifier_and_inputs()
  frozen = frozen_model.FrozenModel(model, INPUT_SPEC)
  expected = model(inputs, training=False).numpy()
  np.testing.assert_allclose(frozen(inputs).numpy(), expected, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(tf.function(frozen)(inputs).numpy(), expected, rtol=1e-6, atol=1e-6)
  assert frozen.config == model.get_config()


def test_the_frozen_graph_reads_no_variable_and_stores_expanding_weights_transposed():
  model, _ = classifier_and_inputs()
  operations = frozen_model.FrozenModel(model, INPUT_SPEC)._function.graph.get_operations()
  assert not [op.type for op in operations if "Variable" in op.type]
  products = {op.name: op for op in operations if op.type == "MatMul"}
  # Per layer query, key, value, attention output, intermediate, output; the pooler; the logits.
  assert len(products) == 6 * CONFIG.num_hidden_layers + 2
  for name, product in products.items():
    assert product.inputs[1].op.type == "Const", name
  rewritten = {name: product.inputs[1].shape for name, product in products.items()
               if product.inputs[1].op.name.endswith("kernel_transposed")}
  # Stored [out, in] and multiplied with transpose_b: the intermediate products, [H] -> [4H].
  assert len(rewritten) == CONFIG.num_hidden_layers
  for name, shape in rewritten.items():
    assert "intermediate_dense" in name and products[name].get_attr("transpose_b"), name
    assert shape == (CONFIG.intermediate_size, CONFIG.hidden_size), name
  # The others keep the model's layout: [in, out] not expanding, or the classifier's
  # output_weights [num_labels, H] that the original multiplies with transpose_b already.
  for name, product in products.items():
    if name not in rewritten:
      rows, columns = product.inputs[1].shape
      assert columns <= rows if not product.get_attr("transpose_b") else "classifier" in name

def test_a_saved_model_holds_the_frozen_weights_once_and_no_variables(tmp_path):
  model, inputs = classifier_and_inputs()
  module = tf.Module()
  module.frozen = frozen_model.FrozenModel(model, INPUT_SPEC)
  module.logits = tf.function(lambda inputs: module.frozen(inputs), input_signature=[INPUT_SPEC])
  module.probabilities = tf.function(lambda inputs: tf.nn.softmax(module.frozen(inputs)),
                                     input_signature=[INPUT_SPEC])
  tf.saved_model.save(module, str(tmp_path), signatures={
      "logits": module.logits.get_concrete_function(),
      "probabilities": module.probabilities.get_concrete_function()})
  saved_model = saved_model_pb2.SavedModel.FromString((tmp_path / "saved_model.pb").read_bytes())
  kernel_name = model.encoder.transformer_layers[0].output_dense.kernel.path
  copies = [node.name for meta_graph in saved_model.meta_graphs
            for function in meta_graph.graph_def.library.function
            for node in function.node_def if node.op == "Const" and node.name == kernel_name]
  assert len(copies) == 1, copies
  saved_variables = [name for name, _ in tf.train.list_variables(
      str(tmp_path / "variables" / "variables")) if name != "_CHECKPOINTABLE_OBJECT_GRAPH"]
  assert not saved_variables, saved_variables
  loaded = tf.saved_model.load(str(tmp_path))
  np.testing.assert_allclose(loaded.logits(inputs).numpy(),
                             model(inputs, training=False).numpy(), rtol=1e-6, atol=1e-6)
