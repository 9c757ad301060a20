"""`serving.tf_hub_export`: a tiny model in the original layout exported as TF Hub's BERT encoder
and preprocessing SavedModels, loaded with `tf.saved_model.load` as a TF Hub user would.

Reference for the interface: Model Garden's own export (`export_tfhub`) in
`tests/fixtures/model_garden/tf_hub_encoder/saved_model` (made by
`scripts/make_model_garden_fixtures.py`), whose signatures ours must match; for the values, this
project's `BertEncoder` (1e-5) and `FullTokenizer` with `sequence_pairs.pack` (exact).

Slow tier, as the other SavedModel exports: one export and its loads take about 10 s.
"""

import inspect
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

from base import atomic_files
from data import sequence_pairs
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import encoder as encoder_lib
from modeling.conversion import model_garden
from serving import tf_hub_export
from tests import original_dirs
from tests import scripts

MODEL_GARDEN_ENCODER = (pathlib.Path(__file__).parent / "fixtures" / "model_garden"
                        / "tf_hub_encoder" / "saved_model")
TOLERANCE = 1e-5
pytestmark = pytest.mark.slow

# Words, continuations, punctuation, an accented and a CJK character, so that the texts below
# exercise each step of the tokenizer.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "un",
         "##aff", "##able", "##s", "##ing", "play", ",", ".", "!", "'", "cafe", "naive", "中",
         "国", "run", "##ner", "a", "b", "c", "d"]
TEXTS = ["The cat sat on the mat.", "UNAFFABLE cats, playing!", "Café naïve 中国 runner's",
         "", "  \t ", "zzz unknownwords " + "x" * 250, "a b c d " * 20]
# Pairs longer than the custom length below, truncated on either side or both.
PAIRS = [("a b c d " * 5, "the cat"), ("the", "a b c d " * 5), ("a b c d " * 4, "b c d " * 6),
         ("cat", "")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """`(TfHubExport, model_dir, weights)`: the export of a tiny random model with pre-training
  heads, uncased."""
  directory = tmp_path_factory.mktemp("tf_hub")
  config = original_dirs.tiny_config(vocab_size=len(VOCAB))
  weights = original_dirs.random_weights(config, seed=4, with_pretraining_heads=True)
  model_dir = original_dirs.write_original_dir(directory / "bert", config, weights)
  (model_dir / "vocab.txt").write_text("".join(token + "\n" for token in VOCAB))
  export = tf_hub_export.export_tf_hub(str(model_dir), str(directory / "hub"), do_lower_case=True)
  return export, model_dir, weights


@pytest.fixture(scope="module")
def encoder(exported):
  return tf.saved_model.load(exported[0].encoder_dir)


@pytest.fixture(scope="module")
def preprocessor(exported):
  return tf.saved_model.load(exported[0].preprocessing_dir)


@pytest.fixture(scope="module")
def model_garden_encoder():
  return tf.saved_model.load(str(MODEL_GARDEN_ENCODER))


def _hub_inputs(batch_size, seq_length, seed):
  input_ids, input_mask, segment_ids = original_dirs.sample_inputs(len(VOCAB), batch_size,
                                                                   seq_length, seed)
  return {"input_word_ids": tf.constant(input_ids), "input_mask": tf.constant(input_mask),
          "input_type_ids": tf.constant(segment_ids)}


def _our_outputs(model_dir, inputs):
  """This project's `BertEncoder` from `model_dir` on TF Hub-named `inputs`, as TF Hub names its
  outputs."""
  ours = encoder_lib.BertEncoder(
      bert_config_lib.BertConfig.from_json_file(str(model_dir / "bert_config.json")))
  report = checkpoint_io.assign_from_checkpoint(ours.name_to_variable(),
                                                str(model_dir / "bert_model.ckpt"))
  assert report["missing"] == []
  outputs = ours({"input_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"],
                  "segment_ids": inputs["input_type_ids"]}, training=False)
  return {"sequence_output": outputs["sequence_output"], "pooled_output": outputs["pooled_output"],
          "default": outputs["pooled_output"], "encoder_outputs": outputs["encoder_outputs"]}


def _assert_close(actual, expected):
  tf.nest.assert_same_structure(actual, expected)
  for got, want in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
    assert got.shape == want.shape
    difference = float(np.abs(np.asarray(got) - np.asarray(want)).max())
    assert difference <= TOLERANCE, difference


def _signature_as_call(loaded, inputs):
  """`serving_default`'s outputs, put back into `__call__`'s structure by the names Model Garden
  gives them: the i-th flattened output is `<prefix>` (i = 0) or `<prefix>_<i>`, `<prefix>` the
  one name without a numeric suffix."""
  outputs = loaded.signatures["serving_default"](**inputs)
  prefix = min(outputs, key=len)
  flat = [outputs[prefix + (f"_{index}" if index else "")] for index in range(len(outputs))]
  return tf.nest.pack_sequence_as(loaded(inputs), flat)


@pytest.mark.parametrize("batch_size, seq_length", [(3, 12), (1, 24)])
def test_encoder_outputs_equal_ours(exported, encoder, batch_size, seq_length):
  inputs = _hub_inputs(batch_size, seq_length, seed=seq_length)
  ours = _our_outputs(exported[1], inputs)
  _assert_close(encoder(inputs), ours)
  _assert_close(encoder(inputs, training=False), ours)
  _assert_close(_signature_as_call(encoder, inputs), ours)


def test_model_garden_signature_output_names_follow_the_call(model_garden_encoder):
  """The naming rule `_signature_as_call` relies on, checked on Model Garden's own export."""
  inputs = {name: tf.constant(value) for name, value in np.load(
      MODEL_GARDEN_ENCODER.parent / "outputs.npz").items() if name.startswith("input_")}
  _assert_close(_signature_as_call(model_garden_encoder, inputs), model_garden_encoder(inputs))


def _specs(structure):
  """(dtype, shape) of each `TensorSpec` in `structure`, as plain values."""
  return tf.nest.map_structure(lambda spec: (spec.dtype.name, tuple(spec.shape.as_list())),
                               structure)


def _renamed_outputs(signature):
  """A signature's output specs keyed by their suffix after the common `<prefix>` (see
  `_signature_as_call`), the prefix being the name of a Keras model."""
  outputs = signature.structured_outputs
  prefix = min(outputs, key=len)
  return {name[len(prefix):]: spec for name, spec in _specs(outputs).items()}


def test_signatures_match_model_garden(encoder, model_garden_encoder):
  ours, theirs = encoder.signatures, model_garden_encoder.signatures
  assert sorted(ours) == sorted(theirs)
  for name in theirs:
    # The tiny model has the fixture's width and depth, so the shapes must be equal, not only
    # of the same rank.
    assert _specs(ours[name].structured_input_signature) == _specs(
        theirs[name].structured_input_signature)
    assert _renamed_outputs(ours[name]) == _renamed_outputs(theirs[name])

  def call_traces(loaded):
    """{training: (input specs, output specs)} of the saved traces of `__call__`."""
    return {function.structured_input_signature[0][1]: (
        _specs(function.structured_input_signature[0][0]), _specs(function.structured_outputs))
            for function in loaded.__call__.concrete_functions}

  assert call_traces(encoder) == call_traces(model_garden_encoder)
  assert set(call_traces(encoder)) == {False, True}
  assert inspect.getfullargspec(encoder.__call__).args[:2] == (
      inspect.getfullargspec(model_garden_encoder.__call__).args[:2])


def test_encoder_has_what_tf_hub_users_read(exported, encoder, model_garden_encoder):
  # What `hub.KerasLayer` reads (variables, trainable_variables, regularization_losses) and what
  # TF Hub's BERT encoders carry for tokenization (vocab_file, do_lower_case).
  for name in ("variables", "trainable_variables", "regularization_losses", "vocab_file",
               "do_lower_case"):
    assert hasattr(model_garden_encoder, name), name
    assert hasattr(encoder, name), name
  assert len(encoder.trainable_variables) == len(model_garden_encoder.trainable_variables)
  assert list(encoder.regularization_losses) == []
  assert bool(encoder.do_lower_case.numpy()) is True
  assert pathlib.Path(encoder.vocab_file.asset_path.numpy().decode()).read_text() == (
      "".join(token + "\n" for token in VOCAB))
  # Fine-tuning (`hub.KerasLayer(..., trainable=True)` calls with training=True): every
  # trainable variable gets a gradient, and dropout is on.
  inputs = _hub_inputs(2, 8, seed=1)
  with tf.GradientTape() as tape:
    outputs = encoder(inputs, training=True)
    loss = tf.reduce_sum(outputs["pooled_output"]) + tf.reduce_sum(outputs["sequence_output"])
  gradients = tape.gradient(loss, encoder.trainable_variables)
  assert all(gradient is not None for gradient in gradients)
  assert not np.allclose(outputs["sequence_output"], encoder(inputs)["sequence_output"])
  assert exported[0].left_out == sorted(name for name in exported[2] if name.startswith("cls/"))


def _pieces_by_word(tokenizer, text):
  basic, wordpiece = tokenizer.basic_tokenizer, tokenizer.wordpiece_tokenizer
  return [tokenizer.convert_tokens_to_ids(wordpiece.tokenize(word))
          for word in basic.tokenize(text)]


def _expected_packing(tokenizer, pairs, seq_length):
  """{TF Hub input name: int32 [len(pairs), seq_length]} as the Python pipeline packs `pairs`
  ((text_a, text_b or None))."""
  packed = [sequence_pairs.pack(tokenizer, tokenizer.tokenize(a),
                                None if b is None else tokenizer.tokenize(b), seq_length)
            for a, b in pairs]
  return {"input_word_ids": np.array([p.input_ids for p in packed], np.int32),
          "input_mask": np.array([p.input_mask for p in packed], np.int32),
          "input_type_ids": np.array([p.segment_ids for p in packed], np.int32)}


def _assert_packed(actual, expected):
  assert sorted(actual) == sorted(expected)
  for name, values in expected.items():
    assert actual[name].dtype == tf.int32, name
    np.testing.assert_array_equal(actual[name].numpy(), values, err_msg=name)


def test_preprocessing_tokenizes_as_full_tokenizer(exported, preprocessor):
  tokenizer = tokenization.FullTokenizer(str(exported[1] / "vocab.txt"), do_lower_case=True)
  tokens = preprocessor.tokenize(tf.constant(TEXTS))
  assert tokens.dtype == tf.int32 and tokens.ragged_rank == 2
  assert tokens.to_list() == [_pieces_by_word(tokenizer, text) for text in TEXTS]
  assert {name: int(value) for name, value in
          preprocessor.tokenize.get_special_tokens_dict().items()} == {
              "vocab_size": len(VOCAB), "start_of_sequence_id": VOCAB.index("[CLS]"),
              "end_of_segment_id": VOCAB.index("[SEP]"), "padding_id": VOCAB.index("[PAD]"),
              "mask_id": VOCAB.index("[MASK]")}


def test_preprocessing_casing_follows_do_lower_case(exported):
  """Cased: not saved (the uncased export above is), the same functions called before saving."""
  vocab_file = str(exported[1] / "vocab.txt")
  cased = tf_hub_export.TfHubPreprocessor(vocab_file, do_lower_case=False)
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=False)
  assert cased.tokenize.__call__(tf.constant(TEXTS)).to_list() == [
      _pieces_by_word(tokenizer, text) for text in TEXTS]


def test_preprocessing_packs_as_the_python_pipeline(exported, preprocessor):
  tokenizer = tokenization.FullTokenizer(str(exported[1] / "vocab.txt"), do_lower_case=True)
  # The tiny model has 24 positions: TF Hub's default of 128 is cut to them.
  assert exported[0].default_seq_length == 24
  singles = _expected_packing(tokenizer, [(text, None) for text in TEXTS], 24)
  _assert_packed(preprocessor(tf.constant(TEXTS)), singles)
  _assert_packed(preprocessor.signatures["serving_default"](sentences=tf.constant(TEXTS)),
                 singles)
  tokens = preprocessor.tokenize(tf.constant(TEXTS))
  _assert_packed(preprocessor.bert_pack_inputs([tokens]), singles)
  seq_length = 10
  first = preprocessor.tokenize(tf.constant([a for a, _ in PAIRS]))
  second = preprocessor.tokenize(tf.constant([b for _, b in PAIRS]))
  pairs = _expected_packing(tokenizer, PAIRS, seq_length)
  _assert_packed(preprocessor.bert_pack_inputs([first, second], seq_length=seq_length), pairs)
  # Word pieces without the word dimension, and seq_length as a tensor.
  _assert_packed(preprocessor.bert_pack_inputs(
      [first.merge_dims(1, 2), second.merge_dims(1, 2)], seq_length=tf.constant(seq_length)),
      pairs)


def test_round_trip_through_tf_hub_to_bert_is_bit_identical(exported, tmp_path):
  export, model_dir, weights = exported
  config, do_lower_case, difference = model_garden.convert_tf_hub_to_original(
      export.encoder_dir, str(tmp_path))
  assert do_lower_case is True and difference <= TOLERANCE
  for name in ("bert_config.json", "vocab.txt"):
    assert (tmp_path / name).read_bytes() == (model_dir / name).read_bytes(), name
  back = checkpoint_io.read_checkpoint(str(tmp_path / "bert_model.ckpt"))
  expected = {name: value for name, value in weights.items() if name.startswith("bert/")}
  assert sorted(back) == sorted(expected)
  for name, value in expected.items():
    assert back[name].dtype == value.dtype and np.array_equal(back[name], value), name
  assert config == original_dirs.tiny_config(vocab_size=len(VOCAB))


def test_existing_export_is_refused_before_anything_is_written(exported, tmp_path):
  (tmp_path / "encoder").mkdir()
  with pytest.raises(tf_hub_export.ExportError, match="encoder exists already"):
    tf_hub_export.export_tf_hub(str(exported[1]), str(tmp_path), do_lower_case=True)
  assert sorted(path.name for path in tmp_path.iterdir()) == ["encoder"]


def test_failure_while_saving_leaves_nothing(exported, tmp_path, monkeypatch):
  saves = []

  def save_then_fail(module, path, signatures):
    saves.append(path)
    if len(saves) == 2:
      raise tf.errors.ResourceExhaustedError(None, None, f"{path}; No space left on device")
    return save(module, path, signatures=signatures)

  save = tf.saved_model.save
  monkeypatch.setattr(tf.saved_model, "save", save_then_fail)
  with pytest.raises(atomic_files.NoSpaceError):
    tf_hub_export.export_tf_hub(str(exported[1]), str(tmp_path / "hub"), do_lower_case=True)
  assert len(saves) == 2
  assert list((tmp_path / "hub").iterdir()) == []


def test_convert_checkpoint_exports_with_the_casing_the_model_records(exported, tmp_path):
  model_dir = tmp_path / "cased"
  shutil.copytree(exported[1], model_dir)
  (model_dir / "tokenizer_config.json").write_text('{"do_lower_case": false}')
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=bert_to_tf_hub",
                                  f"--input_dir={model_dir}", f"--output_dir={tmp_path / 'hub'}")
  assert result.returncode == 0, result.stderr
  assert result.result.do_lower_case is False
  assert result.result.left_out == tuple(exported[0].left_out)
  encoder = tf.saved_model.load(str(tmp_path / "hub" / "encoder"))
  assert not bool(encoder.do_lower_case.numpy())
