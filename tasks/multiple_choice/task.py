"""The fine-tuning task of `run_multiple_choice.py`: a softmax over each example's choices."""

from modeling import multiple_choice_model
from tasks import classifier


class MultipleChoiceTask(classifier.ClassifierTask):
  """Fine-tunes `BertMultipleChoice`: its scores `[batch_size, num_choices]` are the logits of a
  classification whose classes are the choices, so the loss (softmax cross-entropy against
  `label_ids`), the accuracy and the weighting of padding rows are `ClassifierTask`'s.

  Args:
    bert_config: a `BertConfig`.
    drop_padding: the model computes the real tokens alone (`BertEncoder`); not under XLA.

  Example:
    >>> import tensorflow as tf
    >>> from modeling import bert_config as bert_config_lib
    >>> from modeling import optimization
    >>> from tasks.multiple_choice import task as multiple_choice_task
    >>> from training import engine
    >>> config = bert_config_lib.BertConfig(vocab_size=9, hidden_size=16, num_hidden_layers=2,
    ...                                     num_attention_heads=2, intermediate_size=32)
    >>> task = multiple_choice_task.MultipleChoiceTask(config)
    >>> run_config = engine.RunConfig(output_dir="output", num_train_steps=10)
    >>> trainer = engine.Trainer(tf.distribute.get_strategy(), task, run_config,
    ...                          lambda: optimization.create_optimizer(1e-4, 10, 1))
  """

  def __init__(self, bert_config, drop_padding=False):
    # The number of choices comes from the inputs; the model has no per-class weights.
    super().__init__(bert_config, classifier.CLASSIFICATION, num_labels=None,
                     drop_padding=drop_padding)

  def build_model(self):
    return multiple_choice_model.BertMultipleChoice(self.bert_config,
                                                    drop_padding=self.drop_padding)
