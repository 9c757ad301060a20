"""What a HuggingFace BERT directory says beyond its weights, and where the original layout keeps it.

  HuggingFace                                 original layout (a converted directory, a run's
                                              --output_dir)
  config.json `architectures`                 the heads of the checkpoint: `cls/predictions`
                                              (BertForPreTraining), `cls/squad`
                                              (BertForQuestionAnswering), root-scope
                                              `output_weights` (BertForSequenceClassification
                                              or BertForTokenClassification), none (BertModel)
  config.json `id2label` (classifier heads)   `label_list.txt`, one label per line in id order,
                                              the file the fine-tuning runners write
  tokenizer_config.json `do_lower_case`       `tokenizer_config.json` with that key alone (the
                                              runners take it as --do_lower_case)

The sequence and the token classifier have the same weights (`output_weights [labels, H]`), so
the checkpoint alone cannot tell them apart: the caller names the architecture then. The token
classifier and the question-answering model of HuggingFace have no pooler, which the original's
encoder always has (`WITHOUT_POOLER`).
"""

import json
import os

from absl import logging
import tensorflow as tf

from modeling.conversion import original_files
from modeling.conversion.original_files import ConversionError

# The name tasks/runner.py (LABEL_LIST_FILENAME) writes a run's labels under.
LABEL_LIST = "label_list.txt"
TOKENIZER_CONFIG = "tokenizer_config.json"

PRETRAINING = "BertForPreTraining"
QUESTION_ANSWERING = "BertForQuestionAnswering"
SEQUENCE_CLASSIFICATION = "BertForSequenceClassification"
TOKEN_CLASSIFICATION = "BertForTokenClassification"
ENCODER_ONLY = "BertModel"
ARCHITECTURES = (ENCODER_ONLY, PRETRAINING, SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION,
                 QUESTION_ANSWERING)
CLASSIFIERS = (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION)
# The classes whose encoder has no pooler (`BertModel(add_pooling_layer=False)`): their heads read
# every position, not the pooled `[CLS]`.
WITHOUT_POOLER = (TOKEN_CLASSIFICATION, QUESTION_ANSWERING)


def _heads(original_names):
  """[(description, architectures it fits)] of the heads among `original_names`."""
  names = set(original_names)
  heads = []
  if any(name.startswith(("cls/predictions/", "cls/seq_relationship/")) for name in names):
    heads.append(("the pre-training heads (cls/predictions, cls/seq_relationship)",
                  (PRETRAINING,)))
  if "cls/squad/output_weights" in names:
    heads.append(("the SQuAD head (cls/squad)", (QUESTION_ANSWERING,)))
  if "output_weights" in names:
    heads.append(("a classifier head (root-scope output_weights)", CLASSIFIERS))
  return heads or [("no head", (ENCODER_ONLY,))]


def architecture_of(original_names, requested, source):
  """The HuggingFace architecture of a checkpoint's heads.

  Args:
    original_names: the checkpoint's variable names.
    requested: the architecture asked for (--hf_architecture), or None to infer it.
    source: the checkpoint, named in errors.

  Raises:
    ConversionError: heads of two architectures, an architecture the heads do not fit, or a
      classifier head without `requested`.
  """
  heads = _heads(original_names)
  if len(heads) > 1:
    raise ConversionError(f"{source}: holds {heads[0][0]} and {heads[1][0]}; no HuggingFace "
                          "architecture has both")
  described, fits = heads[0]
  if requested is not None and requested not in fits:
    raise ConversionError(f"--hf_architecture={requested}: {source} holds {described}, the "
                          f"weights of {' or '.join(fits)}")
  if requested is None and len(fits) > 1:
    raise ConversionError(f"{source}: {described} is the head of both {' and '.join(fits)}; "
                          f"say which: --hf_architecture={fits[0]} or "
                          f"--hf_architecture={fits[1]}")
  return requested or fits[0]


def labels_from_hf_config(hf_config, num_outputs, source):
  """The labels of a classifier head, in id order, from `config.json`'s `id2label`.

  Args:
    hf_config: the `config.json` dict.
    num_outputs: the classifier's outputs, or None without a classifier head.
    source: `config.json`'s path, named in errors.

  Returns:
    a list of `num_outputs` strings, or None: no classifier, a regression (`problem_type`, or a
    single output) or no `id2label`.

  Raises:
    ConversionError: `id2label` keys that are not the ids 0..num_outputs-1, or a label with a
      line break (`label_list.txt` has one label per line).
  """
  id2label = hf_config.get("id2label")
  if (num_outputs is None or num_outputs == 1 or not id2label
      or hf_config.get("problem_type") == "regression"):
    return None
  if not isinstance(id2label, dict) or sorted(map(str, id2label)) != sorted(
      map(str, range(num_outputs))):
    raise ConversionError(f"{source}: id2label does not name ids 0 to {num_outputs - 1}, the "
                          f"{num_outputs} outputs of the classifier")
  labels = [str(id2label[str(index)]) for index in range(num_outputs)]
  for label in labels:
    if "\n" in label or "\r" in label:
      raise ConversionError(f"{source}: label {label!r} holds a line break; {LABEL_LIST} has "
                            "one label per line")
  return labels


def label_list_bytes(labels):
  """`label_list.txt`'s contents: one label per line, in id order."""
  return "".join(f"{label}\n" for label in labels).encode("utf-8")


def read_label_list(input_dir, num_outputs):
  """The labels of `input_dir/label_list.txt`, or None if there is no such file.

  Args:
    input_dir: a directory in the original layout or a run's --output_dir.
    num_outputs: the outputs of the classifier head the labels name.

  Raises:
    ConversionError: not UTF-8, or another number of labels than `num_outputs`.
  """
  path = os.path.join(input_dir, LABEL_LIST)
  if not tf.io.gfile.exists(path):
    return None
  try:
    text = original_files.read_bytes(path).decode("utf-8")
  except UnicodeDecodeError as error:
    raise ConversionError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") \
        from None
  labels = text.split("\n")
  if labels[-1] == "":
    labels.pop()
  if len(labels) != num_outputs:
    raise ConversionError(f"{path}: {len(labels)} labels, but the classifier head has "
                          f"{num_outputs} outputs")
  return labels


def hf_label_fields(labels, num_outputs):
  """The `config.json` fields of a classifier's labels: `id2label` and `label2id` of `labels`,
  or of HuggingFace's default names (`LABEL_<id>`) when there are none."""
  labels = labels or [f"LABEL_{index}" for index in range(num_outputs)]
  return {"id2label": {str(index): label for index, label in enumerate(labels)},
          "label2id": {label: index for index, label in enumerate(labels)}}


def read_do_lower_case(input_dir):
  """`do_lower_case` of `input_dir/tokenizer_config.json`, or None without the file or key.

  HuggingFace's `strip_accents` is the other half of the original's flag; a value that
  contradicts `do_lower_case` cannot be expressed, and is logged.

  Raises:
    ConversionError: unreadable JSON, or a `do_lower_case` that is not a boolean.
  """
  path = os.path.join(input_dir, TOKENIZER_CONFIG)
  if not tf.io.gfile.exists(path):
    return None
  tokenizer_config = original_files.read_json(path)
  do_lower_case = tokenizer_config.get("do_lower_case")
  if do_lower_case is not None and not isinstance(do_lower_case, bool):
    raise ConversionError(f"{path}: do_lower_case must be true or false, got "
                          f"{json.dumps(do_lower_case)}")
  strip_accents = tokenizer_config.get("strip_accents")
  if do_lower_case is not None and strip_accents not in (None, do_lower_case):
    logging.warning("%s: strip_accents=%s with do_lower_case=%s: the original's tokenizer strips "
                    "accents exactly when it lower-cases", path, strip_accents, do_lower_case)
  return do_lower_case


def lower_case_config_bytes(do_lower_case):
  """The `tokenizer_config.json` of a directory in the original layout: `do_lower_case` alone."""
  return (json.dumps({"do_lower_case": do_lower_case}) + "\n").encode("utf-8")


def hf_tokenizer_config_bytes(do_lower_case, max_length):
  """A HuggingFace `tokenizer_config.json` of the original's WordPiece tokenizer, with the keys
  `BertTokenizer.save_pretrained` writes: `AutoTokenizer.from_pretrained` reads it with
  `vocab.txt` and lower-cases (and strips accents) exactly when `do_lower_case`."""
  tokenizer_config = {
      "cls_token": "[CLS]", "do_lower_case": do_lower_case, "mask_token": "[MASK]",
      "model_max_length": max_length, "pad_token": "[PAD]", "sep_token": "[SEP]",
      "strip_accents": None, "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer",
      "unk_token": "[UNK]"}
  return (json.dumps(tokenizer_config, indent=2, sort_keys=True) + "\n").encode("utf-8")
