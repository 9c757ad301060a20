"""Weights by name (`modeling.pretrained_models`, `base.downloads`): real archives and a real
hub repository served from a loopback HTTP server, downloaded once into a temporary cache,
resumed when cut, refused when damaged, and used offline afterwards."""

import hashlib
import http.server
import io
import json
import logging
import os
import re
import threading
import zipfile

import numpy as np
import pytest

from absl import logging as absl_logging

from base import downloads
from base import errors
from modeling import checkpoint_io
from modeling import pretrained_models
from tasks import runner as fine_tuning_runner
from tasks.classification.config import ClassificationConfig
from tests import original_dirs
from tests import scripts
from tests.conftest import SAMPLES_DIR

ORIGINAL_NAMES = ["bert_config.json", "bert_model.ckpt.data-00000-of-00001",
                  "bert_model.ckpt.index", "vocab.txt"]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class Server(http.server.ThreadingHTTPServer):
  """Serves `files` ({url path: bytes}) with Content-Length, ETag and byte ranges, as a static
  host and HuggingFace's hub do (`/<repo>/resolve/<revision>/<file>` gets X-Repo-Commit, and a
  missing file of a known repo the hub's X-Error-Code), and records every request.

  Attributes:
    files: what it serves.
    cut_once: {path: bytes} sent of `path`'s next GET before the connection is dropped.
    requests: [(method, path, Range header or None)].
  """

  def __init__(self):
    super().__init__(("127.0.0.1", 0), _Handler)
    self.files, self.cut_once, self.requests = {}, {}, []
    self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
    self.thread.start()

  @property
  def url(self):
    return f"http://127.0.0.1:{self.server_address[1]}"

  def stop(self):
    self.shutdown()
    self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):

  def log_message(self, *args):  # quiet
    pass

  def do_HEAD(self):
    self._answer(body=False)

  def do_GET(self):
    self._answer(body=True)

  def _answer(self, body):
    server = self.server
    server.requests.append((self.command, self.path, self.headers.get("Range")))
    data = server.files.get(self.path)
    hub = re.fullmatch(r"/hub/([^/]+/[^/]+)/resolve/[^/]+/(.+)", self.path)
    if data is None:
      self.send_response(404)
      if hub:
        known = any(path.startswith(f"/hub/{hub.group(1)}/") for path in server.files)
        self.send_header("X-Error-Code", "EntryNotFound" if known else "RepoNotFound")
        self.send_header("X-Repo-Commit", COMMIT)
      self.send_header("Content-Length", "0")
      self.end_headers()
      return
    start = 0
    if self.headers.get("Range"):
      start = int(re.fullmatch(r"bytes=(\d+)-", self.headers["Range"]).group(1))
      self.send_response(206)
      self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
    else:
      self.send_response(200)
    self.send_header("Content-Length", str(len(data) - start))
    self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
    if hub:
      self.send_header("X-Repo-Commit", COMMIT)
    self.end_headers()
    if body:
      sent = data[start:]
      if self.command == "GET" and self.path in server.cut_once:
        sent = sent[:server.cut_once.pop(self.path)]
        self.close_connection = True
      self.wfile.write(sent)


@pytest.fixture
def server():
  serving = Server()
  yield serving
  serving.stop()


@pytest.fixture
def cache(tmp_path, monkeypatch, server):
  cache_dir = tmp_path / "cache"
  monkeypatch.setenv(downloads.CACHE_ENV, str(cache_dir))
  monkeypatch.setenv(pretrained_models.RELEASE_URL_ENV, server.url + "/bert_models")
  monkeypatch.setenv(pretrained_models.HF_ENDPOINT_ENV, server.url + "/hub")
  return cache_dir


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
  """An original-layout directory: the tiny vocab, a 2-layer config, random weights."""
  config = original_dirs.tiny_config(max_position_embeddings=64)
  return original_dirs.write_original_dir(tmp_path_factory.mktemp("tiny") / "model", config,
                                          original_dirs.random_weights(config, seed=3))


def release_zip(model_dir, folder):
  """The bytes of a zip of `model_dir`'s files, as the release packs them: inside `folder`
  (None: at the root, as some small BERTs' zips). Stored, so a flipped byte is a CRC error."""
  buffer = io.BytesIO()
  with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
    for name in ORIGINAL_NAMES:
      archive.write(model_dir / name, f"{folder}/{name}" if folder else name)
  return buffer.getvalue()


@pytest.fixture
def info_logs(caplog):
  verbosity = absl_logging.get_verbosity()
  absl_logging.set_verbosity(absl_logging.INFO)
  caplog.set_level(logging.INFO)
  yield caplog
  absl_logging.set_verbosity(verbosity)


def files_of(directory):
  return {name: (directory / name).read_bytes() for name in ORIGINAL_NAMES}


def test_a_release_name_downloads_once_then_works_offline(server, cache, tiny_model,
                                                          info_logs):
  name = "uncased_L-12_H-768_A-12"
  archive = release_zip(tiny_model, name)
  server.files[f"/bert_models/2018_10_18/{name}.zip"] = archive
  model = pretrained_models.resolve(name, "init_checkpoint")
  assert model.directory == str(cache / "2018_10_18" / name)
  assert model.do_lower_case is True
  assert files_of(cache / "2018_10_18" / name) == files_of(tiny_model)
  assert sorted(os.listdir(cache / "2018_10_18")) == [name]  # no zip, part or temporary
  logs = info_logs.text
  assert f"downloading {server.url}/bert_models/2018_10_18/{name}.zip: {len(archive)} bytes" \
      in logs
  assert "(100%) MB" in logs
  assert [request[0] for request in server.requests] == ["GET"]

  server.stop()  # the cache alone now: any request would fail
  for same in (name, "bert-base-uncased", f"2018_10_18/{name}/"):
    assert pretrained_models.resolve(same, "init_checkpoint").checkpoint == model.checkpoint
  assert len(server.requests) == 1


def test_a_small_bert_zipped_without_a_folder_is_unpacked_the_same(server, cache, tiny_model):
  server.files["/bert_models/2020_02_20/uncased_L-2_H-128_A-2.zip"] = release_zip(
      tiny_model, None)
  model = pretrained_models.resolve("bert-tiny", "init_checkpoint")
  assert model.directory == str(cache / "2020_02_20" / "uncased_L-2_H-128_A-2")
  assert files_of(cache / "2020_02_20" / "uncased_L-2_H-128_A-2") == files_of(tiny_model)


@pytest.mark.parametrize("how", ["connection_dropped", "partial_file_in_cache"])
def test_a_cut_download_is_resumed_with_a_range_request(server, cache, tiny_model, how):
  name = "cased_L-12_H-768_A-12"
  path = f"/bert_models/2018_10_18/{name}.zip"
  archive = release_zip(tiny_model, name)
  server.files[path] = archive
  half = len(archive) // 2
  if how == "connection_dropped":
    server.cut_once[path] = half
  else:
    (cache / "2018_10_18").mkdir(parents=True)
    (cache / "2018_10_18" / f"{name}.zip.part").write_bytes(archive[:half])
  model = pretrained_models.resolve(name, "init_checkpoint")
  assert ("GET", path, f"bytes={half}-") in server.requests
  assert files_of(cache / "2018_10_18" / name) == files_of(tiny_model)
  assert model.do_lower_case is False
  assert sorted(os.listdir(cache / "2018_10_18")) == [name]


def test_a_corrupted_zip_is_refused_in_one_line_and_leaves_nothing(server, cache, tiny_model):
  name = "uncased_L-24_H-1024_A-16"
  archive = bytearray(release_zip(tiny_model, name))
  vocab_at = archive.index(b"[PAD]\n[UNK]")  # the vocab's data, stored as it is
  archive[vocab_at] ^= 0xFF
  server.files[f"/bert_models/2018_10_18/{name}.zip"] = bytes(archive)
  with pytest.raises(downloads.DownloadError) as raised:
    pretrained_models.resolve(name, "init_checkpoint")
  message = str(raised.value)
  assert "\n" not in message
  assert re.fullmatch(re.escape(str(cache / "2018_10_18" / name)) + r"\.zip: damaged archive "
                      r"\(Bad CRC-32 for file '.*vocab\.txt'\); removed it: the next run "
                      r"downloads it again", message), message
  assert os.listdir(cache / "2018_10_18") == []


def test_names_that_are_nothing_are_one_line_naming_the_flag(server, cache):
  with pytest.raises(errors.UsageError, match=r"^--init_checkpoint=bert-base-uncasd: no such "
                     r"checkpoint, file or directory, and not the name of a released model; "
                     r"did you mean bert-base-uncased\?$"):
    pretrained_models.resolve("bert-base-uncasd", "init_checkpoint")
  with pytest.raises(errors.UsageError, match=r"^--input_dir=nobody/nothing: .* no "
                     "HuggingFace repository of that id"):
    pretrained_models.resolve_input_dir("nobody/nothing", "hf_to_bert")
  assert pretrained_models.resolve("/no/such/model.ckpt", "init_checkpoint") is None
  assert [path for path in cache.rglob("*")
          if path.is_file() and ".locks" not in path.parts] == []


@pytest.fixture(scope="module")
def hub_repo(tmp_path_factory):
  """A repository as transformers' save_pretrained writes it (tiny BertModel, cased)."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.manual_seed(0)
  config = transformers.BertConfig(
      vocab_size=len(original_dirs.VOCAB), hidden_size=16, num_hidden_layers=2,
      num_attention_heads=4, intermediate_size=32, max_position_embeddings=64)
  model = transformers.BertModel(config).eval()
  repo = tmp_path_factory.mktemp("hub") / "repo"
  model.save_pretrained(repo)
  (repo / "vocab.txt").write_text("".join(t + "\n" for t in original_dirs.VOCAB))
  (repo / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
  return repo, model.state_dict()


def test_a_hub_repository_is_fetched_converted_once_then_used_offline(server, cache, hub_repo):
  repo, state = hub_repo
  for path in repo.iterdir():
    server.files[f"/hub/someone/tiny-bert/resolve/main/{path.name}"] = path.read_bytes()
  model = pretrained_models.resolve("someone/tiny-bert", "init_checkpoint")
  assert model.directory == str(cache / "huggingface" / "someone" / "tiny-bert" / "bert")
  assert model.do_lower_case is False
  weights = checkpoint_io.read_checkpoint(model.checkpoint)
  np.testing.assert_array_equal(
      weights["bert/encoder/layer_1/attention/self/query/kernel"],
      state["encoder.layer.1.attention.self.query.weight"].numpy().T)
  asked = {path.rsplit("/", 1)[1] for _, path, _ in server.requests}
  assert {"config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors"} <= asked
  assert "pytorch_model.bin" not in asked  # the first weights file found is enough

  server.stop()
  assert pretrained_models.resolve("someone/tiny-bert", "init_checkpoint") == model
  assert pretrained_models.resolve_input_dir("someone/tiny-bert", "hf_to_bert") == str(
      cache / "huggingface" / "someone" / "tiny-bert" / "hf")
  with pytest.raises(errors.UsageError, match=r"^--do_lower_case=True contradicts "
                     r"--init_checkpoint=.*/bert/bert_model.ckpt, a cased model"):
    pretrained_models.check_case(True, model.checkpoint)


def test_validation_takes_a_name_without_the_network(cache, tiny_model):
  # `cache`'s server URLs are set but the cache is empty: validation must not fetch.
  config = ClassificationConfig(
      task_name="tsv", data_dir=str(SAMPLES_DIR / "classification"), do_predict=True,
      output_dir=str(cache.parent / "out"), init_checkpoint="bert-base-cased",
      bert_config_file=str(tiny_model / "bert_config.json"),
      vocab_file=str(tiny_model / "vocab.txt"), max_seq_length=32)
  with pytest.raises(errors.UsageError, match="^--do_lower_case=True contradicts "
                     "--init_checkpoint=bert-base-cased, a cased model: pass "
                     "--do_lower_case=False"):
    config.validate()
  config.replace(do_lower_case=False).validate()
  with pytest.raises(errors.UsageError, match="^--vocab_file is needed: "
                     "--init_checkpoint=bert-base-cased gives its default only once resolved"):
    config.replace(vocab_file=None, do_lower_case=False).validate()
  assert not cache.exists()


def test_a_runner_takes_a_released_model_by_name_alone(server, cache, tiny_model, tmp_path):
  name = "uncased_L-12_H-768_A-12"
  server.files[f"/bert_models/2018_10_18/{name}.zip"] = release_zip(tiny_model, name)
  result = fine_tuning_runner.run(ClassificationConfig(
      task_name="tsv", data_dir=str(SAMPLES_DIR / "classification"), do_predict=True,
      output_dir=str(tmp_path / "out"), init_checkpoint=name, max_seq_length=32,
      distribution_strategy="one_device"))
  test_rows = len((SAMPLES_DIR / "classification" / "test.tsv").read_text().splitlines()) - 1
  predictions = (tmp_path / "out" / "test_results.tsv").read_text().splitlines()
  assert len(predictions) == test_rows, result
  assert (cache / "2018_10_18" / name / "bert_model.ckpt.index").exists()


def test_a_checkpoint_path_brings_the_files_beside_it(tiny_model, tmp_path):
  config = ClassificationConfig(
      task_name="tsv", data_dir=str(SAMPLES_DIR / "classification"), do_predict=True,
      output_dir=str(tmp_path / "out"), init_checkpoint=str(tiny_model / "bert_model.ckpt"))
  resolved = config.resolve_weights()
  assert resolved.bert_config_file == str(tiny_model / "bert_config.json")
  assert resolved.vocab_file == str(tiny_model / "vocab.txt")
  assert resolved.init_checkpoint == config.init_checkpoint
  given = config.replace(vocab_file=str(tmp_path / "mine.txt")).resolve_weights()
  assert given.vocab_file == str(tmp_path / "mine.txt")
  (tmp_path / "bare").mkdir()
  bare = config.replace(init_checkpoint=str(tmp_path / "bare" / "model.ckpt-5")).resolve_weights()
  assert bare.bert_config_file is None and bare.vocab_file is None


def test_convert_checkpoint_takes_a_name_as_its_input(server, cache, tiny_model, tmp_path):
  name = "uncased_L-2_H-128_A-2"
  server.files[f"/bert_models/2020_02_20/{name}.zip"] = release_zip(tiny_model, None)
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=bert_to_hf",
                                  f"--input_dir={name}", f"--output_dir={tmp_path / 'hf'}")
  assert result.returncode == 0, result.stderr
  assert (tmp_path / "hf" / "vocab.txt").read_bytes() == (tiny_model / "vocab.txt").read_bytes()
  assert json.loads((tmp_path / "hf" / "config.json").read_text())["num_hidden_layers"] == 2
  refused = scripts.run_in_process("convert_checkpoint.py", "--direction=hf_to_bert",
                                   f"--input_dir={name}", f"--output_dir={tmp_path / 'back'}")
  assert refused.returncode == 1
  assert "already in the original layout" in refused.stderr.splitlines()[-1]
