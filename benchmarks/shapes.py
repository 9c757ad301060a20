"""The BERT shapes the step benchmarks run at, shared by `model_step.py`, `fine_tuning.py`,
`serving.py` and `serving_profile.py`.

A module of its own, without flags: `model_step.py` and `fine_tuning.py` define flags of the same
names (`--shapes`, `--steps`, `--threads`), so neither can import the other.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Shape:
  """Model dimensions of one benchmark shape, and `model_step.py`'s pretraining batch.

  Attributes:
    name: the key in `SHAPES` (`--shapes`).
    num_layers, hidden_size, num_heads, intermediate_size, vocab_size: the model.
    seq_length, batch_size, num_predictions: tokens per example, examples per step and masked
      positions per example of `model_step.py`'s batch (`fine_tuning.py` and `serving.py` take
      theirs from their flags).
  """
  name: str
  num_layers: int
  hidden_size: int
  num_heads: int
  intermediate_size: int
  vocab_size: int = 30522
  seq_length: int = 128
  batch_size: int = 8
  num_predictions: int = 20


SHAPES = {
    "base": Shape("base", num_layers=12, hidden_size=768, num_heads=12, intermediate_size=3072),
    "minilm": Shape("minilm", num_layers=6, hidden_size=384, num_heads=12,
                    intermediate_size=1536),
}
