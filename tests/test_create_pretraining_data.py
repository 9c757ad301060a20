"""create_pretraining_data.py: schema, invariants, statistics, determinism, bad input."""

import collections
import errno
import functools
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from data import tokenization
from data import wikitext
from tasks.pretraining import batches
from tasks.pretraining import features
from tasks.pretraining import instances as instances_lib
from tasks.pretraining import layout
from tasks.pretraining import masking
from tasks.pretraining import writer
from tests import scripts
from tests.conftest import REPO_ROOT
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.slow

MAX_SEQ_LENGTH = 64
MAX_PREDICTIONS = 10


def run_script(*flags):
  return scripts.run_script("create_pretraining_data.py", *flags)


def read_records(paths, compression_type=None, spec=None):
  spec = spec or features.pretraining_feature_spec(MAX_SEQ_LENGTH, MAX_PREDICTIONS)
  columns = collections.defaultdict(list)
  for record in tf.data.TFRecordDataset([str(p) for p in paths],
                                        compression_type=compression_type):
    for name, value in tf.io.parse_single_example(record, spec).items():
      columns[name].append(value.numpy())
  return {name: np.stack(values) for name, values in columns.items()}


def create(tmp_path, vocab, *extra, inputs=None, outputs=("out.tfrecord",),
           max_seq_length=MAX_SEQ_LENGTH, max_predictions=MAX_PREDICTIONS):
  output_paths = [tmp_path / name for name in outputs]
  # One worker is the test's own process; several are the script's, whose workers it forks.
  several = any(flag.startswith("--num_workers=") and flag != "--num_workers=1" for flag in extra)
  run = run_script if several else functools.partial(scripts.run_in_process,
                                                     "create_pretraining_data.py")
  result = run(f"--input_file={inputs or SAMPLES_DIR / 'sample_corpus.txt'}",
               "--output_file=" + ",".join(str(p) for p in output_paths),
               f"--vocab_file={vocab}", f"--max_seq_length={max_seq_length}",
               f"--max_predictions_per_seq={max_predictions}", "--dupe_factor=2",
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
  stats = json.loads((tmp_path / "_a.tfrecord.stats.json").read_text())
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


# The library with spawned workers, in a process that has run a TensorFlow op (where forking, as
# the script does, would not be safe); the script's defaults otherwise.
SPAWNED_WORKERS = """
import sys
import tensorflow as tf
from tasks.pretraining import writer
tf.constant(0)
settings = writer.Settings(vocab_file=sys.argv[3], do_lower_case=True, max_seq_length=64,
                           max_predictions_per_seq=10, random_seed=12345, dupe_factor=2,
                           masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False)
writer.write_pretraining_data([sys.argv[1]], [sys.argv[2]], settings, num_workers=2,
                              shard_documents=3)
"""


@pytest.fixture(scope="module")
def sharded_two_workers(tmp_path_factory, sample_vocab):
  """The records of one output, from shards of 3 documents on 2 workers."""
  [output] = create(tmp_path_factory.mktemp("sharded"), sample_vocab, "--shard_documents=3",
                    "--num_workers=2")
  return output


def test_same_seed_gives_identical_bytes_for_any_worker_count_and_another_seed_differs(
    tmp_path, sample_vocab, sharded_two_workers):
  (tmp_path / "one").mkdir()
  (tmp_path / "seed").mkdir()
  sharded = ("--shard_documents=3",)
  one = create(tmp_path / "one", sample_vocab, *sharded)[0].read_bytes()
  two = sharded_two_workers.read_bytes()
  other = create(tmp_path / "seed", sample_vocab, *sharded, "--random_seed=7")[0].read_bytes()
  spawned = tmp_path / "spawned.tfrecord"
  scripts.run_python(SPAWNED_WORKERS, SAMPLES_DIR / "sample_corpus.txt", spawned, sample_vocab,
                     cwd=REPO_ROOT)
  assert one == two == spawned.read_bytes()
  assert one != other


# The script with a run's only shard made by all its workers whatever its size (the sample is
# below the size from which the script shares it), in masking blocks small enough to give each
# worker a share of the sample's instances; every share made prints its records.
SHARED_SHARD = """
import os
import runpy
import sys
from tasks.pretraining import masking
from tasks.pretraining import writer
writer._SHARED_TOKENIZATION_BYTES = 0
masking.BLOCK_ROWS = 16
process_shard = writer._process_shard
def printing_process_shard(shard_index, documents, settings, tokenized, share):
  serialized, counts = process_shard(shard_index, documents, settings, tokenized, share)
  # One write: the workers' lines do not interleave.
  os.write(1, f"share {share} records {len(serialized)}\\n".encode())
  return serialized, counts
writer._process_shard = printing_process_shard
sys.argv = ["create_pretraining_data.py", *sys.argv[1:]]
runpy.run_path("create_pretraining_data.py", run_name="__main__")
"""


def test_an_only_shard_made_by_every_worker_gives_the_same_bytes(tmp_path, sample_vocab):
  outputs, printed = {}, {}
  for workers in (1, 2):
    outputs[workers] = tmp_path / f"{workers}.tfrecord"
    printed[workers] = scripts.run_python(
        SHARED_SHARD, f"--input_file={SAMPLES_DIR / 'sample_corpus.txt'}",
        f"--output_file={outputs[workers]}", f"--vocab_file={sample_vocab}",
        f"--max_seq_length={MAX_SEQ_LENGTH}", f"--max_predictions_per_seq={MAX_PREDICTIONS}",
        "--dupe_factor=2", f"--num_workers={workers}", cwd=REPO_ROOT)
  shares = {workers: re.findall(r"share \((\d), (\d)\) records (\d+)", text)
            for workers, text in printed.items()}
  records = sum(1 for _ in tf.data.TFRecordDataset(str(outputs[1])))
  assert shares[1] == [("0", "1", str(records))]
  assert sorted(share[:2] for share in shares[2]) == [("0", "2"), ("1", "2")]
  assert all(int(count) > 16 for _, _, count in shares[2])
  assert outputs[2].read_bytes() == outputs[1].read_bytes()


def test_a_share_made_in_chunks_is_the_share_made_at_once(sample_vocab, monkeypatch):
  text = (SAMPLES_DIR / "sample_corpus.txt").read_text(encoding="utf-8")
  documents = [block.splitlines() for block in text.split("\n\n") if block.strip()]
  settings = writer.Settings(
      vocab_file=str(sample_vocab), do_lower_case=True, max_seq_length=MAX_SEQ_LENGTH,
      max_predictions_per_seq=MAX_PREDICTIONS, random_seed=12345, dupe_factor=2,
      masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False)
  # Chunks of one 16-row masking block each.
  monkeypatch.setattr(masking, "BLOCK_ROWS", 16)
  monkeypatch.setattr(writer, "_MMAP_THRESHOLD_BYTES", 1)
  packed_rows, pack = [], layout.pack
  monkeypatch.setattr(layout, "pack", lambda *args: packed_rows.append(args[2]) or pack(*args))
  in_chunks, chunked_counts = writer._process_shard(0, documents, settings, share=(1, 2))
  chunks, packed_rows[:] = list(packed_rows), []
  monkeypatch.setattr(writer, "_chunks", lambda rows, max_seq_length: [rows])
  at_once, counts = writer._process_shard(0, documents, settings, share=(1, 2))
  assert len(chunks) > 4 and all(rows.stop - rows.start <= 16 for rows in chunks)
  assert len(packed_rows) == 1
  assert in_chunks == at_once
  assert chunked_counts == counts


def test_several_outputs_take_the_records_in_turn_across_shards(tmp_path, sample_vocab,
                                                                 sharded_two_workers):
  # Workers write each shard's records as one TFRecord file per output (a GZIP member when
  # compressed); record g of the whole run must still go to output g % 3, whatever the shards'
  # sizes.
  for name in ("three", "gzip"):
    (tmp_path / name).mkdir()
  sharded = ("--shard_documents=3", "--num_workers=2")
  one = sharded_two_workers
  three = create(tmp_path / "three", sample_vocab, *sharded, outputs=("a", "b", "c"))
  gzipped = create(tmp_path / "gzip", sample_vocab, *sharded, "--gzip", outputs=("a", "b", "c"))
  records = [record.numpy() for record in tf.data.TFRecordDataset(str(one))]
  stats = json.loads((one.parent / "_out.tfrecord.stats.json").read_text())
  assert stats["documents"] > 9 and len(records) % 3  # Several shards, not a multiple of 3.
  for index, (plain, compressed) in enumerate(zip(three, gzipped)):
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(plain))] == records[index::3]
    assert [r.numpy() for r in tf.data.TFRecordDataset(
        str(compressed), compression_type="GZIP")] == records[index::3]


# Workers forked as by the script; the shard with index 2 fails in its worker: it raises, or its
# process is killed (as by the out-of-memory killer), by the mode in argv[5].
FAILING_SHARD = """
import os
import signal
import sys
import tempfile
import time
from tasks.pretraining import writer
tempfile.tempdir = sys.argv[4]
process_shard = writer.process_shard
def fail_at_shard_2(shard_index, *arguments):
  if shard_index == 2:
    if sys.argv[5] == "sigkill":
      os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError("shard 2 failed")
  return process_shard(shard_index, *arguments)
writer.process_shard = fail_at_shard_2
settings = writer.Settings(vocab_file=sys.argv[3], do_lower_case=True, max_seq_length=64,
                           max_predictions_per_seq=10, random_seed=12345, dupe_factor=2,
                           masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False)
start = time.monotonic()
try:
  writer.write_pretraining_data([sys.argv[1]], [sys.argv[2]], settings, num_workers=2,
                                shard_documents=3, start_method="fork")
except RuntimeError as error:
  print(f"raised {type(error).__name__} after {time.monotonic() - start:.1f} s:", error)
"""


@pytest.mark.parametrize("mode, expected", [
    ("raise", "raised RuntimeError after .* s: shard 2 failed"),
    ("sigkill", "raised WorkerDiedError after .* s: a worker process died before finishing its "
                "shard"),
])
def test_a_failing_worker_leaves_neither_output_nor_part_files(tmp_path, sample_vocab, mode,
                                                               expected):
  temp = tmp_path / "tmp"
  temp.mkdir()
  output = tmp_path / "out.tfrecord"
  stdout = scripts.run_python(FAILING_SHARD, SAMPLES_DIR / "sample_corpus.txt", output,
                              sample_vocab, temp, mode, cwd=REPO_ROOT, timeout=120)
  assert re.search(expected, stdout), stdout
  assert list(tmp_path.glob("out.tfrecord*")) == []
  assert list(temp.iterdir()) == []


# Workers forked as by the script, each noting its pid in argv[5]; the worker given shard 2 sends
# the signal argv[6] to the main process, then blocks (a worker mid-shard).
SIGNALLED_PARENT = """
import os
import signal
import sys
import tempfile
import time
from tasks.pretraining import processes
from tasks.pretraining import writer
tempfile.tempdir = sys.argv[4]
process_shard = writer.process_shard
def signal_parent_at_shard_2(shard_index, *arguments):
  open(os.path.join(sys.argv[5], str(os.getpid())), "w").close()
  if shard_index == 2:
    os.kill(os.getppid(), getattr(signal, sys.argv[6]))
    time.sleep(60)
  return process_shard(shard_index, *arguments)
writer.process_shard = signal_parent_at_shard_2
settings = writer.Settings(vocab_file=sys.argv[3], do_lower_case=True, max_seq_length=64,
                           max_predictions_per_seq=10, random_seed=12345, dupe_factor=2,
                           masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False)
try:
  writer.write_pretraining_data([sys.argv[1]], [sys.argv[2]], settings, num_workers=2,
                                shard_documents=3, start_method="fork")
except processes.TerminatedError as error:
  print(f"raised TerminatedError: {error}")
"""


def _alive(pid):
  """True if `pid` runs (a zombie, an ended process its new parent has not reaped, does not)."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_workers_end_with_a_signalled_main_process(tmp_path, sample_vocab, signal_name):
  temp, pids = tmp_path / "tmp", tmp_path / "pids"
  temp.mkdir()
  pids.mkdir()
  output, stdout = tmp_path / "out.tfrecord", tmp_path / "stdout.txt"
  # To files, not pipes: orphaned workers would hold a pipe open, and the run seem to last.
  with open(stdout, "w") as out, open(tmp_path / "stderr.txt", "w") as err:
    returncode = subprocess.run(
        [sys.executable, "-c", SIGNALLED_PARENT, *map(str, (
            SAMPLES_DIR / "sample_corpus.txt", output, sample_vocab, temp, pids, signal_name))],
        stdout=out, stderr=err, cwd=REPO_ROOT, timeout=120, check=False).returncode
  workers = [int(p.name) for p in pids.iterdir()]
  deadline = time.monotonic() + 5
  while any(map(_alive, workers)) and time.monotonic() < deadline:
    time.sleep(0.05)
  left = [pid for pid in workers if _alive(pid)]
  for pid in left:  # not to outlive the test
    os.kill(pid, signal.SIGKILL)
  assert len(workers) == 2 and not left
  if signal_name == "SIGTERM":
    assert returncode == 0, (tmp_path / "stderr.txt").read_text()[-3000:]
    assert stdout.read_text().strip().splitlines()[-1] == (
        "raised TerminatedError: stopped by SIGTERM: nothing written, no temporary left")
    assert list(tmp_path.glob("out.tfrecord*")) == []
    assert list(temp.iterdir()) == []
  else:  # its temporaries are the next run's to remove (test_killed_runs.py)
    assert returncode == -9

def test_gzip_output_reads_back_with_gzip(tmp_path, sample_vocab):
  output = create(tmp_path, sample_vocab, "--gzip")[0]
  assert output.read_bytes()[:2] == b"\x1f\x8b"
  assert len(read_records([output], compression_type="GZIP")["input_ids"]) > 100


@pytest.mark.parametrize("sendfile_works", [True, False])
def test_appended_gzip_parts_are_their_bytes_back_to_back(tmp_path, monkeypatch, sendfile_works):
  parts = [str(tmp_path / f"part-{part}") for part in range(2)]
  for part, path in enumerate(parts):
    with tf.io.TFRecordWriter(path, "GZIP") as part_writer:
      for index in range(3):
        part_writer.write(f"record {part} {index}".encode())
  sendfile, calls = os.sendfile, []

  def spied_sendfile(*args):
    calls.append(args)
    if not sendfile_works:  # as a file system that refuses it
      raise OSError(errno.EINVAL, "Invalid argument")
    return sendfile(*args)

  monkeypatch.setattr(os, "sendfile", spied_sendfile)
  output = tmp_path / "out.tfrecord"
  with writer.open_output(str(output)) as opened:
    for path in parts:
      writer.append_file(path, opened)
  assert calls
  assert output.read_bytes() == b"".join(pathlib.Path(path).read_bytes() for path in parts)
  assert [record.numpy() for record in tf.data.TFRecordDataset(str(output), "GZIP")] == [
      f"record {part} {index}".encode() for part in range(2) for index in range(3)]


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


# Ids 0-4: [CLS], [SEP], [MASK] and two word starts; 5-9: `##` pieces.
TOY_SPECIAL_IDS = instances_lib.SpecialIds(cls_id=0, sep_id=1, mask_id=2, vocab_size=10,
                                                   is_continuation=[False] * 5 + [True] * 5)


def exact_masking(ids, do_whole_word_mask, draws, seed=0):
  """The original masker `draws` times on `ids`; list of (positions, labels, actions)."""
  rng = random.Random(seed)
  return [instances_lib.create_masked_lm_predictions(
      ids, 0.15, 20, TOY_SPECIAL_IDS, do_whole_word_mask, rng)[1:] for _ in range(draws)]


def vectorized_masking_draws(ids, do_whole_word_mask, draws, seed=0):
  """The vectorised masker on `draws` copies of `ids`; list of (positions, labels, actions)."""
  instance = instances_lib.TrainingInstance(
      input_ids=ids, segment_ids=[0] * len(ids), is_random_next=False, masked_lm_positions=[],
      masked_lm_ids=[], masking_actions=[], is_short_target=False, is_single_segment=False)
  batch = masking.mask_batch(
      batches.from_instances([instance] * draws, len(ids) + 3, 20), 0.15, 20,
      TOY_SPECIAL_IDS, do_whole_word_mask, masking.block_generators(seed, 0))
  # Labels are the ids before masking, and the masked ids the replacements the actions say.
  real = np.arange(20) < batch.num_predictions[:, None]
  rows = np.nonzero(real)[0]
  positions, labels = batch.masked_lm_positions[real], batch.masked_lm_ids[real]
  actions = np.array(batches.ACTIONS)[batch.masked_lm_actions[real]]
  replaced = batch.input_ids[rows, positions]
  assert (labels == np.array(ids)[positions]).all()
  assert (replaced[actions == instances_lib.MASK] == 2).all()
  assert (replaced[actions == instances_lib.KEEP]
          == labels[actions == instances_lib.KEEP]).all()
  assert ((replaced >= 0) & (replaced < 10)).all()
  return [(batch.masked_lm_positions[row, :count].tolist(),
           batch.masked_lm_ids[row, :count].tolist(),
           [batches.ACTIONS[a] for a in batch.masked_lm_actions[row, :count]])
          for row, count in enumerate(batch.num_predictions)]


@pytest.mark.parametrize("masker", [exact_masking, vectorized_masking_draws])
def test_pieces_of_a_word_are_masked_separately_without_whole_word_masking(masker):
  ids = [0] + [3, 5, 6, 7, 8, 9] * 5 + [1, 4, 1]
  split_words = 0
  for positions, _, _ in masker(ids, False, 50):
    masked = set(positions)
    split_words += any((p in masked) != (p - 1 in masked) and TOY_SPECIAL_IDS.is_continuation[ids[p]]
                       for p in range(2, len(ids) - 2))
  assert split_words > 25


@pytest.mark.parametrize("ids", [
    # 21 tokens: 3 predictions; words of 1, 2 and 3 pieces, so a 2- or 3-piece word often
    # overflows the budget and a later 1-piece word must still be taken.
    [0, 5, 4, 5, 3, 4, 5, 6, 4, 5, 1, 4, 5, 3, 4, 5, 6, 3, 4, 5, 1],
    # 27 tokens: 4 predictions; B starts with `##` pieces, which join A's last word across [SEP]
    # (as the original), making a 4-piece word.
    [0, 6, 7, 3, 4, 5, 3, 3, 4, 5, 6, 3, 4, 5, 1, 8, 9, 3, 4, 5, 6, 3, 3, 4, 5, 3, 1],
])
def test_vectorized_masking_has_the_distribution_of_the_original(ids):
  draws = 20_000
  exact = exact_masking(ids, True, draws)
  fast = vectorized_masking_draws(ids, True, draws, seed=1)

  def summary(results):
    per_position = np.zeros(len(ids))
    per_count = np.zeros(21)
    actions = collections.Counter()
    for positions, _, row_actions in results:
      per_position[positions] += 1
      per_count[len(positions)] += 1
      actions.update(row_actions)
    total = sum(actions.values())
    return (per_position / len(results), per_count / len(results),
            np.array([actions[a] / total for a in batches.ACTIONS]))

  exact_positions, exact_counts, exact_actions = summary(exact)
  fast_positions, fast_counts, fast_actions = summary(fast)
  # Frequencies from 20,000 draws each differ by at most sqrt(2 * 0.25 / 20000) = 0.005 per
  # standard deviation; 0.02 is 4 of them. Stopping at the first word that overflows, instead of
  # skipping it, moved per-position frequencies by up to 0.11 (first row) and 0.07 (second).
  np.testing.assert_allclose(fast_positions, exact_positions, atol=0.02)
  np.testing.assert_allclose(fast_counts, exact_counts, atol=0.02)
  np.testing.assert_allclose(fast_actions, exact_actions, atol=0.02)
  assert exact_positions[0] == exact_positions[-1] == fast_positions[0] == fast_positions[-1] == 0


def test_original_random_stream_gives_the_original_instances(tmp_path, sample_vocab):
  (tmp_path / "default").mkdir()
  output = create(tmp_path, sample_vocab, "--original_random_stream", "--do_whole_word_mask")[0]
  default = create(tmp_path / "default", sample_vocab, "--do_whole_word_mask")[0]
  records = read_records([output])
  # The transcription of the original, run here on the same documents with the same seed.
  tokenizer = tokenization.FullTokenizer(str(sample_vocab), do_lower_case=True)
  documents = [[]]
  for line in (SAMPLES_DIR / "sample_corpus.txt").read_text(encoding="utf-8").splitlines():
    if not line.strip():
      documents.append([])
    elif ids := tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)):
      documents[-1].append(ids)
  instances = instances_lib.create_instances(
      documents, 2, MAX_SEQ_LENGTH, 0.1, 0.15, MAX_PREDICTIONS,
      instances_lib.SpecialIds.from_vocab(tokenization.load_vocab(sample_vocab)), True,
      random.Random(12345))
  assert len(instances) == len(records["input_ids"])
  for index, instance in enumerate(instances):
    length, count = len(instance.input_ids), len(instance.masked_lm_positions)
    assert records["input_ids"][index][:length].tolist() == instance.input_ids
    assert records["masked_lm_positions"][index][:count].tolist() == instance.masked_lm_positions
    assert records["masked_lm_ids"][index][:count].tolist() == instance.masked_lm_ids
    assert records["next_sentence_labels"][index][0] == instance.is_random_next
  # The default path draws its masks elsewhere: the same distribution, other instances.
  assert default.read_bytes() != output.read_bytes()


# Packed runs: rows of 256 with short targets half of the time, so that the sample corpus's
# instances pack one, two and three to a row; several shards, each packed on its own.
PACKED_LENGTH, PACKED_PREDICTIONS, PER_PACK = 256, 40, 3
PACKED_FLAGS = ("--short_seq_prob=0.5", "--shard_documents=3")


def create_packed(directory, vocab, *extra, outputs=("out.tfrecord",)):
  directory.mkdir(exist_ok=True)
  return create(directory, vocab, *PACKED_FLAGS, *extra, outputs=outputs,
                max_seq_length=PACKED_LENGTH, max_predictions=PACKED_PREDICTIONS)


@pytest.fixture(scope="module")
def packed_run(tmp_path_factory, sample_vocab):
  """`(packed records, packed stats, unpacked records, unpacked stats, packed output)` of two
  runs with the same flags and seed, one with --pack_sequences."""
  directory = tmp_path_factory.mktemp("packing")
  [packed] = create_packed(directory / "packed", sample_vocab, "--pack_sequences")
  [unpacked] = create_packed(directory / "unpacked", sample_vocab)
  spec = features.packed_pretraining_feature_spec(PACKED_LENGTH, PACKED_PREDICTIONS, PER_PACK)
  return (read_records([packed], spec=spec),
          json.loads((directory / "packed" / "_out.tfrecord.stats.json").read_text()),
          read_records([unpacked], spec=features.pretraining_feature_spec(PACKED_LENGTH,
                                                                         PACKED_PREDICTIONS)),
          json.loads((directory / "unpacked" / "_out.tfrecord.stats.json").read_text()),
          packed)


def rows(records):
  """Each record of `read_records` as a dict of its features."""
  return [dict(zip(records, values)) for values in zip(*records.values())]


def instance_key(input_ids, segment_ids, positions, masked_ids, label):
  return (tuple(input_ids.tolist()), tuple(segment_ids.tolist()), tuple(positions.tolist()),
          tuple(masked_ids.tolist()), int(label))


def unpack(row):
  """The instances of a packed row, as `instance_key`s, read back through `instance_ids`."""
  count = int(row["masked_lm_weights"].sum())
  positions, masked_ids = row["masked_lm_positions"][:count], row["masked_lm_ids"][:count]
  instances = []
  for slot in range(int(row["next_sentence_weights"].sum())):
    tokens = np.flatnonzero(row["instance_ids"] == slot + 1)
    start, end = tokens[0], tokens[-1] + 1
    own = (positions >= start) & (positions < end)
    instances.append(instance_key(row["input_ids"][start:end], row["segment_ids"][start:end],
                                  positions[own] - start, masked_ids[own],
                                  row["next_sentence_labels"][slot]))
  return instances


def test_packed_rows_hold_exactly_the_instances_of_the_unpacked_run(packed_run):
  packed, packed_stats, unpacked, unpacked_stats, _ = packed_run
  expected = collections.Counter()
  for row in rows(unpacked):
    length, count = int(row["input_mask"].sum()), int(row["masked_lm_weights"].sum())
    expected[instance_key(row["input_ids"][:length], row["segment_ids"][:length],
                          row["masked_lm_positions"][:count], row["masked_lm_ids"][:count],
                          row["next_sentence_labels"][0])] += 1
  unpacked_rows = collections.Counter(
      instance for row in rows(packed) for instance in unpack(row))
  assert unpacked_rows == expected
  per_row = collections.Counter(int(w.sum()) for w in packed["next_sentence_weights"])
  assert set(per_row) == {1, 2, 3}, per_row  # every slot count occurs
  # The same instances, so the same statistics, with the packs' besides.
  packing_keys = {"packs", "instances_per_pack", "packed_padding_fraction", "seconds"}
  assert {k: v for k, v in packed_stats.items() if k not in packing_keys} == {
      k: v for k, v in unpacked_stats.items() if k != "seconds"}
  assert packed_stats["packs"] == len(packed["input_ids"]) < packed_stats["instances"]
  assert packed_stats["instances_per_pack"] == packed_stats["instances"] / packed_stats["packs"]
  assert packed_stats["packed_padding_fraction"] == pytest.approx(
      1 - packed["input_mask"].sum() / packed["input_mask"].size)
  assert packed_stats["packed_padding_fraction"] < packed_stats["padding_fraction"]
  assert unpacked_stats["padding_fraction"] == pytest.approx(
      1 - unpacked["input_mask"].sum() / unpacked["input_mask"].size)


def test_packed_rows_keep_the_layout_invariants(packed_run, sample_vocab):
  packed, _, _, _, output = packed_run
  vocab = tokenization.load_vocab(sample_vocab)
  cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
  # The packed features, with their types and lengths.
  example = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(str(output)))).numpy())
  lengths = {name: len(getattr(feature, feature.WhichOneof("kind")).value)
             for name, feature in example.features.feature.items()}
  assert lengths == {name: spec.shape[0] for name, spec in features.packed_pretraining_feature_spec(
      PACKED_LENGTH, PACKED_PREDICTIONS, PER_PACK).items()}
  assert set(features.PACKED_PRETRAINING_FEATURES) < set(lengths)
  for row in rows(packed):
    num_instances = int(row["next_sentence_weights"].sum())
    assert 1 <= num_instances <= PER_PACK
    assert row["next_sentence_weights"].tolist() == [1] * num_instances + [0] * (
        PER_PACK - num_instances)
    total = int(row["input_mask"].sum())
    instance_ids = row["instance_ids"][:total]
    # Instances 1..n, each a contiguous run, then padding: all features 0 there.
    assert instance_ids[0] == 1 and set(np.diff(instance_ids)) <= {0, 1}
    assert instance_ids[-1] == num_instances
    assert (row["input_mask"] == (row["instance_ids"] > 0)).all()
    for name in ("input_ids", "input_mask", "segment_ids", "position_ids", "instance_ids"):
      assert not row[name][total:].any(), name
    starts = np.flatnonzero(np.diff(instance_ids, prepend=0))
    ends = np.append(starts[1:], total)
    assert row["next_sentence_positions"].tolist() == starts.tolist() + [0] * (
        PER_PACK - num_instances)
    assert (row["input_ids"][starts] == cls_id).all()
    assert (row["input_ids"][ends - 1] == sep_id).all()
    # Positions restart at 0 at each [CLS].
    assert (row["position_ids"][:total] == np.arange(total) - starts[instance_ids - 1]).all()
    assert set(row["next_sentence_labels"][:num_instances]) <= {0, 1}
    assert not row["next_sentence_labels"][num_instances:].any()
    # Each instance's predictions, in instance order: sorted across the row, none on [CLS].
    count = int(row["masked_lm_weights"].sum())
    assert count == sum(min(PACKED_PREDICTIONS, max(1, round((end - start) * 0.15)))
                        for start, end in zip(starts, ends))
    assert count <= features.packed_predictions_per_row(PACKED_PREDICTIONS, PER_PACK)
    assert set(row["masked_lm_weights"][:count]) == {1.0}
    positions = row["masked_lm_positions"][:count]
    assert (np.diff(positions) > 0).all() and (positions < total).all()
    assert not np.isin(positions, starts).any()
    for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
      assert not row[name][count:].any(), name


def test_packed_records_are_the_same_bytes_for_any_worker_count(packed_run, sample_vocab,
                                                                 tmp_path):
  one = packed_run[4]
  [two] = create_packed(tmp_path / "two", sample_vocab, "--pack_sequences", "--num_workers=2")
  three = create_packed(tmp_path / "three", sample_vocab, "--pack_sequences", "--num_workers=2",
                        outputs=("a", "b", "c"))
  assert one.read_bytes() == two.read_bytes()
  # Records (packs, not instances) go round-robin over the outputs across shards.
  records = [record.numpy() for record in tf.data.TFRecordDataset(str(one))]
  for index, path in enumerate(three):
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == records[index::3]


@pytest.fixture(scope="module")
def wikitext_corpus(shared_data, tmp_path_factory):
  """WikiText-2 valid in the input format."""
  source = shared_data / "pretraining" / "wikitext-2-valid.tokens.txt"
  if not source.is_file():
    pytest.skip(f"{source} is absent")
  corpus = tmp_path_factory.mktemp("wikitext") / "wikitext.txt"
  with open(source, encoding="utf-8") as reader:
    corpus.write_text("\n".join(wikitext.to_documents(reader)) + "\n", encoding="utf-8")
  return corpus


def wikitext_run_stats(corpus, vocab, name, *extra):
  output = corpus.parent / f"{name}.tfrecord"
  result = run_script(f"--input_file={corpus}", f"--output_file={output}",
                      f"--vocab_file={vocab}", "--max_seq_length=128",
                      "--max_predictions_per_seq=20", "--dupe_factor=5", "--num_workers=2",
                      "--do_whole_word_mask=false", *extra)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads((corpus.parent / f"_{output.name}.stats.json").read_text())


@pytest.fixture(scope="module")
def wikitext_stats(wikitext_corpus, uncased_vocab):
  return wikitext_run_stats(wikitext_corpus, uncased_vocab, "wikitext")


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


def test_packing_wikitext_packs_its_short_instances(wikitext_corpus, uncased_vocab,
                                                  wikitext_stats):
  packed = wikitext_run_stats(wikitext_corpus, uncased_vocab, "packed", "--pack_sequences")
  # The same instances: the same statistics, in fewer rows.
  for key in ("instances", "tokens", "masked_positions", "random_next_fraction",
              "padding_fraction"):
    assert packed[key] == wikitext_stats[key], key
  assert packed["packs"] < packed["instances"]
  assert 1 < packed["instances_per_pack"] <= 3
  assert packed["packed_padding_fraction"] < packed["padding_fraction"]


@pytest.mark.parametrize("case, expected", [
    ("empty_input", "no document with any word piece"),
    ("glob", "matches no file"),
    ("directory", "is a directory, not a file"),
    ("unknown_flag", "--dupe_facter=2: neither a flag of this script nor an Apache Beam "
                     "pipeline option"),
    ("only_blank_and_control", "no document with any word piece"),
    ("vocab", "vocab"),
    ("predictions", "--max_predictions_per_seq=5 is smaller than round(max_seq_length * "
                    "masked_lm_prob) = 10"),
    ("seq_length", "--max_seq_length=4: must be at least 5"),
    ("sequences_per_pack", "--max_sequences_per_pack=0: must be at least 1"),
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
  elif case == "directory":
    flags["input_file"] = str(tmp_path)
  elif case == "unknown_flag":
    flags["dupe_facter"] = "2"
  elif case == "only_blank_and_control":
    (tmp_path / "blank.txt").write_text("\n\n \x00\x01\n\n\u200b\n")
    flags["input_file"] = str(tmp_path / "blank.txt")
  elif case == "vocab":
    flags["vocab_file"] = str(tmp_path / "missing_vocab.txt")
  elif case == "predictions":
    flags.update(max_seq_length="64", max_predictions_per_seq="5")
  elif case == "seq_length":
    flags["max_seq_length"] = "4"
  elif case == "sequences_per_pack":
    flags.update(pack_sequences="true", max_sequences_per_pack="0")
  else:
    flags["output_file"] = str(tmp_path / "no_such_dir" / "out.tfrecord")
  words = [f"--{k}={v}" for k, v in flags.items()] + ["--num_workers=1"]
  # The script's own command line tells its flags from Beam's: that case runs as a process.
  result = (run_script(*words) if case == "unknown_flag"
            else scripts.run_in_process("create_pretraining_data.py", *words))
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith("create_pretraining_data.py: error: ") and expected in last_line, (
      last_line)
  assert list(tmp_path.glob("out.tfrecord*")) == []
