"""Task families: each package holds one family's reader, features, metrics, post-processing,
`Task`, server and the spec that drives the shared fine-tuning runner. No task imports another."""

import base  # noqa: F401  pylint: disable=unused-import  (TensorFlow without its start-up lines)
