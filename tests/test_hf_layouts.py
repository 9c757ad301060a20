"""hf_to_bert reads every layout HuggingFace BERTs ship, with their heads, labels and casing; bert_to_hf
gives transformers the same model back.

The inputs are made by the tools that make them: transformers' `save_pretrained` (tiny random
models of each head, every weight perturbed so that a weight in the wrong place changes the
outputs) and `BertTokenizer.save_pretrained`; the hub's legacy LayerNorm names
(`LayerNorm.gamma` / `LayerNorm.beta`) in `model.safetensors` and in a `torch.save`d
`pytorch_model.bin`; and, as transformers 5 no longer writes TensorFlow weights, a `tf_model.h5`
written with h5py in the Keras-2 `save_weights` layout of transformers' TF classes (weight names
as `modeling_tf_bert.py` makes them). Reference: transformers' PyTorch model that was saved.
Tolerance: max absolute difference <= 1e-5 in float32.
"""

import json
import os
import shutil
import sys

import h5py
import numpy as np
import pytest

from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import classifier_model
from modeling import encoder as encoder_lib
from modeling import pretraining_model
from modeling import span_model
from modeling.conversion import hf_files
from modeling.conversion import hf_metadata
from modeling.conversion.original_files import ConversionError
from tasks import runner as fine_tuning_runner
from tests import original_dirs
from tests import scripts

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-5
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "paris",
         "Paris", "berlin", "Berlin", "is", "a", "city", "##s", "##ed", "dog", "ran", "to", "in",
         "big", "small", "red", "blue", ".", ",", "and"]
LABELS = {"BertForSequenceClassification": ["entailment", "neutral", "contradiction"],
          "BertForTokenClassification": ["O", "B-LOC", "I-LOC", "B-PER"]}
# The casing each model's tokenizer is saved with.
LOWER_CASE = {"BertModel": True, "BertForPreTraining": True,
              "BertForSequenceClassification": True, "BertForTokenClassification": False,
              "BertForQuestionAnswering": False}
HEADS = sorted(LOWER_CASE)
LAYOUTS = ["safetensors", "safetensors_sharded", "safetensors_legacy_names", "bin_legacy_names",
           "tf_h5"]
MASKED_POSITIONS = np.array([[1, 3], [2, 5], [4, 1]], np.int32)


def _legacy(name):
  return name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                       "LayerNorm.beta")


def _tf_name(pt_name):
  """`(top-level layer, TF weight name below the model's name, transpose)` of a PyTorch name of
  transformers' BERT, as `modeling_tf_bert.py` names the weight, or None for what the TF classes
  do not hold (the tied decoder)."""
  if pt_name.startswith("cls.predictions.decoder."):
    return None
  name = pt_name[len("bert."):] if pt_name.startswith("bert.") else pt_name
  scope, _, leaf = name.rpartition(".")
  if scope.startswith("cls.predictions"):
    layer, path = "mlm___cls", "mlm___cls/" + scope[len("cls."):].replace(".", "/")
  elif scope == "cls.seq_relationship":
    layer, path = "nsp___cls", "nsp___cls/seq_relationship"
  elif scope in ("classifier", "qa_outputs"):
    layer, path = scope, scope
  else:
    layer = "bert"
    parts = scope.split(".")
    if parts[:2] == ["encoder", "layer"]:  # the TF encoder's list of layers: `layer_._<i>`
      parts[1:3] = [f"layer_._{parts[2]}"]
    path = "/".join(["bert"] + parts)
  if path.endswith("word_embeddings"):
    return layer, f"{path}/weight", False
  if path.endswith(("position_embeddings", "token_type_embeddings")):
    return layer, f"{path}/embeddings", False
  if path.endswith("LayerNorm"):
    return layer, f"{path}/{'gamma' if leaf == 'weight' else 'beta'}", False
  if path == "mlm___cls/predictions":
    return layer, f"{path}/bias", False
  return layer, f"{path}/{'kernel' if leaf == 'weight' else 'bias'}", leaf == "weight"


def write_tf_h5(path, model_name, state_dict):
  """Writes `state_dict` as Keras 2's `save_weights` writes a transformers TF model: the root's
  `layer_names`, a group per top-level layer whose `weight_names` lists full weight names, each
  stored at that path in the group; the masked LM lists the embeddings it ties to as well."""
  layers = {}
  for pt_name, value in state_dict.items():
    mapped = _tf_name(pt_name)
    if mapped is not None:
      layer, tf_name, transpose = mapped
      array = value.numpy()
      layers.setdefault(layer, {})[f"{model_name}/{tf_name}:0"] = array.T if transpose else array
  if "mlm___cls" in layers:
    layers["mlm___cls"].update({name: value for name, value in layers["bert"].items()
                                if "/embeddings/" in name})
  with h5py.File(path, "w") as h5_file:
    h5_file.attrs["layer_names"] = [name.encode() for name in layers]
    h5_file.attrs["backend"] = b"tensorflow"
    h5_file.attrs["keras_version"] = b"2.15.0"
    for layer, weights in layers.items():
      group = h5_file.create_group(layer)
      group.attrs["weight_names"] = [name.encode() for name in weights]
      for name, value in weights.items():
        group.create_dataset(name, data=value)


# transformers' TF class of each architecture, by the name Keras gives the model.
TF_MODEL_NAMES = {"BertModel": "tf_bert_model", "BertForPreTraining": "tf_bert_for_pre_training",
                  "BertForSequenceClassification": "tf_bert_for_sequence_classification",
                  "BertForTokenClassification": "tf_bert_for_token_classification",
                  "BertForQuestionAnswering": "tf_bert_for_question_answering"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """{head: (transformers model, directory it was saved to)}."""
  # torch's default of a thread per core only contends with TensorFlow's on tiny models.
  torch.set_num_threads(1)
  torch.manual_seed(0)
  models = {}
  for head in HEADS:
    labels = LABELS.get(head)
    config = transformers.BertConfig(
        vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=37, max_position_embeddings=24,
        **({"id2label": dict(enumerate(labels))} if labels else {}))
    model = getattr(transformers, head)(config)
    with torch.no_grad():
      for parameter in model.parameters():
        parameter.add_(torch.randn_like(parameter) * 0.2)
    model.eval()
    directory = tmp_path_factory.mktemp(head)
    model.save_pretrained(str(directory))
    (directory / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCAB))
    transformers.BertTokenizer(str(directory / "vocab.txt"),
                               do_lower_case=LOWER_CASE[head]).save_pretrained(str(directory))
    models[head] = model, directory
  return models


def _layout_dir(saved, head, layout, directory):
  """`directory`, a HuggingFace directory of `saved[head]` with its weights in `layout`."""
  model, source = saved[head]
  directory.mkdir()
  for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
    shutil.copy(source / name, directory / name)
  state_dict = model.state_dict()
  if layout == "safetensors":
    shutil.copy(source / "model.safetensors", directory / "model.safetensors")
  elif layout == "safetensors_sharded":
    model.save_pretrained(str(directory), max_shard_size="20KB")
    assert (directory / "model.safetensors.index.json").exists()
  elif layout == "safetensors_legacy_names":
    from safetensors import numpy as safetensors_numpy  # pylint: disable=g-import-not-at-top
    tensors = safetensors_numpy.load_file(str(source / "model.safetensors"))
    assert any("LayerNorm.weight" in name for name in tensors)
    safetensors_numpy.save_file({_legacy(name): value for name, value in tensors.items()},
                                str(directory / "model.safetensors"), metadata={"format": "pt"})
  elif layout == "bin_legacy_names":
    torch.save({_legacy(name): value for name, value in state_dict.items()},
               str(directory / "pytorch_model.bin"))
  else:
    write_tf_h5(str(directory / "tf_model.h5"), TF_MODEL_NAMES[head], state_dict)
  return directory


def _convert(*flags):
  result = scripts.run_in_process("convert_checkpoint.py", *flags)
  assert result.returncode == 0, result.stderr
  return result.result


def _inputs():
  input_ids, input_mask, segment_ids = original_dirs.sample_inputs(len(VOCAB))
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
          "masked_lm_positions": MASKED_POSITIONS}


def _hf_outputs(model, head, inputs):
  """{output name: numpy} of a transformers model, named as ours are."""
  arguments = {"input_ids": torch.tensor(inputs["input_ids"], dtype=torch.long),
               "attention_mask": torch.tensor(inputs["input_mask"], dtype=torch.long),
               "token_type_ids": torch.tensor(inputs["segment_ids"], dtype=torch.long)}
  with torch.no_grad():
    encoder = model if head == "BertModel" else model.bert
    encoded = encoder(**arguments)
    outputs = model(**arguments)
  found = {"sequence_output": encoded.last_hidden_state.numpy()}
  if head not in hf_metadata.WITHOUT_POOLER:
    found["pooled_output"] = encoded.pooler_output.numpy()
  if head == "BertForPreTraining":
    logits = outputs.prediction_logits.numpy()
    found["masked_lm_logits"] = np.take_along_axis(logits, MASKED_POSITIONS[..., None], axis=1)
    found["next_sentence_logits"] = outputs.seq_relationship_logits.numpy()
  elif head == "BertForQuestionAnswering":
    found["start_logits"] = outputs.start_logits.numpy()
    found["end_logits"] = outputs.end_logits.numpy()
  elif head in hf_metadata.CLASSIFIERS:
    found["logits"] = outputs.logits.numpy()
  return found


def _our_model(config, head):
  """This project's model of `head`'s weights."""
  if head == "BertModel":
    return encoder_lib.BertEncoder(config)
  if head == "BertForPreTraining":
    return pretraining_model.BertPretrainingModel(config)
  if head == "BertForQuestionAnswering":
    return span_model.BertSpanModel(config)
  return classifier_model.BertClassifier(config, len(LABELS[head]),
                                         per_token=head == "BertForTokenClassification")


@pytest.fixture(scope="module")
def reference_outputs(saved):
  """{head: transformers' outputs on `_inputs()`}."""
  return {head: _hf_outputs(model, head, _inputs()) for head, (model, _) in saved.items()}


@pytest.fixture(scope="module")
def our_models():
  """{head: our model}, built once per head and loaded again for each layout."""
  return {}


def _our_outputs(our_models, model_dir, head, inputs):
  config = bert_config_lib.BertConfig.from_json_file(str(model_dir / "bert_config.json"))
  if head not in our_models:
    our_models[head] = _our_model(config, head)
  model = our_models[head]
  report = checkpoint_io.assign_from_checkpoint(model.name_to_variable(),
                                                str(model_dir / "bert_model.ckpt"))
  assert report["missing"] == [] and report["unexpected"] == [], report
  encoder = model if head == "BertModel" else model.encoder
  encoded = encoder({name: inputs[name] for name in encoder_lib.ENCODER_INPUTS}, training=False)
  outputs = {"sequence_output": encoded["sequence_output"], "pooled_output":
             encoded["pooled_output"]}
  if head != "BertModel":
    logits = model(inputs, training=False)
    outputs.update(logits if isinstance(logits, dict) else {"logits": logits})
  return {name: np.asarray(value) for name, value in outputs.items()}


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_and_head_converts_to_transformers_outputs(saved, reference_outputs,
                                                                our_models, tmp_path, layout,
                                                                head):
  input_dir = _layout_dir(saved, head, layout, tmp_path / "hf")
  result = _convert("--direction=hf_to_bert", f"--input_dir={input_dir}",
                    f"--output_dir={tmp_path / 'bert'}")
  assert result.hf_architecture == head
  assert result.do_lower_case is LOWER_CASE[head]
  assert json.loads((tmp_path / "bert" / "tokenizer_config.json").read_text()) == {
      "do_lower_case": LOWER_CASE[head]}
  label_list = tmp_path / "bert" / hf_metadata.LABEL_LIST
  if head in LABELS:
    assert label_list.read_text().splitlines() == LABELS[head] == list(result.labels)
  else:
    assert not label_list.exists() and result.labels == ()
  config = bert_config_lib.BertConfig.from_json_file(str(tmp_path / "bert" / "bert_config.json"))
  assert config.hidden_act == "gelu_exact"

  theirs = reference_outputs[head]
  ours = _our_outputs(our_models, tmp_path / "bert", head, _inputs())
  assert set(theirs) <= set(ours)
  if head == "BertForSequenceClassification":
    # A sequence classifier's encoder computes its last layer at [CLS] alone.
    theirs = {**theirs, "sequence_output": theirs["sequence_output"][:, :1]}
  for name, value in theirs.items():
    assert ours[name].shape == value.shape, name
    difference = float(np.abs(ours[name] - value).max())
    assert difference <= TOLERANCE, (name, difference)


# head -> the transformers class that loads what bert_to_hf writes.
AUTO_CLASSES = {"BertModel": "AutoModel", "BertForPreTraining": "BertForPreTraining",
                "BertForSequenceClassification": "AutoModelForSequenceClassification",
                "BertForTokenClassification": "AutoModelForTokenClassification",
                "BertForQuestionAnswering": "AutoModelForQuestionAnswering"}


@pytest.mark.parametrize("head", HEADS)
def test_bert_to_hf_gives_transformers_the_model_its_labels_and_casing(saved, reference_outputs,
                                                                       tmp_path, head):
  _, source = saved[head]
  _convert("--direction=hf_to_bert", f"--input_dir={source}", f"--output_dir={tmp_path / 'bert'}")
  # Only a classifier head needs the architecture named; the others are inferred.
  flags = [f"--hf_architecture={head}"] if head in hf_metadata.CLASSIFIERS else []
  # The converted directory's tokenizer_config.json says the casing, whatever the flag.
  result = _convert("--direction=bert_to_hf", f"--input_dir={tmp_path / 'bert'}",
                    f"--output_dir={tmp_path / 'hf'}", f"--do_lower_case={not LOWER_CASE[head]}",
                    *flags)
  assert result.hf_architecture == head and result.do_lower_case is LOWER_CASE[head]
  assert json.loads((tmp_path / "hf" / "config.json").read_text())["architectures"] == [head]

  model, info = getattr(transformers, AUTO_CLASSES[head]).from_pretrained(
      str(tmp_path / "hf"), output_loading_info=True)
  assert type(model).__name__ == head
  assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
  if head in LABELS:
    assert model.config.id2label == dict(enumerate(LABELS[head]))
    assert list(result.labels) == LABELS[head]
  model.eval()
  back = _hf_outputs(model, head, _inputs())
  for name, value in reference_outputs[head].items():
    assert float(np.abs(back[name] - value).max()) <= TOLERANCE, name

  tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
  original_tokenizer = transformers.AutoTokenizer.from_pretrained(str(source))
  text = "Paris is a big city"
  assert tokenizer.tokenize(text) == original_tokenizer.tokenize(text)
  assert ("paris" in tokenizer.tokenize(text)) is LOWER_CASE[head]


def test_the_label_list_is_the_file_the_runners_write():
  assert hf_metadata.LABEL_LIST == fine_tuning_runner.LABEL_LIST_FILENAME


@pytest.mark.parametrize("flag, message", [
    ("", "{dir}: a classifier head (root-scope output_weights) is the head of both "
         "BertForSequenceClassification and BertForTokenClassification; say which: "
         "--hf_architecture=BertForSequenceClassification or "
         "--hf_architecture=BertForTokenClassification"),
    ("--hf_architecture=BertForQuestionAnswering",
     "--hf_architecture=BertForQuestionAnswering: {dir} holds a classifier head (root-scope "
     "output_weights), the weights of BertForSequenceClassification or "
     "BertForTokenClassification"),
])
def test_a_classifier_head_needs_its_architecture_named(saved, tmp_path, flag, message):
  _, source = saved["BertForSequenceClassification"]
  _convert("--direction=hf_to_bert", f"--input_dir={source}", f"--output_dir={tmp_path / 'bert'}")
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=bert_to_hf",
                                  f"--input_dir={tmp_path / 'bert'}",
                                  f"--output_dir={tmp_path / 'hf'}", *filter(None, [flag]))
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "convert_checkpoint.py: error: " + message.format(dir=tmp_path / "bert"))
  assert not (tmp_path / "hf").exists()


def test_a_pytorch_file_is_read_without_torch_and_runs_no_code(saved, tmp_path, monkeypatch):
  input_dir = _layout_dir(saved, "BertModel", "bin_legacy_names", tmp_path / "hf")
  expected = {name: value.numpy() for name, value in
              torch.load(input_dir / "pytorch_model.bin", weights_only=True).items()}
  monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
  read = hf_files.read_weights(str(input_dir))
  assert sorted(read.names_in_file.values()) == sorted(expected)
  for name, value in read.tensors.items():
    np.testing.assert_array_equal(value, expected[read.names_in_file[name]])
  monkeypatch.undo()

  class Runs:  # a pickle that would call os.system on load, in torch's zip layout
    def __reduce__(self):
      return (os.system, ("true",))

  torch.save({"bert.pooler.dense.bias": Runs()}, tmp_path / "evil.bin")
  (tmp_path / "evil").mkdir()
  (tmp_path / "evil" / "pytorch_model.bin").write_bytes((tmp_path / "evil.bin").read_bytes())
  with pytest.raises(ConversionError, match=r"pytorch_model.bin: unreadable PyTorch file: "
                     r"posix.system is not part of a state dict of tensors"):
    hf_files.read_weights(str(tmp_path / "evil"))


def test_safetensors_then_pytorch_then_tf_h5_is_read(saved, tmp_path):
  # Damaged files of the less preferred formats beside model.safetensors are not read; each is
  # read, and refused, once the files before it in the order are gone.
  input_dir = _layout_dir(saved, "BertModel", "safetensors", tmp_path / "hf")
  for damaged in ("pytorch_model.bin", "tf_model.h5"):
    (input_dir / damaged).write_bytes(b"not a weights file")
  _convert("--direction=hf_to_bert", f"--input_dir={input_dir}", f"--output_dir={tmp_path / 'ok'}")
  (input_dir / "model.safetensors").unlink()
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=hf_to_bert",
                                  f"--input_dir={input_dir}", f"--output_dir={tmp_path / 'out'}")
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      f"convert_checkpoint.py: error: {input_dir}/pytorch_model.bin: unreadable PyTorch file: ")
  (input_dir / "pytorch_model.bin").unlink()
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=hf_to_bert",
                                  f"--input_dir={input_dir}", f"--output_dir={tmp_path / 'out'}")
  assert result.stderr.strip().splitlines()[-1].startswith(
      f"convert_checkpoint.py: error: {input_dir}/tf_model.h5: not a Keras weights file: ")
  (input_dir / "tf_model.h5").unlink()
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=hf_to_bert",
                                  f"--input_dir={input_dir}", f"--output_dir={tmp_path / 'out'}")
  assert result.stderr.strip().splitlines()[-1] == (
      f"convert_checkpoint.py: error: {input_dir}: no model.safetensors, pytorch_model.bin or "
      "tf_model.h5 (nor a shard index of the first two)")
  assert not (tmp_path / "out").exists()


def test_a_label_list_of_another_length_is_refused(saved, tmp_path):
  _, source = saved["BertForSequenceClassification"]
  _convert("--direction=hf_to_bert", f"--input_dir={source}", f"--output_dir={tmp_path / 'bert'}")
  (tmp_path / "bert" / "label_list.txt").write_text("yes\nno\n")
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=bert_to_hf",
                                  f"--input_dir={tmp_path / 'bert'}",
                                  f"--output_dir={tmp_path / 'hf'}",
                                  "--hf_architecture=BertForSequenceClassification")
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      f"convert_checkpoint.py: error: {tmp_path / 'bert'}/label_list.txt: 2 labels, but the "
      "classifier head has 3 outputs")
  assert not (tmp_path / "hf").exists()


def test_a_regression_head_has_no_label_list(tmp_path):
  torch.manual_seed(0)
  config = transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=2, intermediate_size=37,
                                   max_position_embeddings=24, num_labels=1)
  transformers.BertForSequenceClassification(config).save_pretrained(str(tmp_path / "hf"))
  (tmp_path / "hf" / "vocab.txt").write_text("".join(f"{token}\n" for token in VOCAB))
  result = _convert("--direction=hf_to_bert", f"--input_dir={tmp_path / 'hf'}",
                    f"--output_dir={tmp_path / 'bert'}")
  assert result.labels == () and result.do_lower_case is None
  assert sorted(path.name for path in (tmp_path / "bert").iterdir()) == [
      "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
      "vocab.txt"]
