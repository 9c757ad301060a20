"""A Keras model as one graph function whose weights are constants, for inference exports.

What a served model gains over calling its variables (figures in docs/serving.md): the graph
reads no variable, and every expanding product (`[in, out]` weights with out > in, BERT's
feed-forward `[H, 4H]`) takes its weight stored `[out, in]` with `transpose_b`, the layout of
PyTorch's `Linear`, which TensorFlow's CPU kernels multiply faster on a few hundred rows than the
`[in, out]` layout Keras keeps (and no faster for the other products, which keep it). Outputs
are the model's up to the products' summation order."""

import numpy as np
import tensorflow as tf


class FrozenModel:
  """`model`'s inference call with its weights as constants, callable inside a `tf.function`.

  A SavedModel whose signatures call it stores the weights once, in its graph, and no variables.

  Args:
    model: a built Keras model.
    input_spec: the structure of `tf.TensorSpec`s `model` is called with.

  Attributes:
    config: `model.get_config()`, what the frozen model was built from.

  Example:
    >>> import keras
    >>> import tensorflow as tf
    >>> from serving import frozen_model
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
    >>> frozen = frozen_model.FrozenModel(model, tf.TensorSpec([None, 3], tf.float32))
    >>> frozen(tf.ones([2, 3])).shape
    TensorShape([2, 4])
  """

  def __init__(self, model, input_spec):
    self.config = model.get_config()
    trainable, non_trainable = ([(variable.path, variable.numpy()) for variable in variables]
                                for variables in (model.trainable_variables,
                                                  model.non_trainable_variables))

    def constants(values):
      """The variables' values as graph constants named by the variables' paths."""
      return [tf.constant(value, name=path) for path, value in values]

    @tf.function(input_signature=[input_spec], autograph=False)
    def call(inputs):
      outputs, _ = model.stateless_call(constants(trainable), constants(non_trainable), inputs,
                                        training=False)
      return outputs

    traced = call.get_concrete_function()
    self._output_structure = traced.structured_outputs
    self._function = _with_weights_transposed(traced)

  def __call__(self, inputs):
    """`inputs` of `input_spec`'s structure -> the model's outputs."""
    outputs = self._function(*tf.nest.flatten(inputs))
    return tf.nest.pack_sequence_as(self._output_structure, outputs)


def _with_weights_transposed(function):
  """`function` (a ConcreteFunction of flat tensors) with every `MatMul` by a constant matrix
  `[in, out]` with out > in rewritten as a `MatMul` by its transpose `[out, in]` with
  `transpose_b` -> a ConcreteFunction of the same flat inputs returning the flat list of
  outputs."""
  graph_def = function.graph.as_graph_def()
  constants = {node.name: node for node in graph_def.node if node.op == "Const"}
  for node in graph_def.node:
    right = node.input[1].split(":")[0] if node.op == "MatMul" and len(node.input) > 1 else None
    if right not in constants or node.attr["transpose_b"].b:
      continue
    kernel = tf.make_ndarray(constants[right].attr["value"].tensor)
    if kernel.ndim != 2 or kernel.shape[1] <= kernel.shape[0]:
      continue
    constant = graph_def.node.add()
    constant.CopyFrom(constants[right])
    constant.name = f"{node.name}/kernel_transposed"
    constant.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.ascontiguousarray(kernel.T)))
    node.input[1] = constant.name
    node.attr["transpose_b"].b = True

  def imported():
    tf.graph_util.import_graph_def(graph_def, name="")

  wrapped = tf.compat.v1.wrap_function(imported, [])
  return wrapped.prune([wrapped.graph.get_tensor_by_name(tensor.name)
                        for tensor in function.inputs],
                       [wrapped.graph.get_tensor_by_name(tensor.name)
                        for tensor in tf.nest.flatten(function.outputs)])
