"""What this machine's processor computes in hardware: bfloat16 dot products, and the width of
its x86 vectors.

Without bfloat16 dot-product instructions TensorFlow emulates bfloat16 matrix products with
float32 ones plus conversions, which is slower than float32 alone; a bfloat16 export is worth it
only with them.
Read from Linux's /proc/cpuinfo: x86 `avx512_bf16` (Cooper Lake, Zen 4 and later) or
`amx_bf16` (Sapphire Rapids and later) among the `flags`, Arm `bf16` (Armv8.6, e.g. Graviton3)
among the `Features`. Elsewhere (no /proc/cpuinfo) the answer is False.

Example:
  >>> from base import cpu_features
  >>> cpu_features.has_bfloat16_dot_product("flags\\t\\t: fpu sse2 avx512f avx512_bf16\\n")
  True
  >>> cpu_features.has_bfloat16_dot_product("flags\\t\\t: fpu sse2 avx2 avx512f\\n")
  False
  >>> cpu_features.has_bfloat16_dot_product("Features\\t: fp asimd sve bf16\\n")
  True
  >>> cpu_features.is_avx2_without_avx512("flags\\t\\t: fpu sse2 avx2 fma\\n")
  True
  >>> cpu_features.is_avx2_without_avx512("flags\\t\\t: fpu sse2 avx2 fma avx512f\\n")
  False
"""

CPUINFO = "/proc/cpuinfo"
# The feature names that mean bfloat16 dot-product instructions, as /proc/cpuinfo spells them.
BFLOAT16_DOT_PRODUCT_FEATURES = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def feature_names(cpuinfo=None):
  """The feature names of the `flags` (x86) and `Features` (Arm) lines of a /proc/cpuinfo text.

  Args:
    cpuinfo: the text of /proc/cpuinfo; default this machine's (none where there is none).

  Returns:
    a set of strings, e.g. {"fpu", "avx512_bf16", ...}.
  """
  if cpuinfo is None:
    try:
      with open(CPUINFO, encoding="utf-8", errors="replace") as f:
        cpuinfo = f.read()
    except OSError:
      return set()
  features = set()
  for line in cpuinfo.splitlines():
    key, _, value = line.partition(":")
    if key.strip() in ("flags", "Features"):
      features.update(value.split())
  return features


def has_bfloat16_dot_product(cpuinfo=None):
  """Whether the processor has bfloat16 dot-product instructions.

  Args:
    cpuinfo: a /proc/cpuinfo text; default this machine's (False where there is none).

  Returns:
    a bool.
  """
  return bool(feature_names(cpuinfo) & BFLOAT16_DOT_PRODUCT_FEATURES)


def is_avx2_without_avx512(cpuinfo=None):
  """Whether the processor is an x86 one with AVX2 and without AVX-512 (`avx512f`): oneDNN's
  products then run on 256-bit vectors, and some favour other kernel layouts
  (`serving.servable.served_copy`).

  Args:
    cpuinfo: a /proc/cpuinfo text; default this machine's (False where there is none).

  Returns:
    a bool.
  """
  features = feature_names(cpuinfo)
  return "avx2" in features and "avx512f" not in features
