"""export_model.py: a pretrained checkpoint exported as a feature extractor, loaded in a fresh
process, gives extract_features.py's vectors and the pretraining model's masked-LM logits."""

import json

import numpy as np
import pytest
import tensorflow as tf

from base import cpu_features
from data import sequence_pairs
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import encoder as encoder_lib
from modeling import pretraining_model
from tests import saved_model_cli
from tests import scripts

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 24
# (text_a, text_b): singles, pairs, and inputs longer than MAX_SEQ_LENGTH on either side.
INPUTS = [
    ("The keeper climbed the tower.", ""),
    ("Bees make honey.", "The lamp was lit."),
    ("the river " * 20, ""),
    ("A short one.", "and a second text that runs on " * 4),
    ("Caf\u00e9 ORCHARD, \u00bd of the bread!", ""),
]
# Empty texts, texts far beyond MAX_SEQ_LENGTH, undecodable bytes; rows 2 and 3 tokenize alike.
BAD_INPUTS = [("", ""), ("word " * 2000, ""), (b"\xff\xfe not \xc3 utf-8", ""),
              (" not  utf-8", ""), ("", "word " * 2000), ("short", b"\xff")]


def random_weights(names, seed):
  """{name: variable} -> {name: the variable's value plus noise}, so no weight is a default."""
  rng = np.random.default_rng(seed)
  return {name: variable.numpy() + rng.normal(0, 0.1, variable.shape).astype(np.float32)
          for name, variable in names.items()}


@pytest.fixture(scope="module")
def pretrained(tiny_model, tmp_path_factory):
  """A pretraining model with random weights, saved as an original-layout checkpoint:
  (vocab_file, config_file, checkpoint prefix, the model)."""
  vocab_file, config_file = tiny_model
  model = pretraining_model.BertPretrainingModel(
      bert_config_lib.BertConfig.from_json_file(config_file))
  prefix = str(tmp_path_factory.mktemp("pretrained") / "model.ckpt-10")
  checkpoint_io.write_checkpoint(prefix, random_weights(model.name_to_variable(), seed=1))
  checkpoint_io.assign_from_checkpoint(model.name_to_variable(), prefix)
  return vocab_file, config_file, prefix, model


def export_model(vocab_file, config_file, checkpoint, export_dir, *flags):
  return scripts.run_in_process(
      "export_model.py", f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--init_checkpoint={checkpoint}",
      f"--max_seq_length={MAX_SEQ_LENGTH}", f"--export_dir={export_dir}", *flags)


def extract_features(tmp_path, vocab_file, config_file, checkpoint, output_name, *flags):
  input_file = tmp_path / "input.txt"
  input_file.write_text("".join(f"{a} ||| {b}\n" if b else f"{a}\n" for a, b in INPUTS),
                        encoding="utf-8")
  output = tmp_path / output_name
  result = scripts.run_in_process(
      "extract_features.py", f"--input_file={input_file}",
      f"--output_file={output}", f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--init_checkpoint={checkpoint}",
      f"--max_seq_length={MAX_SEQ_LENGTH}", "--layers=-1", *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  return output


LOAD_AND_SERVE = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # the in-graph tokenizer's ops
model = tf.saved_model.load(sys.argv[1])
request = json.loads(sys.argv[2])
texts = {name: tf.constant(request[name]) for name in ("text_a", "text_b")}
bad_a, bad_b = zip(*BAD_INPUTS)
served = {
    "text": model.signatures["serving_default"](**texts),
    "ids": model.signatures["predict_ids"](
        **{name: tf.constant(request[name]) for name in ("input_ids", "input_mask", "segment_ids")}),
    "embed": model.signatures["embed"](**texts),
    "bad": model.signatures["serving_default"](text_a=tf.constant(bad_a),
                                               text_b=tf.constant(bad_b)),
    "bad_embed": model.signatures["embed"](text_a=tf.constant(bad_a), text_b=tf.constant(bad_b)),
    "empty": model.signatures["serving_default"](text_a=tf.constant([], tf.string),
                                                 text_b=tf.constant([], tf.string)),
    "empty_embed": model.signatures["embed"](text_a=tf.constant([], tf.string),
                                             text_b=tf.constant([], tf.string)),
}
print(json.dumps({"signatures": sorted(model.signatures),
                  **{f"{call}/{name}": value.numpy().tolist() for call, outputs in served.items()
                     for name, value in outputs.items()}}))
""".replace("BAD_INPUTS", repr(BAD_INPUTS))


def test_export_serves_what_extract_features_and_the_pretraining_model_compute(pretrained,
                                                                               tmp_path):
  vocab_file, config_file, checkpoint, model = pretrained
  result = export_model(vocab_file, config_file, checkpoint, tmp_path / "export",
                        "--export_version=3", "--pooling=mean")
  assert result.returncode == 0, result.stderr[-3000:]
  export_path = tmp_path / "export" / "3"
  assert (export_path / "assets" / "vocab.txt").read_text() == open(vocab_file).read()
  # Each weight is saved once (the table the masked-LM head shares too), not again under the
  # Keras models.
  saved = [name for name, _ in tf.train.list_variables(str(export_path / "variables" /
                                                            "variables"))]
  assert {name.split("/")[0] for name in saved} == {
      "_CHECKPOINTABLE_OBJECT_GRAPH", "do_lower_case", "model_variables"}
  assert len([name for name in saved if "word_embeddings" in name]) == 1
  # Served in the layout of the task exports: each first feed-forward kernel stored transposed
  # on an AVX2 processor (this one, where the export ran), as the checkpoint stores it elsewhere.
  stored, other = (("kernel_transposed", "kernel") if cpu_features.is_avx2_without_avx512()
                   else ("kernel", "kernel_transposed"))
  assert len([name for name in saved if f"intermediate_dense.S{stored}/" in name]) == (
      model.config.num_hidden_layers)
  assert not [name for name in saved if f"intermediate_dense.S{other}/" in name]

  # Token ids from the Python tokenizer, packed as extract_features.py packs them.
  tokenizer = tokenization.FullTokenizer(vocab_file)
  packed = [sequence_pairs.pack(tokenizer, tokenizer.tokenize(a),
                                tokenizer.tokenize(b) if b else None, MAX_SEQ_LENGTH)
            for a, b in INPUTS]
  length = max(len(p.tokens) for p in packed)
  ids = {name: [getattr(p, name)[:length] for p in packed]
         for name in ("input_ids", "input_mask", "segment_ids")}
  request = {"text_a": [a for a, _ in INPUTS], "text_b": [b for _, b in INPUTS], **ids}
  served = {name: np.array(value) if name != "signatures" else value
            for name, value in scripts.run_python_json(
                LOAD_AND_SERVE, export_path, json.dumps(request), cwd=tmp_path).items()}
  assert served["signatures"] == ["embed", "predict_ids", "serving_default"]
  # An empty request gets empty outputs, not an error.
  assert served["empty_embed/embedding"].shape[0] == 0
  assert all(served[f"empty/{name}"].shape[0] == 0
             for name in ("sequence_output", "pooled_output", "embedding"))

  # The in-graph packing is the runner's, and both signatures give the same outputs.
  for name in ("input_ids", "input_mask"):
    np.testing.assert_array_equal(served[f"text/{name}"], ids[name])
    np.testing.assert_array_equal(served[f"ids/{name}"], ids[name])
  for name in ("sequence_output", "pooled_output", "mlm_logits", "embedding"):
    np.testing.assert_allclose(served[f"text/{name}"], served[f"ids/{name}"], atol=1e-5)
  np.testing.assert_allclose(served["embed/embedding"], served["text/embedding"], atol=1e-5)

  # embed = extract_features.py --pooling=mean; sequence_output = its last layer per token.
  np.testing.assert_allclose(served["embed/embedding"], np.load(extract_features(
      tmp_path, vocab_file, config_file, checkpoint, "mean.npy", "--pooling=mean")), atol=1e-5)
  tokens = extract_features(tmp_path, vocab_file, config_file, checkpoint, "tokens.jsonl")
  for row, line in enumerate(tokens.read_text().splitlines()):
    features = json.loads(line)["features"]
    assert [f["token"] for f in features] == packed[row].tokens
    np.testing.assert_allclose(served["text/sequence_output"][row, :len(features)],
                               [f["layers"][0]["values"] for f in features], atol=1e-5)

  # mlm_logits = the pretraining model's masked-LM head scoring every position.
  positions = np.broadcast_to(np.arange(length, dtype=np.int32), (len(INPUTS), length))
  expected = model({**{name: tf.constant(value, tf.int32) for name, value in ids.items()},
                    "masked_lm_positions": tf.constant(positions)})["masked_lm_logits"]
  assert served["text/mlm_logits"].shape == (len(INPUTS), length, model.config.vocab_size)
  np.testing.assert_allclose(served["text/mlm_logits"], expected.numpy(), atol=1e-4)

  # Bad input is served: empty, too long, undecodable bytes (dropped, as FullTokenizer does).
  # A non-empty text_b makes a pair even when it has no word pieces, as `A ||| B` lines do.
  expected_lengths = [len(sequence_pairs.pack(
      tokenizer, tokenizer.tokenize(a), tokenizer.tokenize(b) if b.strip() else None,
      MAX_SEQ_LENGTH).tokens) for a, b in BAD_INPUTS]
  assert expected_lengths[1] == expected_lengths[4] == MAX_SEQ_LENGTH
  assert list(served["bad/input_mask"].sum(axis=1)) == expected_lengths
  assert np.isfinite(served["bad/mlm_logits"]).all()
  np.testing.assert_allclose(served["bad_embed/embedding"][2], served["bad_embed/embedding"][3],
                             atol=1e-6)
  np.testing.assert_allclose(served["bad_embed/embedding"], served["bad/embedding"], atol=1e-5)

  listed = saved_model_cli.signatures(export_path)
  assert sorted(listed) == ["__saved_model_init_op", "embed", "predict_ids", "serving_default"]
  hidden, vocab_size = model.config.hidden_size, model.config.vocab_size
  ids, text = ("DT_INT32", "(-1, -1)"), ("DT_STRING", "(-1)")
  outputs = {"sequence_output": ("DT_FLOAT", f"(-1, -1, {hidden})"),
             "pooled_output": ("DT_FLOAT", f"(-1, {hidden})"),
             "mlm_logits": ("DT_FLOAT", f"(-1, -1, {vocab_size})"),
             "embedding": ("DT_FLOAT", f"(-1, {hidden})"), "input_ids": ids, "input_mask": ids}
  assert listed["predict_ids"] == {
      "inputs": {"input_ids": ids, "input_mask": ids, "segment_ids": ids}, "outputs": outputs}
  assert listed["serving_default"] == {"inputs": {"text_a": text, "text_b": text},
                                       "outputs": outputs}
  assert listed["embed"] == {"inputs": {"text_a": text, "text_b": text},
                             "outputs": {"embedding": outputs["embedding"]}}


IDS_ONLY = r"""
import json, sys
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
ids = tf.constant([[2, 30, 31, 3, 0]])
out = model.signatures["predict_ids"](input_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),
                                      segment_ids=tf.zeros_like(ids))
print(json.dumps({"signatures": sorted(model.signatures),
                  **{name: value.numpy().tolist() for name, value in out.items()}}))
"""


def test_encoder_only_checkpoint_exports_without_mlm_logits(tiny_model, tmp_path):
  # As a converted sentence encoder: `bert/*` only, no masked-LM head.
  vocab_file, config_file = tiny_model
  encoder = encoder_lib.BertEncoder(bert_config_lib.BertConfig.from_json_file(config_file))
  prefix = str(tmp_path / "encoder" / "bert_model.ckpt")
  checkpoint_io.write_checkpoint(prefix, random_weights(encoder.name_to_variable(), seed=2))
  result = export_model(vocab_file, config_file, prefix, tmp_path / "export",
                        "--export_version=1", "--export_ids_only", "--pooling=cls")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "exporting without mlm_logits" in result.stderr
  # A process that never imports tensorflow_text loads it.
  served = scripts.run_python_json(IDS_ONLY, tmp_path / "export" / "1")
  assert served["signatures"] == ["predict_ids"]
  assert sorted(served) == ["embedding", "input_ids", "input_mask", "pooled_output",
                            "sequence_output", "signatures"]
  np.testing.assert_allclose(served["embedding"], np.array(served["sequence_output"])[:, 0],
                             atol=1e-6)


@pytest.mark.parametrize("case, expected", [
    ("missing_checkpoint", "no such checkpoint"),
    ("existing_version", "exists already"),
    ("max_seq_length", "--max_seq_length=100 exceeds max_position_embeddings 64"),
])
def test_bad_flags_fail_with_one_line_and_write_nothing(pretrained, tmp_path, case, expected):
  vocab_file, config_file, checkpoint, _ = pretrained
  export_dir = tmp_path / "export"
  flags = ["--export_version=5"]
  if case == "missing_checkpoint":
    checkpoint = str(tmp_path / "nowhere" / "model.ckpt-1")
  elif case == "existing_version":
    (export_dir / "5").mkdir(parents=True)
    (export_dir / "5" / "saved_model.pb").write_text("an earlier export")
  else:
    flags.append("--max_seq_length=100")
  result = export_model(vocab_file, config_file, checkpoint, export_dir, *flags)
  assert result.returncode == 1
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith("export_model.py: error: ") and expected in last_line, last_line
  if case == "existing_version":
    assert [p.name for p in export_dir.iterdir()] == ["5"]
    assert (export_dir / "5" / "saved_model.pb").read_text() == "an earlier export"
  else:
    assert not export_dir.exists()
