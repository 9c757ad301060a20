"""SavedModel export: in-graph packing equals the runner's, and an export loaded in a fresh process
answers as `run_classifier.py --do_predict` did, through both signatures."""

import json
import random
import re

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from base import cpu_features
from data import graph_packing
from data import sequence_pairs
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import classifier_model
from tasks import classifier
from tasks.classification import server as classifier_server
from tests import saved_model_cli
from tests import scripts
from tests import xla_functions
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("max_seq_length", [5, 8, 13])
def test_graph_pair_truncation_equals_the_original_loop(max_seq_length):
  rng = random.Random(max_seq_length)
  lengths = [(rng.randint(0, 15), rng.randint(0, 15)) for _ in range(200)]
  kept_a, kept_b = graph_packing.truncated_pair_lengths(
      tf.constant([a for a, _ in lengths]), tf.constant([b for _, b in lengths]),
      max_seq_length - 3)
  for (a, b), got_a, got_b in zip(lengths, kept_a.numpy(), kept_b.numpy()):
    tokens_a, tokens_b = list(range(a)), list(range(b))
    sequence_pairs.truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    assert (got_a, got_b) == (len(tokens_a), len(tokens_b)), (a, b)


class IdTokenizer:
  def convert_tokens_to_ids(self, tokens):
    return [{"[CLS]": 101, "[SEP]": 102}.get(t, t) for t in tokens]


def test_graph_pack_equals_the_original_layout():
  pieces_a = [[5, 6, 7, 8, 9, 10], [11], []]
  pieces_b = [[20, 21], [22, 23, 24, 25, 26, 27, 28], [29]]
  packed = graph_packing.pack(tf.ragged.constant(pieces_a), tf.ragged.constant(pieces_b), 8,
                              101, 102)
  for row, (a, b) in enumerate(zip(pieces_a, pieces_b)):
    expected = sequence_pairs.pack(IdTokenizer(), a, b, 8)
    length = len(expected.tokens)
    for name in ("input_ids", "input_mask", "segment_ids"):
      got = packed[name].numpy()[row]
      assert list(got[:length]) == getattr(expected, name)[:length], name
      assert not got[length:].any()


LOAD_AND_PREDICT = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # the in-graph tokenizer's ops
export_dir, request = sys.argv[1], json.loads(sys.argv[2])
model = tf.saved_model.load(export_dir)
text = model.signatures["serving_default"](**{k: tf.constant(v) for k, v in request.items()})
# The ids signature on the same inputs, tokenized and packed by the export's own graph.
ids = model.signatures["predict_ids"](**{
    k: tf.constant(v) for k, v in json.loads(sys.argv[3]).items()}) if len(sys.argv) > 3 else text
bad = model.signatures["serving_default"](**{k: tf.constant(
    ["", "word " * 2000, b"\xff\xfe not utf-8", "short"]) for k in request})
empty = model.signatures["serving_default"](**{k: tf.constant([], tf.string) for k in request})
print(json.dumps({"empty_shapes": {k: v.shape.as_list() for k, v in empty.items()},
                  "probabilities": text["probabilities"].numpy().tolist(),
                  "label": [x.decode() for x in text["label"].numpy()],
                  "ids_probabilities": ids["probabilities"].numpy().tolist(),
                  "bad_labels": [x.decode() for x in bad["label"].numpy()]}))
"""


@pytest.mark.parametrize("avx2_without_avx512", [True, False])
def test_the_served_classifier_computes_the_real_tokens_alone_and_answers_the_same(
    tiny_model, monkeypatch, avx2_without_avx512):
  monkeypatch.setattr(cpu_features, "is_avx2_without_avx512",
                      lambda cpuinfo=None: avx2_without_avx512)
  vocab_file, config_file = tiny_model
  model = classifier_model.BertClassifier(bert_config_lib.BertConfig.from_json_file(config_file),
                                          num_outputs=3)
  server = classifier_server.ClassifierServer(model, vocab_file, True, ["a", "b", "c"],
                                              classifier.CLASSIFICATION, 16, has_pairs=False)
  assert server.model.drop_padding and not model.drop_padding  # a copy; the model is unchanged
  # The first feed-forward kernel is stored transposed on AVX2 processors only.
  assert server.model.intermediate_kernel_transposed is avx2_without_avx512
  assert not model.intermediate_kernel_transposed
  listed = set(server.model_variables)
  assert ("layer_0/intermediate_dense/kernel_transposed" in listed) is avx2_without_avx512
  assert ("layer_0/intermediate_dense/kernel" in listed) is not avx2_without_avx512
  ids = tf.constant([[2, 7, 8, 9, 3, 0, 0, 0], [2, 5, 3, 0, 0, 0, 0, 0], [2, 6, 6, 6, 6, 6, 6, 3]])
  inputs = {"input_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
            "segment_ids": tf.zeros_like(ids)}
  np.testing.assert_allclose(server.predict_ids(**inputs)["logits"].numpy(),
                             model(inputs).numpy(), atol=1e-5)


@pytest.mark.parametrize("pairs", [False, True])
def test_export_answers_as_the_runner(tiny_model, tmp_path, pairs):
  vocab_file, config_file = tiny_model
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  rows = [line.split("\t") for line in
          (SAMPLES_DIR / "classification" / "train.tsv").read_text().splitlines()[1:]]
  for name, part in (("train", rows), ("test", rows[::7])):
    header = "sentence\tother\tlabel" if pairs else "sentence\tlabel"
    lines = [f"{s}\t{rows[(i * 5) % len(rows)][0]}\t{l}" if pairs else f"{s}\t{l}"
             for i, (s, l) in enumerate(part)]
    (data_dir / f"{name}.tsv").write_text("\n".join([header] + lines) + "\n")
  export_dir = tmp_path / "export"
  flags = [f"--data_dir={data_dir}", "--task_name=tsv", f"--vocab_file={vocab_file}",
           f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'out'}",
           "--do_train", "--do_predict", "--num_train_epochs=1", "--max_seq_length=16",
           "--train_batch_size=8", "--learning_rate=1e-3", f"--export_dir={export_dir}",
           "--export_version=7", "--distribution_strategy=one_device"]
  if pairs:
    flags.append("--text_b_column=other")
  result = scripts.run_in_process("run_classifier.py", *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  assert sorted(p.name for p in export_dir.iterdir()) == ["7"]
  assert (export_dir / "7" / "assets" / "vocab.txt").read_text() == open(vocab_file).read()
  # Each weight is saved once, as a listed tf.Variable, not again under the Keras model.
  saved = tf.train.list_variables(str(export_dir / "7" / "variables" / "variables"))
  assert {name.split("/")[0] for name, _ in saved} == {
      "_CHECKPOINTABLE_OBJECT_GRAPH", "do_lower_case", "model_variables"}

  test_rows = [line.split("\t") for line in (data_dir / "test.tsv").read_text().splitlines()[1:]]
  request = {"text_a": [r[0] for r in test_rows]}
  if pairs:
    request["text_b"] = [r[1] for r in test_rows]
  # Token ids made by the Python tokenizer, packed as the runner packs them.
  tokenizer = tokenization.FullTokenizer(vocab_file)
  packed = [sequence_pairs.pack(tokenizer, tokenizer.tokenize(r[0]),
                                tokenizer.tokenize(r[1]) if pairs else None, 16)
            for r in test_rows]
  ids_request = {name: [getattr(p, name) for p in packed]
                 for name in ("input_ids", "input_mask", "segment_ids")}
  answers = scripts.run_python_json(LOAD_AND_PREDICT, export_dir / "7", json.dumps(request),
                                    json.dumps(ids_request), cwd=tmp_path)
  runner = np.loadtxt(tmp_path / "out" / "test_results.tsv", ndmin=2)
  np.testing.assert_allclose(answers["probabilities"], runner, atol=1e-5)
  np.testing.assert_allclose(answers["ids_probabilities"], runner, atol=1e-5)
  labels = (tmp_path / "out" / "label_list.txt").read_text().split()
  assert answers["label"] == [labels[i] for i in np.argmax(runner, axis=1)]
  assert len(answers["bad_labels"]) == 4 and set(answers["bad_labels"]) <= set(labels)
  assert answers["empty_shapes"] == {"probabilities": [0, len(labels)],
                                     "logits": [0, len(labels)], "label": [0]}

  listed = saved_model_cli.signatures(export_dir / "7")
  ids = ("DT_INT32", "(-1, -1)")
  assert listed["predict_ids"]["inputs"] == {"input_ids": ids, "input_mask": ids,
                                             "segment_ids": ids}
  assert listed["serving_default"]["inputs"] == {
      name: ("DT_STRING", "(-1)") for name in ["text_a"] + (["text_b"] if pairs else [])}
  for signature in ("serving_default", "predict_ids"):
    assert listed[signature]["outputs"] == {"probabilities": ("DT_FLOAT", f"(-1, {len(labels)})"),
                                            "logits": ("DT_FLOAT", f"(-1, {len(labels)})"),
                                            "label": ("DT_STRING", "(-1)")}


def test_ids_only_export_loads_without_tensorflow_text(tiny_model, tmp_path):
  vocab_file, config_file = tiny_model
  result = scripts.run_in_process(
      "run_classifier.py", "--task_name=tsv",
      f"--data_dir={SAMPLES_DIR / 'classification'}", f"--vocab_file={vocab_file}",
      f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'out'}",
      "--max_seq_length=16", "--do_train", "--num_train_epochs=1", "--train_batch_size=8",
      f"--export_dir={tmp_path / 'export'}", "--export_version=3", "--export_ids_only",
      "--distribution_strategy=one_device")
  assert result.returncode == 0, result.stderr[-3000:]
  saved_model_bytes = (tmp_path / "export" / "3" / "saved_model.pb").read_bytes()
  assert b"Wordpiece" not in saved_model_bytes
  # Training ran the XLA-compiled GELU; the export holds none (Serving compiles XLA only on a flag).
  meta_graphs = saved_model_pb2.SavedModel.FromString(saved_model_bytes).meta_graphs
  assert any(meta_graph.graph_def.library.function for meta_graph in meta_graphs)
  assert not [name for meta_graph in meta_graphs
              for name in xla_functions.xla_compiled_functions(meta_graph.graph_def)]
  # A fresh process that never imports tensorflow_text loads it and answers.
  code = ("import sys, tensorflow as tf\n"
          "m = tf.saved_model.load(sys.argv[1])\n"
          "assert list(m.signatures) == ['predict_ids'], list(m.signatures)\n"
          "ids = tf.constant([[2, 7, 3, 0]])\n"
          "out = m.signatures['predict_ids'](input_ids=ids, input_mask=tf.cast(ids > 0, tf.int32),"
          " segment_ids=tf.zeros_like(ids))\n"
          "print(out['label'].numpy()[0].decode(), out['probabilities'].numpy().sum())\n")
  label, total = scripts.run_python(code, tmp_path / "export" / "3").split()
  assert label in ("craft", "food", "nature") and float(total) == pytest.approx(1.0, abs=1e-5)
  # saved_model_cli run loads it the TF1 way, as TensorFlow Serving's C++ loader does; that path
  # restores only variables the SavedModel tracks explicitly.
  output = saved_model_cli.run(
      "run", "--dir", tmp_path / "export" / "3", "--tag_set", "serve", "--signature_def",
      "predict_ids", "--input_exprs",
      "input_ids=[[2,7,3,0]];input_mask=[[1,1,1,0]];segment_ids=[[0,0,0,0]]")
  assert re.search(rf"Result for output key label:\s+\[b'{label}'\]", output), output


TAG_SENTENCES = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # the in-graph tokenizer's ops
model = tf.saved_model.load(sys.argv[1])
sentences = json.loads(sys.argv[2]) + ["", "word " * 500, "\xe9t\xe9 \u00bd"]
out = model.signatures["serving_default"](sentences=tf.constant(sentences))
ids = model.signatures["predict_ids"](input_ids=tf.constant([[2, 7, 3]]),
                                      input_mask=tf.constant([[1, 1, 1]]),
                                      segment_ids=tf.constant([[0, 0, 0]]))
print(json.dumps({"tags": [[t.decode() for t in row if t] for row in out["tags"].numpy()],
                  "id_tags": ids["tags"].numpy().shape[1]}))
"""


def test_ner_export_tags_as_the_runner(tiny_model, tmp_path):
  vocab_file, config_file = tiny_model
  export_dir = tmp_path / "export"
  result = scripts.run_in_process(
      "run_ner.py", f"--data_dir={SAMPLES_DIR / 'ner'}",
      f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--output_dir={tmp_path / 'out'}", "--do_train", "--do_predict", "--max_seq_length=48",
      "--train_batch_size=8", "--num_train_epochs=3", "--learning_rate=1e-3",
      f"--export_dir={export_dir}", "--export_version=2", "--distribution_strategy=one_device")
  assert result.returncode == 0, result.stderr[-3000:]
  blocks = (tmp_path / "out" / "predictions.txt").read_text().strip().split("\n\n")
  rows = [[line.split() for line in block.splitlines()] for block in blocks]
  sentences = [" ".join(r[0] for r in sentence) for sentence in rows]
  answers = scripts.run_python_json(TAG_SENTENCES, export_dir / "2", json.dumps(sentences),
                                    cwd=tmp_path)
  # Every sentence fits one window, so the export's tags are the runner's, word for word.
  assert answers["tags"][:len(rows)] == [[r[-1] for r in sentence] for sentence in rows]
  empty, long, accented = answers["tags"][len(rows):]
  assert empty == [] and len(long) == 500 and len(accented) == 2
  assert answers["id_tags"] == 3

  listed = saved_model_cli.signatures(export_dir / "2")
  ids = ("DT_INT32", "(-1, -1)")
  assert listed["serving_default"] == {
      "inputs": {"sentences": ("DT_STRING", "(-1)")},
      "outputs": {"words": ("DT_STRING", "(-1, -1)"), "tags": ("DT_STRING", "(-1, -1)")}}
  assert listed["predict_ids"] == {
      "inputs": {"input_ids": ids, "input_mask": ids, "segment_ids": ids},
      "outputs": {"tag_ids": ids, "tags": ("DT_STRING", "(-1, -1)")}}
