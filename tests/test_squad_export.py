"""SQuAD export: in-graph answer offsets recover the runner's `final_text`, and an export loaded in
a fresh process answers as `run_squad.py --do_predict` did (v2.0 with null answers, v1.1 from the
checkpoint alone, ids-only without tensorflow-text)."""

import json
import re

import pytest
import tensorflow as tf

from data import graph_tokenization
from data import tokenization
from tasks.squad import features as squad_features
from tasks.squad import postprocessing as squad_postprocessing
from tasks.squad import reader as squad_reader
from tasks.squad import spans as squad_spans
from tests import saved_model_cli
from tests import scripts
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow

SAMPLE_TRAIN = SAMPLES_DIR / "squad" / "train.json"
SAMPLE_DEV = SAMPLES_DIR / "squad" / "dev.json"
# The sample vocab splits rare words into letters: sample contexts are up to 152 pieces with their
# question, so every dev question fits one window of 160.
MAX_SEQ_LENGTH, MAX_QUERY_LENGTH, N_BEST_SIZE = 160, 16, 5

HARD_CONTEXTS = [
    "Steve Smith's car (1895-1943) was RED; the U.S. team won 3-2.",
    "Caf\u00e9 Z\u00fcrich lies 5\u00a0km north; a soft\u00adhyphen and zero\u200bwidth here.",
    "e\u0301te\u0301 \u2603snow \u2603 and \u6771\u4eac tower \u00bd \u2026 end.",
    "\u0130stanbul \u039f\u0394\u039f\u03a3 and " + "x" * 201 + " after.",
    "no narrow space, \u00c9COLE and na\u00efve r\u00e9sum\u00e9s.",
]
SPACED_CONTEXT = "two  spaces\nand a\ttab\u202fnarrow"


def sample_contexts():
  dataset = json.loads(SAMPLE_DEV.read_text(encoding="utf-8"))
  return [paragraph["context"] for article in dataset["data"]
          for paragraph in article["paragraphs"]]


def normalized(text):
  return "".join(tokenization.BasicTokenizer(do_lower_case=True).tokenize(text))


def all_span_texts(vocab_file, contexts, max_pieces=12):
  """For every span of up to `max_pieces` context pieces: (context, runner's text, export's
  start, end)."""
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  info = squad_spans.context_pieces(graph_tokenization.GraphTokenizer(vocab_file, True),
                                    tf.constant(contexts))
  spans = []
  for row, context in enumerate(contexts):
    example = squad_reader.SquadExample("q", "", squad_reader.split_context(context)[0])
    feature, = squad_features.example_features(example, 0, tokenizer, 10000, 128, 64, False, 0)
    pieces = info["pieces"][row].numpy().tolist()
    # Context pieces follow [CLS] (empty question) [SEP] in the runner's window.
    assert feature.input_ids[2:2 + len(pieces)] == pieces and len(feature.tokens) == len(pieces) + 3
    pairs = [(s, e) for s in range(len(pieces)) for e in range(s, min(len(pieces), s + max_pieces))]
    window = {name: tf.RaggedTensor.from_tensor(tf.repeat(values[row:row + 1].to_tensor(),
                                                          len(pairs), axis=0))
              for name, values in info.items()}
    starts, ends = squad_spans.answer_offsets(window, tf.constant([s for s, _ in pairs]),
                                              tf.constant([e for _, e in pairs]))
    for (s, e), start, end in zip(pairs, starts.numpy(), ends.numpy()):
      runner = squad_postprocessing._span_text(example, feature, s + 2, e + 2, True)
      spans.append((context, runner, int(start), int(end)))
  return spans


def test_answer_offsets_recover_the_runners_final_text(sample_vocab):
  spans = all_span_texts(str(sample_vocab), sample_contexts() + HARD_CONTEXTS)
  differing = [(context, runner, context[start:end], start)
               for context, runner, start, end in spans if context[start:end] != runner]
  # The one documented difference these contexts hold: the runner takes the first occurrence of
  # the predicted fragment in the answer's first word ("##e" of "Ekberg" -> "E"): same normalised
  # text, found earlier in the word.
  for context, runner, export, start in differing:
    first_word_start = context.rfind(" ", 0, start) + 1
    assert normalized(runner) == normalized(export), (runner, export)
    assert first_word_start <= context.find(runner, first_word_start) < start, (runner, export)
  # Whole-word fall-backs: where the runner maps characters one for one, the offsets must too.
  texts = {runner for _, runner, _, _ in spans}
  assert {"5\u00a0km", "soft\u00adhyphen", "e\u0301te\u0301", "\u2603snow", "\u00c9COLE",
          "x" * 201, "\u6771\u4eac", "Smith's", "(1895-1943)"} <= texts


def test_answer_offsets_keep_the_contexts_whitespace(sample_vocab):
  for context, runner, start, end in all_span_texts(str(sample_vocab), [SPACED_CONTEXT]):
    # The runner joins the answer's words with one space; the export slices the context.
    assert runner == " ".join(context[start:end].split())


def squad_config(tiny_model, tmp_path_factory):
  vocab_file, config_file = tiny_model
  config = json.loads(open(config_file).read())
  config["max_position_embeddings"] = 192
  path = tmp_path_factory.mktemp("squad_model") / "bert_config.json"
  path.write_text(json.dumps(config))
  return vocab_file, str(path)


def run_squad(*flags):
  result = scripts.fine_tuning_runner("run_squad.py")(
      f"--max_seq_length={MAX_SEQ_LENGTH}", f"--max_query_length={MAX_QUERY_LENGTH}",
      "--doc_stride=64", f"--n_best_size={N_BEST_SIZE}", "--predict_batch_size=4", *flags)
  assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory):
  """run_squad.py trained on the v2.0 sample and predicting its dev file:
  `(vocab_file, config_file, output_dir, export_dir)`."""
  vocab_file, config_file = squad_config(tiny_model, tmp_path_factory)
  root = tmp_path_factory.mktemp("squad_export")
  run_squad(f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
            f"--output_dir={root / 'out'}", "--do_train", f"--train_file={SAMPLE_TRAIN}",
            "--do_predict", f"--predict_file={SAMPLE_DEV}", "--version_2_with_negative",
            "--train_batch_size=8", "--num_train_epochs=2", "--learning_rate=1e-3")
  return vocab_file, config_file, root / "out", root / "export"


ASK = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the in-graph tokenizer's ops)
model = tf.saved_model.load(sys.argv[1])
request = json.loads(sys.argv[2])
def listed(outputs):
  return {name: [x.decode("utf-8") if isinstance(x, bytes) else x for x in value.numpy().tolist()]
          for name, value in outputs.items()}
text = model.signatures["serving_default"](question=tf.constant(request["questions"]),
                                           context=tf.constant(request["contexts"]))
ids = model.signatures["predict_ids"](**{k: tf.constant(v) for k, v in request["ids"].items()})
contexts = [b"", ("word " * 2000).encode(), b"caf\xc3\xa9 \xff\xfe bar", b"a short one", b" \t "]
questions = [b"", b"what?", b"\xff\xfe", ("what " * 100).encode(), b"x"]
bad = model.signatures["serving_default"](question=tf.constant(questions),
                                          context=tf.constant(contexts))
print(json.dumps({"text": listed(text), "ids": listed(ids), "bad": listed(bad),
                  "bad_contexts": [c.decode("utf-8", "replace") for c in contexts]}))
"""


def ask_export(path, questions, contexts, features):
  """serving_default on the questions, predict_ids on the runner's windows, and a batch of bad
  input, from a fresh process."""
  request = {"questions": questions, "contexts": contexts,
             "ids": {name: [getattr(f, name) for f in features]
                     for name in ("input_ids", "input_mask", "segment_ids")}}
  return dict(scripts.run_python_json(ASK, path, json.dumps(request)), request=request)


def check_answers_as_the_runner(vocab_file, predict_file, output_dir, export_path,
                                version_2_with_negative, null_score_diff_threshold=0.0):
  """The export's answers, offsets, logits and null score differences against the runner's files
  for every question of `predict_file` (each fits one window)."""
  examples, articles = squad_reader.read_examples(predict_file, False, version_2_with_negative)
  tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
  features = list(squad_features.convert_examples(examples, tokenizer, MAX_SEQ_LENGTH, 64,
                                                  MAX_QUERY_LENGTH, False))
  assert len(features) == len(examples)  # one window each
  contexts = {qa["id"]: paragraph["context"] for article in articles
              for paragraph in article["paragraphs"] for qa in paragraph["qas"]}
  context_list = [contexts[e.qas_id] for e in examples]
  out = ask_export(export_path, [e.question_text for e in examples], context_list, features)
  text, ids = out["text"], out["ids"]
  predictions = json.loads((output_dir / "predictions.json").read_text())
  nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
  assert text["answer"] == [predictions[e.qas_id] for e in examples]
  for row, (example, feature) in enumerate(zip(examples, features)):
    length = len(feature.tokens)
    start_logits, end_logits = text["start_logits"][row], text["end_logits"][row]
    for got, want in ((start_logits, ids["start_logits"][row]),
                      (end_logits, ids["end_logits"][row])):
      assert got[:length] == pytest.approx(want[:length], abs=1e-5)
    # The runner's n-best list again from the export's logits: same texts, logits within 1e-5.
    _, entries, _ = squad_postprocessing.predict_example(
        example, [feature], [(start_logits, end_logits)], n_best_size=N_BEST_SIZE,
        max_answer_length=30, do_lower_case=True,
        version_2_with_negative=version_2_with_negative,
        null_score_diff_threshold=null_score_diff_threshold)
    runner_entries = nbest[example.qas_id]
    assert [e["text"] for e in entries] == [e["text"] for e in runner_entries]
    for entry, runner_entry in zip(entries, runner_entries):
      assert entry["start_logit"] == pytest.approx(runner_entry["start_logit"], abs=1e-5)
      assert entry["end_logit"] == pytest.approx(runner_entry["end_logit"], abs=1e-5)
    start, end = text["answer_start"][row], text["answer_end"][row]
    if text["answer"][row] in ("", "empty"):
      assert (start, end) == (-1, -1)
    else:
      assert context_list[row][start:end] == text["answer"][row]
  if version_2_with_negative:
    null_odds = json.loads((output_dir / "null_odds.json").read_text())
    assert text["null_score_diff"] == pytest.approx([null_odds[e.qas_id] for e in examples],
                                                    abs=1e-5)
  else:
    assert "null_score_diff" not in text
  bad = out["bad"]
  assert len(bad["answer"]) == 5
  for context, answer, start, end in zip(out["bad_contexts"], bad["answer"], bad["answer_start"],
                                         bad["answer_end"]):
    assert context[start:end] == answer if start >= 0 else answer in ("", "empty")
  assert len(bad["start_logits"][1]) == MAX_SEQ_LENGTH  # the 2,000-word context: one window
  return out


def test_v2_export_answers_as_the_runner(trained):
  vocab_file, config_file, output_dir, export_dir = trained
  # A threshold in the middle of the null score differences, so that some answers are null: in
  # the widest gap between two of them (far from both, so rounding cannot tip either side).
  null_odds = sorted(json.loads((output_dir / "null_odds.json").read_text()).values())
  middle = range(len(null_odds) // 4, 3 * len(null_odds) // 4)
  below = max(middle, key=lambda i: null_odds[i + 1] - null_odds[i])
  threshold = (null_odds[below] + null_odds[below + 1]) / 2
  run_squad(f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
            f"--output_dir={output_dir}", "--do_predict", f"--predict_file={SAMPLE_DEV}",
            "--version_2_with_negative", f"--null_score_diff_threshold={threshold!r}",
            f"--export_dir={export_dir}", "--export_version=1")
  assert sorted(p.name for p in export_dir.iterdir()) == ["1"]
  assert (export_dir / "1" / "assets" / "vocab.txt").read_text() == open(vocab_file).read()
  out = check_answers_as_the_runner(vocab_file, SAMPLE_DEV, output_dir, export_dir / "1",
                                    version_2_with_negative=True,
                                    null_score_diff_threshold=threshold)
  answers = out["text"]["answer"]
  assert "" in answers and any(answers)
  # The same through saved_model_cli run (--input_exprs splits at ";"), a span answer if any.
  rows = [row for row, context in enumerate(out["request"]["contexts"]) if ";" not in context]
  row = max(rows, key=lambda row: bool(answers[row]))
  question, context = out["request"]["questions"][row], out["request"]["contexts"][row]
  output = saved_model_cli.run(
      "run", "--dir", export_dir / "1", "--tag_set", "serve", "--signature_def",
      "serving_default", "--input_exprs",
      f"question=[{json.dumps(question)}];context=[{json.dumps(context)}]", with_text_ops=True)
  printed = re.search(r"Result for output key answer:\s+\[b(['\"])(.*?)\1\]", output)
  assert printed, output
  assert printed.group(2) == answers[row]

  listed = saved_model_cli.signatures(export_dir / "1")
  ids, logits, text = ("DT_INT32", "(-1, -1)"), ("DT_FLOAT", "(-1, -1)"), ("DT_STRING", "(-1)")
  assert listed["serving_default"] == {
      "inputs": {"question": text, "context": text},
      "outputs": {"answer": text, "answer_start": ("DT_INT32", "(-1)"),
                  "answer_end": ("DT_INT32", "(-1)"), "null_score_diff": ("DT_FLOAT", "(-1)"),
                  "start_logits": logits, "end_logits": logits}}
  assert listed["predict_ids"] == {
      "inputs": {"input_ids": ids, "input_mask": ids, "segment_ids": ids},
      "outputs": {"start_logits": logits, "end_logits": logits}}


IDS_ONLY = r"""
import json, sys
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
assert list(model.signatures) == ["predict_ids"], list(model.signatures)
outputs = [model.signatures["predict_ids"](**{k: tf.constant(v) for k, v in ids.items()})
           for ids in json.loads(sys.argv[2])]
assert "tensorflow_text" not in sys.modules
print(json.dumps([{k: v.numpy().tolist() for k, v in out.items()} for out in outputs]))
"""


def test_v1_export_from_a_checkpoint_alone_and_ids_only(trained, tmp_path):
  vocab_file, config_file, trained_dir, export_dir = trained
  dataset = json.loads(SAMPLE_DEV.read_text(encoding="utf-8"))
  for article in dataset["data"]:
    for paragraph in article["paragraphs"]:
      paragraph["qas"] = [qa for qa in paragraph["qas"] if not qa["is_impossible"]]
  dataset["version"] = "1.1"
  answerable = tmp_path / "answerable.json"
  answerable.write_text(json.dumps(dataset), encoding="utf-8")
  model_flags = [f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
                 f"--export_dir={export_dir}"]
  # v1.1 prediction and export warm-started from the trained checkpoint (--init_checkpoint).
  run_squad(*model_flags, f"--init_checkpoint={trained_dir}", f"--output_dir={tmp_path / 'v1'}",
            "--do_predict", f"--predict_file={answerable}", "--export_version=2")
  out = check_answers_as_the_runner(vocab_file, answerable, tmp_path / "v1", export_dir / "2",
                                    version_2_with_negative=False)
  assert all(out["text"]["answer"])

  # The ids-only export from the checkpoint in --output_dir, nothing else asked for.
  run_squad(*model_flags, f"--output_dir={trained_dir}", "--export_version=3",
            "--export_ids_only")
  assert b"Wordpiece" not in (export_dir / "3" / "saved_model.pb").read_bytes()
  small = {"input_ids": [[2, 7, 3, 9, 3, 0]], "input_mask": [[1, 1, 1, 1, 1, 0]],
           "segment_ids": [[0, 0, 0, 1, 1, 0]]}
  same_ids, small_logits = scripts.run_python_json(
      IDS_ONLY, export_dir / "3", json.dumps([out["request"]["ids"], small]))
  for name in ("start_logits", "end_logits"):
    for got, want in zip(same_ids[name], out["ids"][name]):
      assert got == pytest.approx(want, abs=1e-5)
  # saved_model_cli run loads it the TF1 way, as TensorFlow Serving does.
  expressions = ";".join(f"{name}={value}" for name, value in small.items())
  output = saved_model_cli.run("run", "--dir", export_dir / "3", "--tag_set", "serve",
                           "--signature_def", "predict_ids", "--input_exprs",
                           expressions.replace(" ", ""))
  printed = re.search(r"Result for output key start_logits:\s+\[\[([^\]]+)\]\]", output)
  assert printed, output
  assert [float(x) for x in printed.group(1).split()] == pytest.approx(
      small_logits["start_logits"][0], abs=1e-5)
