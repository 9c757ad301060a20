"""SQuAD reading, windowing and answer recovery (the original's run_squad rules), with the real
uncased vocab: contexts longer than a window, max-context, text recovered from the context."""

import json

import pytest

from data import file_patterns
from data import tokenization
from tasks.squad import features as squad_features
from tasks.squad import postprocessing as squad_postprocessing
from tasks.squad import reader as squad_reader


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
  return tokenization.FullTokenizer(str(minilm_dir / "vocab.txt"), do_lower_case=True)


def write_squad(tmp_path, context, qas, version="v2.0", name="squad.json"):
  path = tmp_path / name
  path.write_text(json.dumps({"version": version, "data": [
      {"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}), encoding="utf-8")
  return str(path)


def qa(qas_id, question, context, answer, impossible=False):
  answers = [] if impossible else [{"text": answer, "answer_start": context.index(answer)}]
  return {"id": qas_id, "question": question, "answers": answers, "is_impossible": impossible}


def test_split_context_maps_characters_to_words():
  tokens, offsets = squad_reader.split_context(" Ab  c\u202fd.\n")
  assert tokens == ["Ab", "c", "d."]
  assert offsets == [-1, 0, 0, 0, 0, 1, 1, 2, 2, 2]


def test_doc_spans_advance_by_the_stride_and_end_at_the_last_piece():
  spans = squad_features.doc_spans(10, max_tokens_for_doc=4, doc_stride=3)
  assert [(s.start, s.length) for s in spans] == [(0, 4), (3, 4), (6, 4)]
  spans = squad_features.doc_spans(11, max_tokens_for_doc=4, doc_stride=3)
  assert [(s.start, s.length) for s in spans] == [(0, 4), (3, 4), (6, 4), (9, 2)]
  assert [(s.start, s.length) for s in squad_features.doc_spans(3, 4, 3)] == [(0, 3)]


def test_max_context_prefers_the_window_centred_on_the_piece():
  spans = squad_features.doc_spans(10, max_tokens_for_doc=6, doc_stride=2)
  assert [(s.start, s.length) for s in spans] == [(0, 6), (2, 6), (4, 6)]
  # Piece 4: window 0 has 4 left / 1 right (score 1.06), window 1 2 / 3 (2.06), window 2 0 / 5
  # (0.06): window 1 scores it.
  assert [squad_features.is_max_context(spans, i, 4) for i in range(3)] == [False, True, False]
  # Piece 3: windows 0 (3/2 -> 2.06) and 1 (1/4 -> 1.06): window 0.
  assert [squad_features.is_max_context(spans, i, 3) for i in range(3)] == [True, False, False]
  # Piece 0 is only in window 0.
  assert squad_features.is_max_context(spans, 0, 0)


def test_improve_answer_span_finds_the_answer_inside_a_longer_word(tokenizer):
  pieces = tokenizer.tokenize("the years ( 1895 - 1943 ) .")
  start, end = squad_features.improve_answer_span(pieces, 2, 6, tokenizer, "1895")
  assert pieces[start:end + 1] == ["1895"]


LONG_CONTEXT = (
    "The old harbour was dredged every spring so that the fishing fleet could come in. " * 6
    + "In 1895 the composer Antonín Dvořák (1841–1904) visited the town, and the café "
    "\u201cZur Linde\u201d still shows his chair. "
    + "Trade moved to the railway after the bridge was finished in the autumn of 1902. " * 6)


def features_of(tokenizer, path, is_training, max_seq_length=48, doc_stride=16):
  examples, _ = squad_reader.read_examples(path, is_training, version_2_with_negative=True)
  features = list(squad_features.convert_examples(examples, tokenizer, max_seq_length,
                                                  doc_stride, max_query_length=12,
                                                  is_training=is_training))
  return examples, features


def test_windows_of_a_long_context_cover_every_piece_once_with_max_context(tokenizer, tmp_path):
  question = "Who visited the town?"
  path = write_squad(tmp_path, LONG_CONTEXT, [qa("q1", question, LONG_CONTEXT, "Antonín Dvořák")])
  examples, features = features_of(tokenizer, path, is_training=True)
  query = tokenizer.tokenize(question)
  doc_pieces = [p for word in examples[0].doc_tokens for p in tokenizer.tokenize(word)]
  assert len(doc_pieces) > 48 and len(features) > 5
  spans = squad_features.doc_spans(len(doc_pieces), 48 - len(query) - 3, 16)
  assert len(features) == len(spans)
  times_scored = [0] * len(doc_pieces)
  for feature, span in zip(features, spans):
    assert len(feature.input_ids) == len(feature.input_mask) == len(feature.segment_ids) == 48
    assert feature.tokens == ["[CLS]", *query, "[SEP]",
                              *doc_pieces[span.start:span.start + span.length], "[SEP]"]
    assert feature.segment_ids[:len(feature.tokens)] == (
        [0] * (len(query) + 2) + [1] * (len(feature.tokens) - len(query) - 2))
    assert feature.input_mask == [1] * len(feature.tokens) + [0] * (48 - len(feature.tokens))
    for position, is_max in feature.token_is_max_context.items():
      times_scored[span.start + position - (len(query) + 2)] += is_max
  assert times_scored == [1] * len(doc_pieces)


def test_answer_positions_point_at_the_answer_pieces_or_cls(tokenizer, tmp_path):
  answer = "Antonín Dvořák"
  path = write_squad(tmp_path, LONG_CONTEXT, [qa("q1", "Who visited?", LONG_CONTEXT, answer)])
  _, features = features_of(tokenizer, path, is_training=True)
  holding = [f for f in features if f.start_position != 0]
  assert holding, "no window holds the answer"
  for feature in holding:
    assert feature.tokens[feature.start_position:feature.end_position + 1] == (
        tokenizer.tokenize(answer))
  for feature in features:
    if feature not in holding:
      assert (feature.start_position, feature.end_position) == (0, 0)


def test_unanswerable_questions_point_at_cls(tokenizer, tmp_path):
  path = write_squad(tmp_path, LONG_CONTEXT, [qa("q1", "Why?", LONG_CONTEXT, None, True)])
  _, features = features_of(tokenizer, path, is_training=True)
  assert all((f.start_position, f.end_position, f.is_impossible) == (0, 0, True)
             for f in features)


def logits_for(feature, start, end, length=48):
  """Logits that make (start, end) the best span of this window, everything else far lower."""
  start_logits = [-5.0] * length
  end_logits = [-5.0] * length
  start_logits[start] = 5.0
  end_logits[end] = 4.0
  return start_logits, end_logits


@pytest.mark.parametrize("answer", [
    "Antonín Dvořák",  # accents stripped in the pieces, kept in the answer
    "1841",  # inside "(1841–1904)": brackets and the dash dropped
    "\u201cZur Linde\u201d",  # quotes recovered around the words
    "café",
])
def test_recovered_text_is_the_original_span(tokenizer, tmp_path, answer):
  path = write_squad(tmp_path, LONG_CONTEXT, [qa("q1", "What?", LONG_CONTEXT, answer)])
  _, train_features = features_of(tokenizer, path, is_training=True)
  examples, features = features_of(tokenizer, path, is_training=False)
  # The predicting windows are the training windows; make the max-context one holding the answer
  # predict it, and every other window predict [CLS].
  results = {}
  for train_feature, feature in zip(train_features, features, strict=True):
    start, end = train_feature.start_position, train_feature.end_position
    if start and feature.token_is_max_context[start]:
      results[feature.unique_id] = logits_for(feature, start, end)
    else:
      results[feature.unique_id] = logits_for(feature, 0, 0)
  predictions, nbest, null_odds = squad_postprocessing.predict_all(
      examples, features, results, n_best_size=5, max_answer_length=30, do_lower_case=True,
      version_2_with_negative=False, null_score_diff_threshold=0.0)
  assert predictions == {"q1": answer}
  assert nbest["q1"][0]["text"] == answer
  assert sum(entry["probability"] for entry in nbest["q1"]) == pytest.approx(1.0)
  assert null_odds == {}


def test_a_span_is_taken_only_from_the_window_that_scores_its_start(tokenizer, tmp_path):
  answer = "Antonín Dvořák"
  path = write_squad(tmp_path, LONG_CONTEXT, [qa("q1", "Who?", LONG_CONTEXT, answer)])
  _, train_features = features_of(tokenizer, path, is_training=True)
  examples, features = features_of(tokenizer, path, is_training=False)
  holding = [(t, f) for t, f in zip(train_features, features) if t.start_position]
  assert len(holding) >= 2, "the test needs the answer in two windows"
  results = {f.unique_id: logits_for(f, 0, 0) for f in features}
  # Only windows that do not score the answer's start point at it: the answer must not be taken.
  for train_feature, feature in holding:
    if not feature.token_is_max_context[train_feature.start_position]:
      results[feature.unique_id] = logits_for(feature, train_feature.start_position,
                                              train_feature.end_position)
  predictions, _, _ = squad_postprocessing.predict_all(
      examples, features, results, n_best_size=3, max_answer_length=30, do_lower_case=True,
      version_2_with_negative=False, null_score_diff_threshold=0.0)
  assert predictions["q1"] != answer


def test_null_answer_and_threshold_for_v2(tokenizer, tmp_path):
  context = "Bees make honey from nectar."
  path = write_squad(tmp_path, context, [qa("q1", "What do bees make?", context, "honey")])
  examples, features = features_of(tokenizer, path, is_training=False)
  (feature,) = features
  honey = feature.tokens.index("honey")
  start_logits, end_logits = logits_for(feature, honey, honey)
  start_logits[0], end_logits[0] = 6.0, 5.0  # null score 11 > span score 9
  options = dict(n_best_size=5, max_answer_length=30, do_lower_case=True,
                 version_2_with_negative=True)
  results = {feature.unique_id: (start_logits, end_logits)}
  predictions, nbest, null_odds = squad_postprocessing.predict_all(
      examples, features, results, null_score_diff_threshold=0.0, **options)
  assert predictions == {"q1": ""}
  assert null_odds["q1"] == pytest.approx(2.0)
  assert [entry["text"] for entry in nbest["q1"]][:2] == ["", "honey"]
  predictions, _, _ = squad_postprocessing.predict_all(
      examples, features, results, null_score_diff_threshold=2.5, **options)
  assert predictions == {"q1": "honey"}


def test_long_answers_and_reversed_spans_are_dropped(tokenizer, tmp_path):
  context = "one two three four five six seven eight"
  path = write_squad(tmp_path, context, [qa("q1", "Which?", context, "two")])
  examples, features = features_of(tokenizer, path, is_training=False)
  (feature,) = features
  position = {word: feature.tokens.index(word) for word in context.split()}
  start_logits, end_logits = [-5.0] * 48, [-5.0] * 48
  start_logits[position["two"]] = 5.0
  end_logits[position["one"]] = 6.0  # "two" .. "one" ends before it starts: 11, dropped
  end_logits[position["eight"]] = 4.0  # "two" .. "eight" is 7 pieces, over 3: 9, dropped
  end_logits[position["three"]] = 1.0  # "two three": 6, the best valid span
  predictions, nbest, _ = squad_postprocessing.predict_all(
      examples, features, {feature.unique_id: (start_logits, end_logits)}, n_best_size=4,
      max_answer_length=3, do_lower_case=True, version_2_with_negative=False,
      null_score_diff_threshold=0.0)
  assert predictions["q1"] == "two three"
  assert nbest["q1"][0]["start_logit"] + nbest["q1"][0]["end_logit"] == 6.0


def test_reader_errors_name_the_file_and_question(tmp_path):
  bad_json = tmp_path / "bad.json"
  bad_json.write_text('{"version": "v2.0", "data": [', encoding="utf-8")
  with pytest.raises(file_patterns.InputError, match=r"bad\.json: not valid JSON"):
    squad_reader.read_examples(str(bad_json), True, True)
  no_version = tmp_path / "no_version.json"
  no_version.write_text('{"data": []}', encoding="utf-8")
  with pytest.raises(file_patterns.InputError, match=r"no_version\.json: no 'version'"):
    squad_reader.read_examples(str(no_version), False, False)
  no_data = tmp_path / "no_data.json"
  no_data.write_text('{"version": "1.1"}', encoding="utf-8")
  with pytest.raises(file_patterns.InputError, match=r"no_data\.json: no 'data'"):
    squad_reader.read_examples(str(no_data), False, False)
  context = "Bees make honey."
  moved = {"id": "q7", "question": "What?", "answers": [{"text": "honey", "answer_start": 3}]}
  path = write_squad(tmp_path, context, [moved])
  with pytest.raises(file_patterns.InputError,
                     match=r"squad\.json: question 'q7': answer 'honey' is not at answer_start 3"):
    squad_reader.read_examples(path, True, False)
  # Prediction does not use the offsets.
  examples, _ = squad_reader.read_examples(path, False, False)
  assert examples[0].qas_id == "q7"
  impossible = write_squad(tmp_path, context, [qa("q8", "Why?", context, None, True)], name="i.json")
  with pytest.raises(file_patterns.InputError, match="q8.*--version_2_with_negative"):
    squad_reader.read_examples(impossible, True, False)


@pytest.mark.parametrize("content, message", [
    # json.load raised RecursionError and a bare ValueError for these (found by fuzzing).
    (b"[" * 5000, "not valid JSON: arrays or objects nested too deeply"),
    (b'{"version": ' + b"1" * 5000 + b"}", "not valid JSON: a number of more than 4300 digits"),
    (b'{"version": "v2.0",\n "data": ["caf\xe9"]}',
     "not valid JSON: not UTF-8 text at line 2 (invalid continuation byte at byte 34)"),
])
def test_json_that_python_cannot_read_is_named_in_one_line(tmp_path, content, message):
  path = tmp_path / "bad.json"
  path.write_bytes(content)
  with pytest.raises(file_patterns.InputError) as error:
    squad_reader.read_examples(str(path), True, True)
  assert str(error.value) == f"{path}: {message}"


def test_an_answer_of_whitespace_alone_is_skipped_not_trained_on_word_minus_one(tmp_path):
  context = "Bees make honey."
  record = {"id": "q1", "question": "What?", "answers": [{"text": " ", "answer_start": 4}]}
  examples, _ = squad_reader.read_examples(write_squad(tmp_path, context, [record]), True, False)
  assert examples == []


def test_training_reads_the_first_of_several_answers(tmp_path):
  context = "Bees make honey from nectar."
  record = {"id": "q1", "question": "What?", "answers": [
      {"text": "honey", "answer_start": 10}, {"text": "honey from nectar", "answer_start": 10}]}
  (example,), _ = squad_reader.read_examples(write_squad(tmp_path, context, [record]), True,
                                             False)
  assert (example.orig_answer_text, example.start_position, example.end_position) == (
      "honey", 2, 2)


def test_reads_the_real_squad_v2_file(shared_data):
  path = shared_data / "squad/squad-v2.0-16-articles.json"
  if not path.is_file():
    pytest.skip(f"{path} is absent")
  examples, articles = squad_reader.read_examples(str(path), True, True)
  assert len(articles) == 16
  assert len(examples) == 6078
  assert sum(e.is_impossible for e in examples) == 3168
  for example in examples[:200]:
    if not example.is_impossible:
      words = " ".join(example.doc_tokens[example.start_position:example.end_position + 1])
      assert " ".join(example.orig_answer_text.split()) in words
