"""Model directories in the original layout with random weights, and our encoder's outputs on one."""

import numpy as np

from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import encoder as encoder_lib

# Some letters, some continuations, the special tokens first.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
    f"{'##' if i % 3 == 0 else ''}{chr(97 + i % 26)}{i}" for i in range(35)]


def tiny_config(**overrides):
  """A 2-layer, 4-head, 16-wide `BertConfig` over `VOCAB` (tanh GELU unless overridden)."""
  values = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=32, hidden_act="gelu",
                max_position_embeddings=24, type_vocab_size=2)
  values.update(overrides)
  return bert_config_lib.BertConfig.from_dict(values)


def random_weights(config, seed, with_pretraining_heads=False):
  """{original name: float32 array} for `config`: every variable random, LayerNorm gammas near 1,
  so that a weight mapped to the wrong place changes the outputs."""
  rng = np.random.default_rng(seed)
  shapes = dict(encoder_variable_shapes(config))
  if with_pretraining_heads:
    hidden, vocab = config.hidden_size, config.vocab_size
    shapes.update({"cls/predictions/transform/dense/kernel": [hidden, hidden],
                   "cls/predictions/transform/dense/bias": [hidden],
                   "cls/predictions/transform/LayerNorm/gamma": [hidden],
                   "cls/predictions/transform/LayerNorm/beta": [hidden],
                   "cls/predictions/output_bias": [vocab],
                   "cls/seq_relationship/output_weights": [2, hidden],
                   "cls/seq_relationship/output_bias": [2]})
  return {name: (1.0 if name.endswith("gamma") else 0.0)
                + rng.normal(0, 0.2, shape).astype(np.float32)
          for name, shape in sorted(shapes.items())}


def encoder_variable_shapes(config):
  """[(original name, shape)] of `BertEncoder(config)`'s variables."""
  encoder = encoder_lib.BertEncoder(config)
  return [(name, list(variable.shape)) for name, variable in encoder.name_to_variable().items()]


def write_original_dir(directory, config, weights):
  """Writes `bert_config.json`, `bert_model.ckpt.*` and `vocab.txt` (`VOCAB`) into `directory`."""
  directory.mkdir(parents=True, exist_ok=True)
  config.to_json_file(str(directory / "bert_config.json"))
  (directory / "vocab.txt").write_text("".join(token + "\n" for token in VOCAB), encoding="utf-8")
  checkpoint_io.write_checkpoint(str(directory / "bert_model.ckpt"), weights)
  return directory


def sample_inputs(vocab_size, batch_size=3, seq_length=12, seed=7):
  """`(input_ids, input_mask, segment_ids)` int32 `[batch_size, seq_length]`: `[CLS]` first, two
  segments, rows padded to different lengths."""
  rng = np.random.default_rng(seed)
  input_ids = rng.integers(5, vocab_size, (batch_size, seq_length)).astype(np.int32)
  input_ids[:, 0] = 2
  lengths = np.linspace(seq_length, seq_length // 2, batch_size).astype(int)
  positions = np.arange(seq_length)
  input_mask = (positions[None, :] < lengths[:, None]).astype(np.int32)
  segment_ids = ((positions[None, :] >= lengths[:, None] // 2) * input_mask).astype(np.int32)
  return input_ids * input_mask, input_mask, segment_ids


def encoder_outputs(model_dir, input_ids, input_mask, segment_ids):
  """`(sequence_output, pooled_output)` numpy of our encoder loaded from a directory in the
  original layout (every encoder variable must be in its checkpoint)."""
  config = bert_config_lib.BertConfig.from_json_file(str(model_dir / "bert_config.json"))
  encoder = encoder_lib.BertEncoder(config)
  report = checkpoint_io.assign_from_checkpoint(encoder.name_to_variable(),
                                                str(model_dir / "bert_model.ckpt"))
  assert report["missing"] == [], report["missing"]
  outputs = encoder({"input_ids": input_ids, "input_mask": input_mask,
                     "segment_ids": segment_ids}, training=False)
  return outputs["sequence_output"].numpy(), outputs["pooled_output"].numpy()


def max_difference(ours, theirs):
  """Max abs difference of two `(sequence_output, pooled_output)` pairs (padded positions
  included: both sides compute them from the same weights)."""
  return max(float(np.abs(ours[0] - theirs[0]).max()), float(np.abs(ours[1] - theirs[1]).max()))
