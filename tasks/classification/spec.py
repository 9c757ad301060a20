"""`run_classifier.py`'s part of a fine-tuning run: GLUE / XNLI / TSV / CSV examples, the original's
record files, accuracy and the task's metrics, `test_results.tsv`, the classifier export."""

import dataclasses
import os

from absl import logging
import tensorflow as tf

from base import atomic_files
from base import errors
from data import file_patterns
from tasks import classifier
from tasks import runner
from tasks.classification import features as classifier_features
from tasks.classification import reader as classification_reader
from tasks.classification import server as classifier_server
from training import model_inputs

TEST_RESULTS_FILENAME = "test_results.tsv"
# Split -> the processor's name for its file.
PROCESSOR_SPLITS = {"train": "train", "eval": "dev", "predict": "test"}


@dataclasses.dataclass
class ClassificationInputs:
  """The examples of a run: `{split: [InputExample]}`, with the processor that read them."""
  processor: object
  label_list: list
  examples: dict


def make_processor(config, labels):
  """The processor of --task_name; a UsageError listing the known tasks otherwise. `labels`: a
  tsv/csv task's, or None to infer them from the training file."""
  name = config.task_name.lower()
  if name in classification_reader.GENERIC_TASKS:
    if config.multi_label and config.regression:
      raise errors.UsageError("--multi_label and --regression exclude each other")
    return classification_reader.GenericProcessor(
        name, text_a_column=config.text_a_column, text_b_column=config.text_b_column,
        label_column=config.label_column, has_header=config.has_header,
        labels=labels, multi_label=config.multi_label,
        label_separator=config.label_separator, regression=config.regression)
  processors = classification_reader.glue_processors(config.xnli_language)
  if name not in processors:
    raise errors.UsageError(f"--task_name={config.task_name}: unknown task; known tasks: "
                            f"{', '.join(classification_reader.task_names())}")
  return processors[name]


def write_test_results(path, values):
  """One tab-separated line of floats per example (the original's `test_results.tsv`)."""
  with atomic_files.open_for_writing(path) as f:
    for row in values:
      f.write("\t".join(str(float(value)) for value in row) + "\n")


class ClassificationSpec(runner.FineTuningSpec):
  """Classification, regression and multi-label classification of texts and text pairs."""

  def read_inputs(self, config, bert_config):
    # A tsv/csv task's labels: --label_list, else the model's when the run does not train,
    # else the training file's.
    given_labels = config.label_list or runner.saved_label_list(config)
    processor = make_processor(config, given_labels)

    def read(split):
      """The examples of a split; an error naming the file when it holds none, or sentence
      pairs that the config's segment table cannot take."""
      processor_split = PROCESSOR_SPLITS[split]
      examples = getattr(processor, f"get_{processor_split}_examples")(config.data_dir)
      if not examples:
        raise file_patterns.InputError(f"{config.data_dir}: the {processor_split} file of "
                                       f"task {processor.name!r} holds no example")
      if any(example.text_b is not None for example in examples):
        model_inputs.check_segments(2, bert_config, config.bert_config_file,
                                    f"the {processor_split} examples of task {processor.name!r} "
                                    "are sentence pairs")
      return examples

    infers_labels = (isinstance(processor, classification_reader.GenericProcessor)
                     and not given_labels)
    examples = {}
    if config.do_train or infers_labels:
      train_examples = read("train")
      if infers_labels:
        processor.infer_labels(train_examples)
      if config.do_train:
        examples["train"] = train_examples
    label_list = processor.get_labels()
    if processor.kind != classifier.REGRESSION and len(label_list) < 2:
      raise file_patterns.InputError(f"task {processor.name!r}: needs at least 2 labels, found "
                                     f"{label_list}")
    for split, action in (("eval", "do_eval"), ("predict", "do_predict")):
      if getattr(config, action):
        examples[split] = read(split)
    return ClassificationInputs(processor, label_list, examples)

  def label_list(self, config, inputs):
    return inputs.label_list

  def write_records(self, config, inputs, tokenizer):
    batch_sizes = {"train": 1, "eval": config.eval_batch_size,
                   "predict": config.predict_batch_size}
    records = {}
    for split, examples in inputs.examples.items():
      path = os.path.join(config.output_dir, f"{split}.tf_record")
      num_real, num_padding = classifier_features.write_records(
          path, examples, tokenizer, config.max_seq_length, inputs.processor.kind,
          inputs.label_list, batch_sizes[split])
      logging.info("%s: %d examples + %d padding rows", path, num_real, num_padding)
      records[split] = runner.RecordFile(path, num_real + num_padding)
    return records

  def feature_spec(self, config, inputs, split):
    return classifier_features.feature_spec(config.max_seq_length, inputs.processor.kind,
                                            len(inputs.label_list))

  def make_task(self, config, bert_config, inputs, drop_padding):
    return classifier.ClassifierTask(bert_config, inputs.processor.kind, len(inputs.label_list),
                                     drop_padding=drop_padding)

  def evaluate(self, config, inputs, run):
    kind = inputs.processor.kind
    logits, features = run.predict("eval", config.eval_batch_size,
                                   keep_features=("label_ids", "is_real_example"))
    losses = classifier.per_example_loss(kind, logits, features["label_ids"]).numpy()
    return classifier.compute(
        kind, logits, features["label_ids"], features["is_real_example"], losses,
        inputs.label_list, inputs.processor.metrics)

  def metric_names(self, config, inputs):
    return classifier.reported_names(inputs.processor.kind, inputs.processor.metrics)

  def default_metric(self, config, inputs):
    if inputs.processor.metrics:
      return inputs.processor.metrics[0]
    return "eval_loss" if inputs.processor.kind == classifier.REGRESSION else "eval_accuracy"

  def predict(self, config, inputs, run):
    logits, features = run.predict("predict", config.predict_batch_size,
                                   keep_features=("label_ids", "is_real_example"))
    # Padding rows are the last rows of the file, so the real ones keep the input order.
    values = classifier.output_values(inputs.processor.kind, logits)[
        features["is_real_example"] > 0]
    path = os.path.join(config.output_dir, TEST_RESULTS_FILENAME)
    if run.trainer.is_chief:
      write_test_results(path, values)
      logging.info("wrote %d predictions to %s", len(values), path)

  def make_server(self, config, inputs, model, with_text):
    return classifier_server.ClassifierServer(
        model, config.vocab_file, config.do_lower_case, inputs.label_list,
        inputs.processor.kind, config.max_seq_length, has_pairs=inputs.processor.has_pairs,
        with_text=with_text)
