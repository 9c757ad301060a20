"""create_pretraining_data.py on Apache Beam: the local path's shards, records and errors."""

import hashlib
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest
import tensorflow as tf

from data import file_patterns
from data import text_files
from data import wikitext
from tasks.pretraining import beam as beam_lib
from tasks.pretraining import writer
from tests import scripts
from tests.conftest import REPO_ROOT
from tests.conftest import RUNTIME_ONLY_DIR

# The engine the DirectRunner runs batch pipelines on: `--runner=DirectRunner` first tries to
# download Beam's Prism runner, which this machine cannot, then falls back to it.
BEAM_FLAGS = ("--runner=FnApiRunner", "--direct_running_mode=multi_processing",
              "--direct_num_workers=2")


def write_documents(path, documents, final_blank_line=True):
  text = "\n\n".join("\n".join(document) for document in documents)
  path.write_text(text + ("\n\n" if final_blank_line else ""), encoding="utf-8")
  return str(path)


@pytest.mark.parametrize("shard_documents", [1, 2, 3, 4, 7, 100])
def test_pieces_cut_at_shard_boundaries_make_the_local_shards(tmp_path, shard_documents):
  documents = [[f"document {index} line {line}" for line in range(1 + index % 3)]
               for index in range(13)]
  # Files of 4, 0, 1 and 8 documents; the first ends without a blank line, at a shard boundary
  # when shard_documents is 2 or 4.
  paths = [write_documents(tmp_path / "a.txt", documents[:4], final_blank_line=False),
           write_documents(tmp_path / "b.txt", []),
           write_documents(tmp_path / "c.txt", documents[4:5]),
           write_documents(tmp_path / "d.txt", documents[5:])]
  local = [shard for shard, _ in writer.read_document_shards(
      paths, shard_documents, text_files.DecodeStats())]
  assert [len(shard) for shard in local[:-1]] == [shard_documents] * (len(local) - 1)
  assert [document for shard in local for document in shard] == documents

  input_files = list(enumerate(paths))
  first_documents = beam_lib._first_documents(
      [beam_lib._count_documents(input_file) for input_file in input_files])
  assert first_documents == {0: 0, 1: 4, 2: 4, 3: 5}
  pieces = {}
  for input_file in reversed(input_files):  # A pipeline's order is any order.
    for shard_index, piece in beam_lib._shard_pieces(input_file, first_documents,
                                                                  shard_documents):
      pieces.setdefault(shard_index, []).append(piece)
  beam_shards = [[document for _, piece in sorted(pieces[index], key=lambda p: p[0])
                  for document in piece] for index in range(len(pieces))]
  assert beam_shards == local


@pytest.mark.parametrize("args, expected", [
    (["--runner=DataflowRunner", "--projct=x"],
     "--projct=x: neither a flag of this script nor an Apache Beam pipeline option"),
    (["--project=x", "--region=europe-west4"],
     "--project=x: Apache Beam pipeline options are taken only with --runner"),
    (["--runner=FnApiRunner", "--direct_num_workers=two"],
     "argument --direct_num_workers: invalid int value: 'two'"),
    # Beam's own tracebacks once: a ValueError when the pipeline was built, an IndexError in
    # the direct runner, and the missing Dataflow options when it was built.
    (["--runner=NoSuchRunner"], "--runner=NoSuchRunner: Unexpected pipeline runner"),
    (["--runner=DirectRunner", "--direct_num_workers=-3"],
     "--direct_num_workers=-3: must be 0 \\(every core\\) or more"),
    (["--runner=DataflowRunner", "--project=my-project"],
     "for --runner=DataflowRunner: Missing GCS path option: temp_location"),
])
def test_pipeline_options_that_cannot_work_are_one_line_errors(args, expected):
  with pytest.raises(beam_lib.PipelineOptionsError, match=expected):
    beam_lib.pipeline_options_from_args(args)


def test_pipeline_options_keep_what_beam_defines():
  options = beam_lib.pipeline_options_from_args(
      ["--runner", "DataflowRunner", "--project=my-project", "--region", "europe-west4",
       "--temp_location=gs://bucket/tmp"]).get_all_options()
  assert (options["runner"], options["project"], options["region"], options["temp_location"]) == (
      "DataflowRunner", "my-project", "europe-west4", "gs://bucket/tmp")


def test_an_input_that_cannot_be_read_is_named(tmp_path, monkeypatch):
  readable = tmp_path / "readable.txt"
  readable.write_text("text\n")
  with pytest.raises(file_patterns.InputError, match=f"--input_file: {tmp_path} is a directory"):
    file_patterns.check_readable([str(readable), str(tmp_path)])

  def refuse(path, mode):
    raise tf.errors.PermissionDeniedError(None, None, f"{path}; Permission denied")

  monkeypatch.setattr(tf.io.gfile, "GFile", refuse)
  with pytest.raises(file_patterns.InputError,
                     match=f"--input_file: {readable} cannot be read: .*Permission denied"):
    file_patterns.check_readable([str(readable)])


def run_script(*flags):
  return scripts.run_script("create_pretraining_data.py", *flags)


@pytest.fixture(scope="module")
def wikitext_files(shared_data, tmp_path_factory):
  """WikiText-2 valid's 60 articles in three files of 17, 24 and 19 articles, so that shards of
  7 documents span files."""
  source = shared_data / "pretraining" / "wikitext-2-valid.tokens.txt"
  if not source.is_file():
    pytest.skip(f"{source} is absent")
  with open(source, encoding="utf-8") as reader:
    text = "\n".join(wikitext.to_documents(reader))
  documents = [document.splitlines() for document in text.split("\n\n") if document.strip()]
  assert len(documents) == 60
  directory = tmp_path_factory.mktemp("wikitext_files")
  for index, (start, end) in enumerate([(0, 17), (17, 41), (41, 60)]):
    write_documents(directory / f"part-{index}.txt", documents[start:end])
  return f"{directory}/part-*.txt"


def create(inputs, output, vocab, *extra):
  output.parent.mkdir()
  result = run_script(f"--input_file={inputs}", f"--output_file={output}",
                      f"--vocab_file={vocab}", "--max_seq_length=128",
                      "--max_predictions_per_seq=20", "--dupe_factor=2", "--shard_documents=7",
                      "--num_output_shards=3", *extra)
  assert result.returncode == 0, result.stderr[-3000:]
  outputs = sorted(output.parent.glob(f"{output.name}-*-of-00003"))
  assert len(outputs) == 3
  stats = json.loads((output.parent / f"_{outputs[0].name}.stats.json").read_text())
  return outputs, stats


def record_digests(paths):
  return sorted(hashlib.sha256(record.numpy()).hexdigest()
                for record in tf.data.TFRecordDataset([str(path) for path in paths]))


@pytest.mark.slow
def test_beam_writes_the_local_records_byte_for_byte_and_the_same_stats(
    wikitext_files, uncased_vocab, tmp_path):
  local_outputs, local_stats = create(wikitext_files, tmp_path / "local" / "part", uncased_vocab,
                                      "--num_workers=2")
  beam_outputs, beam_stats = create(wikitext_files, tmp_path / "beam" / "part", uncased_vocab,
                                    *BEAM_FLAGS)
  assert local_stats["documents"] == 60 and local_stats["instances"] > 5000
  assert record_digests(beam_outputs) == record_digests(local_outputs)
  # More than the same set: each output holds the same records in the same order.
  for local, beam in zip(local_outputs, beam_outputs):
    assert beam.read_bytes() == local.read_bytes(), beam.name
  del local_stats["seconds"], beam_stats["seconds"]
  assert beam_stats == local_stats
  assert sorted(path.name for path in (tmp_path / "beam").iterdir()) == sorted(
      path.name for path in (tmp_path / "local").iterdir())


# The local path's messages for the same cases: test_create_pretraining_data.py's
# test_bad_input_is_a_one_line_error_and_leaves_no_output.
@pytest.mark.slow
@pytest.mark.parametrize("case, expected", [
    ("glob", "--input_file: '{tmp}/nothing-*.txt' matches no file"),
    ("directory", "--input_file: {tmp} is a directory, not a file"),
    ("unknown_flag", "--dupe_facter=2: neither a flag of this script nor an Apache Beam "
                     "pipeline option"),
    ("seq_length", "--max_seq_length=4: must be at least 5"),
    ("only_blank_and_control", "--input_file={tmp}/blank.txt: no document with any word piece "
                               "in 1 input file(s) (3 line(s) read)"),
])
def test_bad_input_is_the_local_paths_one_line_error(tmp_path, sample_vocab, case, expected):
  (tmp_path / "blank.txt").write_text("\n \x00\n\n")
  inputs = {"glob": f"{tmp_path}/nothing-*.txt", "directory": str(tmp_path)}.get(
      case, str(tmp_path / "blank.txt"))
  extra = {"unknown_flag": ["--dupe_facter=2"], "seq_length": ["--max_seq_length=4"]}.get(
      case, ["--max_seq_length=64"])
  result = scripts.run_in_process(
      "create_pretraining_data.py", f"--input_file={inputs}",
      f"--output_file={tmp_path}/out.tfrecord", f"--vocab_file={sample_vocab}",
      "--max_predictions_per_seq=10", *extra, *BEAM_FLAGS)
  assert result.returncode == 1, result.stderr[-2000:]
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith(
      "create_pretraining_data.py: error: " + expected.format(tmp=tmp_path)), last_line
  # No output, temporary or part file.
  assert [path.name for path in tmp_path.iterdir()] == ["blank.txt"]


@pytest.mark.slow
def test_the_package_remote_workers_install_holds_the_pipelines_code(tmp_path):
  tree = tmp_path / "tree"
  tree.mkdir()
  for name in ("pyproject.toml", "base", "data", "tasks"):
    source = REPO_ROOT / name
    (shutil.copytree if source.is_dir() else shutil.copy)(source, tree / name)
  # What Beam's stager runs for --setup_file=./pyproject.toml.
  subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--outdir",
                  str(tmp_path / "dist"), str(tree)], check=True, capture_output=True)
  sdist, = (tmp_path / "dist").glob("*.tar.gz")
  with tarfile.open(sdist) as archive:
    names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
  assert {"tasks/pretraining/beam.py", "tasks/pretraining/writer.py",
          "base/atomic_files.py"} <= names
  assert names >= {f"{package}/{path.name}" for package in ("base", "data", "tasks/pretraining")
                   for path in (REPO_ROOT / package).glob("*.py")}
  # Every module of the project the pipeline's code imports, and no other task family.
  imported = subprocess.run(
      [sys.executable, "-c", "import sys, tasks.pretraining.beam; print('\\n'.join("
       "m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)))"],
      cwd=REPO_ROOT, check=True, capture_output=True, text=True).stdout.split()
  project = {pathlib.Path(path).relative_to(REPO_ROOT).as_posix() for path in imported
             if pathlib.Path(path).is_relative_to(REPO_ROOT)
             and not pathlib.Path(path).is_relative_to(REPO_ROOT / ".venv")
             and not pathlib.Path(path).is_relative_to(RUNTIME_ONLY_DIR)}
  assert "tasks/pretraining/beam.py" in project and project <= names
  other_families = [path.name for path in (REPO_ROOT / "tasks").iterdir()
                    if (path / "__init__.py").exists() and path.name != "pretraining"]
  assert not [name for name in names for family in other_families
              if name.startswith(f"tasks/{family}/")]
