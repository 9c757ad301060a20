"""The `>>>` examples of the project's docstrings run, and print what they say.

Each module's examples run in a fresh directory holding `vocab.txt` (the special tokens, then
`hello , world !`, so "Hello, world!" is ids 5-8) and `bert_config.json` (a 2-layer, 16-wide model
over that vocab), with these names defined besides the module's own: `tf`, `np`, `bert_config`
(that config), `ids`, `mask`, `segments`, a batch of 2 sequences of 8 (`[2, 8]` int32), and for
the trainer's examples `strategy` (the default), `run_config` (output in `output/`, 10 steps) and
`optimizer_fn` (AdamWeightDecay with warmup).

Examples that need data files or write exports (the engine's, the servers', the runner's) are
usage blocks without `>>>`; their behaviour is tested end to end elsewhere.
"""

import doctest
import importlib
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from modeling import optimization
from tests.conftest import REPO_ROOT
from training import engine

PACKAGES = ("base", "data", "modeling", "training", "serving", "tasks")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", ",", "world", "!"]
CONFIG = {"vocab_size": len(VOCAB), "hidden_size": 16, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32,
          "type_vocab_size": 2}


def _modules_with_examples():
  names = []
  for package in PACKAGES:
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
      if ">>>" in path.read_text(encoding="utf-8"):
        names.append(".".join(path.relative_to(REPO_ROOT).with_suffix("").parts))
  return names


def test_modules_with_examples_are_found():
  assert "data.tokenization" in _modules_with_examples()


@pytest.mark.parametrize("module_name", _modules_with_examples())
def test_docstring_examples_run(module_name, tmp_path, monkeypatch):
  (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
  (tmp_path / "bert_config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
  monkeypatch.chdir(tmp_path)
  module = importlib.import_module(module_name)
  ids = tf.constant(np.arange(16).reshape(2, 8) % len(VOCAB), tf.int32)
  extraglobs = {"tf": tf, "np": np, "bert_config": bert_config_lib.BertConfig(**CONFIG),
                "ids": ids, "mask": tf.ones_like(ids), "segments": tf.zeros_like(ids),
                "strategy": tf.distribute.get_strategy(),
                "run_config": engine.RunConfig(output_dir="output", num_train_steps=10,
                                               train_batch_size=2),
                "optimizer_fn": lambda: optimization.create_optimizer(1e-4, 10, 1)}
  results = doctest.testmod(module, extraglobs=extraglobs, optionflags=doctest.ELLIPSIS,
                            raise_on_error=False, verbose=False)
  assert results.attempted > 0
  assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed"
  assert os.getcwd() == str(tmp_path)
