"""`BertTaskModel`: what every model built on `BertEncoder` shares, whatever its heads."""

from modeling import config_model


class BertTaskModel(config_model.BertConfigModel):
  """Base of the functional models made of a `BertEncoder` (named `bert`) and output heads.

  It takes a whole features dict (the keys that are not model inputs, such as labels and
  `is_real_example`, are dropped), names its variables as the original's checkpoints (the
  encoder's `bert/...`, then each head under its scope), and serialises as its `BertConfig`
  (`config_model.BertConfigModel`). A subclass builds its layers and graph, then calls this
  `__init__` with them.

  Args:
    config: the `BertConfig`.
    encoder: the `BertEncoder` of the graph.
    heads: dict checkpoint scope -> head layer of the graph with `name_to_variable(scope)`,
      e.g. `{"cls/squad": span_layer}`; the scope "" names variables at the root.
    inputs: dict input name -> `keras.Input`.
    outputs: the graph's outputs.
    **kwargs: passed to `keras.Model` (`name`).

  Example:
    >>> import keras
    >>> from modeling import encoder as encoder_lib
    >>> from modeling import heads
    >>> from modeling import task_model
    >>> class BertSpanModel(task_model.BertTaskModel):
    ...   def __init__(self, config, **kwargs):
    ...     encoder = encoder_lib.BertEncoder(config, name="bert")
    ...     span_layer = heads.OutputProjection(2, config.hidden_size, 0.02, name="span")
    ...     inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
    ...               for name in encoder_lib.ENCODER_INPUTS}
    ...     logits = span_layer(encoder(inputs)["sequence_output"])
    ...     super().__init__(config, encoder, {"cls/squad": span_layer}, inputs, logits, **kwargs)
  """

  def __init__(self, config, encoder, heads, inputs, outputs, **kwargs):
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.config = config
    self.encoder = encoder
    self.head_scopes = dict(heads)
    self.feature_names = tuple(inputs)

  def call(self, inputs, training=False):
    """Runs the model on `inputs`, dropping keys that are not model inputs."""
    return super().call({name: inputs[name] for name in self.feature_names}, training=training)

  def name_to_variable(self):
    """Returns {original checkpoint name: variable} of the encoder and every head."""
    names = self.encoder.name_to_variable()
    for scope, head in self.head_scopes.items():
      names.update(head.name_to_variable(scope))
    return names
