"""The compute precision of an export: "float32" or "bfloat16".

A bfloat16 export computes as `--mixed_precision=mixed_bfloat16` trains: its matrix products,
and what runs between them (bias adds, GELU, the attention softmax, which accumulates in float32
inside its kernel), in bfloat16; the residual stream (the layer norms, float32 under every policy,
their outputs and the adds into them) in float32. Its variables are bfloat16 too (Keras's
"bfloat16" policy rather than "mixed_bfloat16"): mixed_bfloat16 would cast every float32 kernel,
and the whole word-embedding table, to bfloat16 on every call, to the same bfloat16 values; stored
once, those casts are gone and the SavedModel's weights take half the bytes. The layer norms'
variables stay float32 (`layer_norm.make_layer_norm`). The servers cast their float outputs to
float32, so the signatures are the same in both.

Usage:
  with export_precision.compute_policy("bfloat16"):
    model = pretraining_model.BertPretrainingModel(bert_config)   # bfloat16 but its norms
  served = export_precision.model_in_precision(trainer.model, "bfloat16")   # a copy
"""

import contextlib

import keras

# precision -> the Keras dtype policy of the models built for it.
POLICIES = {"float32": "float32", "bfloat16": "bfloat16"}
PRECISIONS = tuple(POLICIES)


@contextlib.contextmanager
def compute_policy(precision):
  """The Keras models built inside compute in `precision` (the global dtype policy of
  `POLICIES`, restored on leaving)."""
  if precision not in POLICIES:
    raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(POLICIES[precision])
  try:
    yield
  finally:
    keras.mixed_precision.set_global_policy(previous)


def model_in_precision(model, precision):
  """The model to export in `precision`.

  Args:
    model: a built Keras model whose class rebuilds it from `get_config()` (every
      `config_model.BertConfigModel`), e.g. the trainer's fine-tuned model.
    precision: one of `PRECISIONS`.

  Returns:
    `model` itself when it computes in `precision` already (its dtype policy is the
    precision's); else `model.rebuilt` under the precision's policy: the same class holding a
    copy of `model`'s weights (cast to its variables' dtypes). A model trained under
    mixed_float16 or mixed_bfloat16 is thus exported in float32 unless asked otherwise.
  """
  if model.dtype_policy.name == POLICIES[precision]:
    return model
  return model.rebuilt(POLICIES[precision])
