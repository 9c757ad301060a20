"""The fine-tuning task of `run_multiple_choice.py`: a softmax over each example's choices."""

from modeling import multiple_choice_model
from tasks import classifier


class MultipleChoiceTask(classifier.ClassifierTask):
  """Fine-tunes `BertMultipleChoice`: its scores `[batch_size, num_choices]` are the logits of a
  classification whose classes are the choices, so the loss (softmax cross-entropy against
  `label_ids`), the accuracy and the weighting of padding rows are `ClassifierTask`'s.

  Args:
    bert_config: a `BertConfig`.

  Example:
    >>> from training import engine
    >>> trainer = engine.Trainer(strategy, MultipleChoiceTask(bert_config), run_config,
    ...                          optimizer_fn)
  """

  def __init__(self, bert_config):
    # The number of choices comes from the inputs; the model has no per-class weights.
    super().__init__(bert_config, classifier.CLASSIFICATION, num_labels=None)

  def build_model(self):
    return multiple_choice_model.BertMultipleChoice(self.bert_config)
