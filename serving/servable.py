"""What every exported task module holds, whatever its signatures."""

import tensorflow as tf

from base import cpu_features
from data import graph_tokenization
from data import tokenization
from modeling import keras_variables
from modeling import tracking

# Signature inputs: texts `[batch_size]`, token ids `[batch_size, seq_length]`.
TEXT_SPEC = tf.TensorSpec([None], tf.string)
IDS_SPEC = tf.TensorSpec([None, None], tf.int32)


def model_variables(*models):
  """{Keras variable path: the tf.Variable behind it} of the models' weights, each once (a table
  two models share is listed once).

  Raises:
    ValueError: two different variables have one path.
  """
  variables = {}
  for variable in (v for model in models for v in model.weights):
    tf_variable = keras_variables.as_tf_variable(variable)
    if variables.setdefault(variable.path, tf_variable) is not tf_variable:
      raise ValueError(f"two variables named {variable.path}")
  return variables


def served_copy(model, drop_padding=False):
  """The copy of `model` (a `BertConfigModel`) that exports compute with: on an AVX2 processor
  without AVX-512 (`cpu_features.is_avx2_without_avx512`, this machine's), each layer's first
  feed-forward kernel stored transposed (`intermediate_kernel_transposed`: faster there, slower
  with AVX-512, docs/serving.md) and, with `drop_padding`, the real tokens computed alone
  (`drop_padding=True`, for a model whose outputs read no padding position); the outputs are
  the same."""
  layout = {}
  if cpu_features.is_avx2_without_avx512():
    layout["intermediate_kernel_transposed"] = True
  # An option of the families that use it only (the span model has none); a model trained with
  # it is served without it unless asked.
  if drop_padding or getattr(model, "drop_padding", False):
    layout["drop_padding"] = drop_padding
  return model.rebuilt(**layout)


class Servable(tf.Module):
  """Base of the task servers: a fine-tuned model, its vocab and casing, and its tokenizer.

  Attributes:
    model: what is served: `served_copy` of the model given; not tracked
      (`tracking.set_untracked`).
    model_variables: its underlying tf.Variables by Keras path (`model_variables`), listed so
      that the TF1-style loader of TensorFlow Serving and saved_model_cli restores them (a Keras 3
      model alone is restored only by tf.saved_model.load; keras-team/keras#20095).
    tokenizer: a `GraphTokenizer` (only `with_text`).
    vocab_file: the vocab, copied into the SavedModel's assets.
    do_lower_case: its casing, a bool variable in the SavedModel.
    cls_id, sep_id, unk_id: ids of `[CLS]`, `[SEP]`, `[UNK]`.

  Args:
    name: the module's name.
    model: the Keras model holding the weights to export (a `BertTaskModel`).
    vocab_file, do_lower_case: see Attributes.
    with_text: include the tokenizer; False serves token ids alone, a SavedModel without
      tensorflow-text ops (loadable by a stock TensorFlow Serving binary).
    drop_padding: serve a copy that computes the real tokens alone (`drop_padding=True`), for
      a family whose outputs read no padding position; the outputs are the same.
  """

  def __init__(self, name, model, vocab_file, do_lower_case, with_text, drop_padding=False):
    super().__init__(name=name)
    model = served_copy(model, drop_padding)
    tracking.set_untracked(self, "model", model)
    self.model_variables = model_variables(model)
    self.with_text = with_text
    if with_text:
      self.tokenizer = graph_tokenization.GraphTokenizer(vocab_file, do_lower_case)
    self.vocab_file = tf.saved_model.Asset(vocab_file)
    self.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
    vocab = tokenization.load_vocab(vocab_file)
    self.cls_id, self.sep_id, self.unk_id = vocab["[CLS]"], vocab["[SEP]"], vocab["[UNK]"]
