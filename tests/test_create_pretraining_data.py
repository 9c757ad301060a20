"""create_pretraining_data.py: schema, invariants, statistics, determinism, bad input."""

import collections
import json
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data import pretraining_instances
from data import schemas
from data import tokenization
from data import wikitext
from tests.conftest import REPO_ROOT
from tests.conftest import SAMPLES_DIR

MAX_SEQ_LENGTH = 64
MAX_PREDICTIONS = 10


def run_script(*flags):
  return subprocess.run([sys.executable, str(REPO_ROOT / "create_pretraining_data.py"), *flags],
                        capture_output=True, text=True, cwd=REPO_ROOT)


def read_records(paths, compression_type=None):
  spec = schemas.pretraining_feature_spec(MAX_SEQ_LENGTH, MAX_PREDICTIONS)
  columns = collections.defaultdict(list)
  for record in tf.data.TFRecordDataset([str(p) for p in paths],
                                        compression_type=compression_type):
    for name, value in tf.io.parse_single_example(record, spec).items():
      columns[name].append(value.numpy())
  return {name: np.stack(values) for name, values in columns.items()}


def create(tmp_path, vocab, *extra, inputs=None, outputs=("out.tfrecord",)):
  output_paths = [tmp_path / name for name in outputs]
  result = run_script(f"--input_file={inputs or SAMPLES_DIR / 'sample_corpus.txt'}",
                      "--output_file=" + ",".join(str(p) for p in output_paths),
                      f"--vocab_file={vocab}", f"--max_seq_length={MAX_SEQ_LENGTH}",
                      f"--max_predictions_per_seq={MAX_PREDICTIONS}", "--dupe_factor=2",
                      "--num_workers=1", *extra)
  assert result.returncode == 0, result.stderr[-3000:]
  return output_paths


def test_records_have_the_original_schema_and_invariants(tmp_path, sample_vocab):
  outputs = create(tmp_path, sample_vocab, outputs=("a.tfrecord", "b.tfrecord"))
  vocab = tokenization.load_vocab(sample_vocab)
  cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
  # Exactly the original's seven features, with its types and lengths.
  first_record = next(iter(tf.data.TFRecordDataset(str(outputs[0])))).numpy()
  example = tf.train.Example.FromString(first_record)
  kinds = {name: feature.WhichOneof("kind") for name, feature in example.features.feature.items()}
  assert kinds == {"input_ids": "int64_list", "input_mask": "int64_list",
                   "segment_ids": "int64_list", "masked_lm_positions": "int64_list",
                   "masked_lm_ids": "int64_list", "masked_lm_weights": "float_list",
                   "next_sentence_labels": "int64_list"}
  sizes = [sum(1 for _ in tf.data.TFRecordDataset(str(p))) for p in outputs]
  assert abs(sizes[0] - sizes[1]) <= 1  # round-robin over the outputs

  records = read_records(outputs)
  stats = json.loads((tmp_path / "a.tfrecord.stats.json").read_text())
  assert stats["instances"] == len(records["input_ids"]) == sum(sizes)
  for ids, mask, segments, positions, labels, weights in zip(
      records["input_ids"], records["input_mask"], records["segment_ids"],
      records["masked_lm_positions"], records["masked_lm_ids"], records["masked_lm_weights"]):
    length = int(mask.sum())
    assert 5 <= length <= MAX_SEQ_LENGTH
    assert (mask[:length] == 1).all() and (mask[length:] == 0).all()
    num_predictions = int(weights.sum())
    # A random replacement can be any id, [SEP] included (as the original): check the layout on
    # the sequence before masking.
    original = ids.copy()
    original[positions[:num_predictions]] = labels[:num_predictions]
    assert (ids[length:] == 0).all() and ids[0] == cls_id and ids[length - 1] == sep_id
    seps = np.flatnonzero(original[:length] == sep_id)
    assert len(seps) == 2 and 1 < seps[0] < length - 2  # A and B each hold a token
    assert (segments[:seps[0] + 1] == 0).all() and (segments[seps[0] + 1:length] == 1).all()
    assert (segments[length:] == 0).all()
    assert num_predictions == min(MAX_PREDICTIONS, max(1, round(length * 0.15)))
    assert set(weights[:num_predictions]) == {1.0} and not weights[num_predictions:].any()
    real_positions = positions[:num_predictions]
    assert (np.diff(real_positions) > 0).all()  # sorted, distinct
    assert (real_positions > 0).all() and (real_positions < length).all()
    assert not np.isin(real_positions, seps).any()
    assert (positions[num_predictions:] == 0).all() and (labels[num_predictions:] == 0).all()
    assert (labels[:num_predictions] != cls_id).all() and (labels[:num_predictions] != sep_id).all()
  assert set(records["next_sentence_labels"].ravel()) == {0, 1}


def test_same_seed_gives_identical_bytes_for_any_worker_count_and_another_seed_differs(
    tmp_path, sample_vocab):
  (tmp_path / "one").mkdir()
  (tmp_path / "two").mkdir()
  (tmp_path / "seed").mkdir()
  sharded = ("--shard_documents=3",)
  one = create(tmp_path / "one", sample_vocab, *sharded)[0].read_bytes()
  two = create(tmp_path / "two", sample_vocab, *sharded, "--num_workers=2")[0].read_bytes()
  other = create(tmp_path / "seed", sample_vocab, *sharded, "--random_seed=7")[0].read_bytes()
  assert one == two
  assert one != other


def test_gzip_output_reads_back_with_gzip(tmp_path, sample_vocab):
  output = create(tmp_path, sample_vocab, "--gzip")[0]
  assert output.read_bytes()[:2] == b"\x1f\x8b"
  assert len(read_records([output], compression_type="GZIP")["input_ids"]) > 100


def test_whole_word_masking_masks_whole_words_only(tmp_path, sample_vocab):
  output = create(tmp_path, sample_vocab, "--do_whole_word_mask=true", "--dupe_factor=4")[0]
  records = read_records([output])
  vocab = tokenization.load_vocab(sample_vocab)
  continuation = np.array([t.startswith("##") for t in sorted(vocab, key=vocab.get)])
  special = {vocab["[CLS]"], vocab["[SEP]"]}
  multi_piece_words_masked = 0
  for ids, mask, positions, labels, weights in zip(
      records["input_ids"], records["input_mask"], records["masked_lm_positions"],
      records["masked_lm_ids"], records["masked_lm_weights"]):
    original = ids.copy()
    count = int(weights.sum())
    original[positions[:count]] = labels[:count]
    masked = np.zeros(len(ids), bool)
    masked[positions[:count]] = True
    # A word is a piece plus the `##` pieces after it: all masked or none. (A `##` piece right
    # after [SEP], left by front truncation of B, joins A's last word in the original.)
    for index in range(1, int(mask.sum())):
      if continuation[original[index]] and original[index - 1] not in special:
        assert masked[index] == masked[index - 1], (original, positions[:count])
        multi_piece_words_masked += masked[index]
  assert multi_piece_words_masked > 20


def test_pieces_of_a_word_are_masked_separately_without_whole_word_masking():
  special = pretraining_instances.SpecialIds(cls_id=0, sep_id=1, mask_id=2, vocab_size=10,
                                             is_continuation=[False] * 5 + [True] * 5)
  ids = [0] + [3, 5, 6, 7, 8, 9] * 5 + [1, 4, 1]
  split_words = 0
  for seed in range(50):
    _, positions, _, _ = pretraining_instances.create_masked_lm_predictions(
        ids, 0.15, 20, special, False, random.Random(seed))
    masked = set(positions)
    split_words += any((p in masked) != (p - 1 in masked) and special.is_continuation[ids[p]]
                       for p in range(2, len(ids) - 2))
  assert split_words > 25


@pytest.fixture(scope="module")
def wikitext_stats(shared_data, tmp_path_factory, uncased_vocab):
  source = shared_data / "pretraining" / "wikitext-2-valid.tokens.txt"
  if not source.is_file():
    pytest.skip(f"{source} is absent")
  directory = tmp_path_factory.mktemp("wikitext")
  corpus = directory / "wikitext.txt"
  with open(source, encoding="utf-8") as reader:
    corpus.write_text("\n".join(wikitext.to_documents(reader)) + "\n", encoding="utf-8")
  output = directory / "wikitext.tfrecord"
  result = run_script(f"--input_file={corpus}", f"--output_file={output}",
                      f"--vocab_file={uncased_vocab}", "--max_seq_length=128",
                      "--max_predictions_per_seq=20", "--dupe_factor=5", "--num_workers=2",
                      "--do_whole_word_mask=false")
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads((directory / "wikitext.tfrecord.stats.json").read_text())


def test_statistics_on_wikitext_match_the_flags(wikitext_stats):
  stats = wikitext_stats
  assert stats["instances"] >= 10_000
  # round(len * masked_lm_prob) of every sequence (the original counts [CLS]/[SEP] in len),
  # before max_predictions_per_seq caps it.
  assert abs(stats["target_masked_fraction_of_tokens"] - 0.15) <= 0.005
  actions = stats["masking_action_fractions"]
  assert abs(actions["mask"] - 0.8) <= 0.015
  assert abs(actions["random"] - 0.1) <= 0.015
  assert abs(actions["keep"] - 0.1) <= 0.015
  # The original always takes a random B for a one-segment chunk and with probability 0.5
  # otherwise, so the overall rate is above 0.5 (0.526 here, with 5% one-segment chunks).
  assert abs(stats["random_next_fraction_of_multi_segment"] - 0.5) <= 0.02
  expected = 0.5 + 0.5 * stats["single_segment_fraction"]
  assert abs(stats["random_next_fraction"] - expected) <= 0.02
  # One target length per document pass; 60 articles x 5 passes = 300 draws at p = 0.1.
  assert 0.1 - 3 * (0.09 / 300) ** 0.5 <= stats["short_target_fraction"] <= 0.1 + 3 * (
      0.09 / 300) ** 0.5


@pytest.mark.parametrize("case, expected", [
    ("empty_input", "no document with any word piece"),
    ("glob", "matches no file"),
    ("only_blank_and_control", "no document with any word piece"),
    ("vocab", "vocab"),
    ("predictions", "--max_predictions_per_seq=5 is smaller than round(max_seq_length * "
                    "masked_lm_prob) = 10"),
    ("seq_length", "--max_seq_length=4: must be at least 5"),
    ("unwritable", "does not exist"),
])
def test_bad_input_is_a_one_line_error_and_leaves_no_output(tmp_path, sample_vocab, case,
                                                            expected):
  corpus = SAMPLES_DIR / "sample_corpus.txt"
  output = tmp_path / "out.tfrecord"
  flags = {"input_file": str(corpus), "output_file": str(output), "vocab_file": str(sample_vocab),
           "max_seq_length": "64", "max_predictions_per_seq": "10"}
  if case == "empty_input":
    (tmp_path / "empty.txt").write_text("")
    flags["input_file"] = str(tmp_path / "empty.txt")
  elif case == "glob":
    flags["input_file"] = str(tmp_path / "nothing-*.txt")
  elif case == "only_blank_and_control":
    (tmp_path / "blank.txt").write_text("\n\n \x00\x01\n\n\u200b\n")
    flags["input_file"] = str(tmp_path / "blank.txt")
  elif case == "vocab":
    flags["vocab_file"] = str(tmp_path / "missing_vocab.txt")
  elif case == "predictions":
    flags.update(max_seq_length="64", max_predictions_per_seq="5")
  elif case == "seq_length":
    flags["max_seq_length"] = "4"
  else:
    flags["output_file"] = str(tmp_path / "no_such_dir" / "out.tfrecord")
  result = run_script(*(f"--{k}={v}" for k, v in flags.items()), "--num_workers=1")
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith("create_pretraining_data.py: error: ") and expected in last_line, (
      last_line)
  assert list(tmp_path.glob("out.tfrecord*")) == []
