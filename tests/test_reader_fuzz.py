"""Every reader of a file users feed, fuzzed: for any bytes, parsed or one `UserError` naming the file.

The inputs are random bytes, random text, and near-valid documents: a valid file with bytes
inserted (delimiters, quotes, line ends, a byte-order mark, bytes that are not UTF-8, a long run
of digits, deep nesting), deleted, duplicated or cut off, or, for JSON, with a value replaced by
any JSON value or a key removed. The property, per reader: the read either returns or raises one
`errors.UserError` whose message is one line naming the file (and `file:line` where the reader
has lines); never another exception, never a hang.

Examples per reader are bounded so that the file runs in seconds (`make test-fast`). A longer
run: `HYPOTHESIS_PROFILE=reader-fuzz-long python -m pytest tests/test_reader_fuzz.py
--hypothesis-show-statistics` (2,000 examples per reader).
"""

import contextlib
import copy
import datetime
import json
import os
import re
import signal

import hypothesis
from hypothesis import strategies as st
import pytest

from base import errors
from data import delimited_files
from data import tokenization
from modeling import bert_config
from tasks.classification import reader as classification_reader
from tasks.encoder import features as encoder_features
from tasks.multiple_choice import reader as multiple_choice_reader
from tasks.ner import reader as ner_reader
from tasks.pretraining import writer as pretraining_writer
from tasks.squad import reader as squad_reader
from training import periodic_evaluation

# The suite's run is the same every time (derandomize); the long run explores.
hypothesis.settings.register_profile(
    "reader-fuzz", max_examples=40, deadline=datetime.timedelta(milliseconds=500),
    derandomize=True, suppress_health_check=[hypothesis.HealthCheck.too_slow,
                                             hypothesis.HealthCheck.data_too_large])
hypothesis.settings.register_profile("reader-fuzz-long", parent=hypothesis.settings.get_profile(
    "reader-fuzz"), max_examples=2000, derandomize=False)
# Not loaded globally: other test files keep hypothesis's defaults.
FUZZ = hypothesis.settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "reader-fuzz"))

# A read that takes this long is a hang (the deadline above flags slow reads; this stops them).
HANG_SECONDS = 10

# Bytes that break readers when dropped into a valid file.
_INSERTIONS = (b"\t", b",", b'"', b"\n", b"\r", b"\r\n", b"\n\n", b" ", b"\xef\xbb\xbf", b"\x00",
               b"\xff", b"\xc3", b"\xe2\x82", b"\\", b"{", b"}", b"[", b"]", b":", b"-", b"#",
               b"-DOCSTART-", b"B-", b"||| ", b"\xc2\xb2", b"NaN", b"Infinity", b"-1", b"1e400",
               b"1" * 4400, b"[" * 5000, b"[" * 900 + b"]" * 900, b'"\\ud800"',
               "\u2028".encode(), "\x85".encode())


class _Hang(AssertionError):
  """A read did not end within `HANG_SECONDS`."""


@contextlib.contextmanager
def _time_limit(seconds):
  """Fails the read inside if it runs longer than `seconds` (SIGALRM: the main thread only)."""
  def expire(signum, frame):
    raise _Hang(f"the read did not end within {seconds} s")
  previous = signal.signal(signal.SIGALRM, expire)
  signal.setitimer(signal.ITIMER_REAL, seconds)
  try:
    yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


# Errors about a whole file, which has no line to name.
_WHOLE_FILE_PROBLEMS = ("no such file", "holds no sentence", "vocab file is empty",
                        "vocab lacks required token")


def _read_or_refuse(read, path, line_numbers=False):
  """Runs `read()`: its result, or None when it raised a one-line `UserError` naming `path`.

  Any other exception (or a hang) propagates and fails the example. With `line_numbers`, the
  message names the line, as `path:<line>: ...` or `path: ... at line <line>`, unless it is about
  the whole file."""
  with _time_limit(HANG_SECONDS):
    try:
      return read()
    except errors.UserError as error:
      message = str(error)
      assert str(path) in message, message
      assert "\n" not in message, message
      if line_numbers:
        assert (re.search(re.escape(f"{path}:") + r"\d+: ", message)
                or re.search(r"\bline \d+\b", message)
                or any(problem in message for problem in _WHOLE_FILE_PROBLEMS)), message
      return None


@st.composite
def _byte_mutations(draw, seeds):
  """A valid document of `seeds` with one to four byte edits."""
  data = bytearray(draw(st.sampled_from(seeds)))
  for _ in range(draw(st.integers(1, 4))):
    position = draw(st.integers(0, len(data)))
    edit = draw(st.sampled_from(("insert", "insert", "delete", "duplicate", "truncate")))
    if edit == "insert":
      data[position:position] = draw(st.sampled_from(_INSERTIONS) | st.binary(min_size=1,
                                                                             max_size=4))
    elif edit == "delete":
      del data[position:position + draw(st.integers(1, 8))]
    elif edit == "duplicate":
      end = min(len(data), position + draw(st.integers(1, 40)))
      data[position:position] = data[position:end]
    else:
      del data[position:]
  return bytes(data)


# Values that pass a type check and fail a range check, or neither.
_EDGE_VALUES = (float("nan"), float("inf"), -1, 0, 10**30, "", " ", "\u00b2", "1e400", [], {})
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)
    | st.sampled_from(_EDGE_VALUES),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8),
                                                                    children, max_size=3),
    max_leaves=8)


def _json_slots(value):
  """Every `(container, key)` inside a parsed JSON value."""
  items = value.items() if isinstance(value, dict) else (
      enumerate(value) if isinstance(value, list) else ())
  for key, child in items:
    yield value, key
    yield from _json_slots(child)


@st.composite
def _json_mutations(draw, documents):
  """A valid JSON document of `documents` with one to three values replaced or keys removed."""
  document = copy.deepcopy(draw(st.sampled_from(documents)))
  for _ in range(draw(st.integers(1, 3))):
    slots = list(_json_slots(document))
    if not slots:
      break
    container, key = draw(st.sampled_from(slots))
    if isinstance(container, dict) and draw(st.booleans()):
      del container[key]
    else:
      container[key] = draw(_JSON_VALUES)
  return document


def _inputs(seeds, json_documents=None, json_lines=False):
  """Random bytes, random text, byte-mutated `seeds`, and (given) structure-mutated JSON."""
  strategies = [st.binary(max_size=300), st.text(max_size=200).map(str.encode),
                _byte_mutations(seeds)]
  if json_documents:
    dump = lambda document: json.dumps(document).encode()
    if json_lines:
      # Each line a document of which some are mutated.
      lines = st.lists(_json_mutations(json_documents).map(dump)
                       | st.sampled_from(json_documents).map(dump), min_size=1, max_size=4)
      strategies.append(lines.map(b"\n".join))
    else:
      strategies.append(_json_mutations(json_documents).map(dump))
  return st.one_of(strategies)


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
  """One directory for every example's file (each example overwrites its reader's file)."""
  return tmp_path_factory.mktemp("fuzz")


# ----- TSV / CSV -----

_TSV = b"sentence\tlabel\nit was great\tpos\nawful, just awful\tneg\n\nfine\tpos\n"
_CSV = b'review,stars\n"great, really",5\nbad,1\n"said ""no""",2\n'


@FUZZ
@hypothesis.given(data=_inputs([_TSV, _CSV]), dialect=st.sampled_from(
    [("\t", None, False), (",", '"', False), (",", '"', True)]))
def test_delimited_rows(fuzz_dir, data, dialect):
  path = fuzz_dir / "rows.txt"
  path.write_bytes(data)
  _read_or_refuse(lambda: list(delimited_files.read_rows(str(path), *dialect)), path,
                  line_numbers=True)


@FUZZ
@hypothesis.given(data=_inputs([_TSV, _CSV]), file_format=st.sampled_from(["tsv", "csv"]),
                  labelled=st.booleans())
def test_generic_classification_files(fuzz_dir, data, file_format, labelled):
  path = fuzz_dir / f"{'train' if labelled else 'test'}.{file_format}"
  path.write_bytes(data)
  columns = ("sentence", None, "label") if file_format == "tsv" else ("review", None, "stars")
  processor = classification_reader.GenericProcessor(file_format, *columns)
  read = processor.get_train_examples if labelled else processor.get_test_examples
  _read_or_refuse(lambda: processor.infer_labels(read(str(fuzz_dir))), path, line_numbers=True)


_GLUE_SEEDS = {
    "mrpc": b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA cat.\tThe cat.\n"
            b"0\t3\t4\tA dog.\tNo.\n",
    "cola": b"gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\n"
            b"gj04\t0\t*\tThe more we study verbs, the crazier they get.\n",
    "sts-b": b"index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\t"
             b"score\n0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane.\tA jet.\t"
             b"5.000\n",
    "mnli": b"index\tpromptID\tpairID\tgenre\tb1\tb2\tp1\tp2\tsentence1\tsentence2\tlabel1\t"
            b"gold_label\n0\t31193\t31193n\tgov\t(\t(\t(\t(\tA.\tB.\tneutral\tneutral\n",
}


@FUZZ
@hypothesis.given(data=st.data(), task=st.sampled_from(sorted(_GLUE_SEEDS)))
def test_glue_training_files(fuzz_dir, data, task):
  path = fuzz_dir / "train.tsv"
  path.write_bytes(data.draw(_inputs([_GLUE_SEEDS[task]]), label="file"))
  processor = classification_reader.glue_processors()[task]
  _read_or_refuse(lambda: processor.get_train_examples(str(fuzz_dir)), path, line_numbers=True)


# ----- CoNLL -----

_CONLL = (b"-DOCSTART- -X- O O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n"
          b"\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")


@FUZZ
@hypothesis.given(data=_inputs([_CONLL, b"Paris\tS-LOC\nis\tO\n\nRome\tS-LOC\n"]),
                  require_tags=st.booleans())
def test_conll_files(fuzz_dir, data, require_tags):
  path = fuzz_dir / "train.txt"
  path.write_bytes(data)
  _read_or_refuse(lambda: ner_reader.read_sentences(str(path), require_tags), path,
                  line_numbers=True)


# ----- SQuAD -----

_SQUAD = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
    "context": "The cat sat on the mat.",
    "qas": [{"id": "q1", "question": "Where?", "answers": [{"text": "the mat",
                                                            "answer_start": 15}],
             "is_impossible": False},
            {"id": "q2", "question": "Who?", "answers": [], "is_impossible": True}]}]}]}


@FUZZ
@hypothesis.given(data=_inputs([json.dumps(_SQUAD).encode()], [_SQUAD]),
                  is_training=st.booleans(), version_2=st.booleans())
def test_squad_files(fuzz_dir, data, is_training, version_2):
  path = fuzz_dir / "train.json"
  path.write_bytes(data)
  result = _read_or_refuse(lambda: squad_reader.read_examples(str(path), is_training, version_2),
                           path)
  if result is not None and is_training:
    # A training answer is a span of the context's words (-1 only for an unanswerable question).
    for example in result[0]:
      assert example.is_impossible or 0 <= example.start_position <= example.end_position


# ----- multiple choice -----

_CHOICES = [{"context": "He opened the", "choices": ["door", "sky"], "label": 0},
            {"context": "She ate", "choices": ["soup", "a car"], "label": 0}]
_SWAG_RECORDS = [{"sent1": "He sat down.", "sent2": "He", "ending0": "reads.", "ending1": "flies.",
                  "label": 0}]
_SWAG_CSV = (b"video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,"
             b"ending3,label\nv1,0,\"He sat, then\",He sat.,He,gold,reads.,flies.,runs.,sings.,0\n")


def _jsonl(records):
  return b"".join(json.dumps(record).encode() + b"\n" for record in records)


def _read_choices(fuzz_dir, name, data, form, labelled):
  """Writes `data` as `name` and reads it as multiple-choice examples of `form`."""
  path = fuzz_dir / name
  path.write_bytes(data)
  _read_or_refuse(lambda: multiple_choice_reader.read_examples(form, str(path), "train",
                                                               labelled),
                  path, line_numbers=True)


@FUZZ
@hypothesis.given(data=_inputs([_jsonl(_CHOICES)], _CHOICES, json_lines=True),
                  labelled=st.booleans())
def test_multiple_choice_json_lines(fuzz_dir, data, labelled):
  _read_choices(fuzz_dir, "train.jsonl", data, multiple_choice_reader.JSONL, labelled)


@FUZZ
@hypothesis.given(data=_inputs([_jsonl(_SWAG_RECORDS)], _SWAG_RECORDS, json_lines=True),
                  labelled=st.booleans())
def test_swag_json_lines(fuzz_dir, data, labelled):
  _read_choices(fuzz_dir, "train.jsonl", data, multiple_choice_reader.SWAG, labelled)


@FUZZ
@hypothesis.given(data=_inputs([_SWAG_CSV]), labelled=st.booleans())
def test_swag_csv(fuzz_dir, data, labelled):
  _read_choices(fuzz_dir, "train.csv", data, multiple_choice_reader.SWAG, labelled)


# ----- vocab, config -----

_VOCAB = b"[PAD]\n[unused0]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\nhello\n\xc3\xa9t\xc3\xa9\n"


@FUZZ
@hypothesis.given(data=_inputs([_VOCAB, b"\xef\xbb\xbf" + _VOCAB]))
def test_vocab_files(fuzz_dir, data):
  path = fuzz_dir / "vocab.txt"
  path.write_bytes(data)
  vocab = _read_or_refuse(lambda: tokenization.load_vocab(str(path)), path, line_numbers=True)
  if vocab is not None:
    assert set(tokenization.SPECIAL_TOKENS) <= set(vocab)


_CONFIG = {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 37, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
           "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64,
           "type_vocab_size": 2, "initializer_range": 0.02, "pooler_type": "first_token_transform"}


@FUZZ
@hypothesis.given(data=_inputs([json.dumps(_CONFIG, indent=2).encode()], [_CONFIG]))
def test_bert_config_files(fuzz_dir, data):
  path = fuzz_dir / "bert_config.json"
  path.write_bytes(data)
  config = _read_or_refuse(lambda: bert_config.BertConfig.from_json_file(str(path)), path)
  if config is not None:
    # What validation lets through can be computed with: no NaN or infinity.
    assert json.loads(config.to_json_string()) is not None
    assert all(value == value and value not in (float("inf"), float("-inf"))
               for value in config.to_dict().values() if isinstance(value, float))


# ----- the pretraining corpus, extract_features' input -----

_CORPUS = (b"The first sentence.\nThe second one.\n\nA new document \xe2\x80\x94 here.\n"
           b"text_a ||| text_b\n")


@FUZZ
@hypothesis.given(data=_inputs([_CORPUS]))
def test_text_corpora_are_always_read(fuzz_dir, data):
  # Plain text has no wrong bytes: undecodable ones become U+FFFD (counted), so no read fails.
  path = fuzz_dir / "corpus.txt"
  path.write_bytes(data)
  with _time_limit(HANG_SECONDS):
    documents = list(pretraining_writer.read_documents(str(path)))
    examples = list(encoder_features.read_examples(str(path)))
  assert all(line and line == line.strip() for document in documents for line in document)
  assert len(examples) == len(data.split(b"\n")) - (data.endswith(b"\n") or not data)


# ----- evaluation while training: best/best.json and eval_history.jsonl -----

_BEST = {"step": 10, "metric": "f1", "mode": "max", "value": 0.5, "checkpoint": "model.ckpt-10"}
_HISTORY = [{"step": 10, "metrics": {"f1": 0.5}, "seconds": 1.0},
            {"step": 20, "metrics": {"f1": 0.4}, "seconds": 1.5}]

def _evaluation_dir(root):
  """An output directory with the best checkpoint's index, so that best.json is read whole."""
  best_dir = root / "run" / periodic_evaluation.BEST_DIRNAME
  best_dir.mkdir(parents=True, exist_ok=True)
  (best_dir / "model.ckpt-10.index").write_bytes(b"")
  return root / "run"


def _resume(output_dir):
  """What a resumed run reads: the history, the best state, and the best checkpoint's prefix."""
  evaluation = periodic_evaluation.PeriodicEvaluation(
      str(output_dir), {}, periodic_evaluation.EvaluationConfig(every_steps=10, metric="f1"))
  evaluation.resume(step=15)
  return periodic_evaluation.recorded_best_prefix(str(output_dir), latest_step=30)


@FUZZ
@hypothesis.given(data=_inputs([json.dumps(_BEST).encode()], [_BEST]))
def test_best_state_files(fuzz_dir, data):
  output_dir = _evaluation_dir(fuzz_dir)
  (output_dir / periodic_evaluation.HISTORY_FILENAME).write_bytes(_jsonl(_HISTORY))
  path = output_dir / periodic_evaluation.BEST_DIRNAME / periodic_evaluation.BEST_STATE_FILENAME
  path.write_bytes(data)
  _read_or_refuse(lambda: _resume(output_dir), path)


@FUZZ
@hypothesis.given(data=_inputs([_jsonl(_HISTORY)], _HISTORY, json_lines=True))
def test_evaluation_history_files(fuzz_dir, data):
  output_dir = _evaluation_dir(fuzz_dir)
  best_path = output_dir / periodic_evaluation.BEST_DIRNAME / periodic_evaluation.BEST_STATE_FILENAME
  best_path.write_bytes(json.dumps(_BEST).encode())
  path = output_dir / periodic_evaluation.HISTORY_FILENAME
  path.write_bytes(data)
  _read_or_refuse(lambda: _resume(output_dir), path)
