"""The model: config, Keras layers, encoder, heads, checkpoint names, conversions.

Importing the package imports `base` first, so TensorFlow starts without its start-up lines
(`base/tensorflow_start.py`) whichever package a process imports first.
"""

import base  # noqa: F401  pylint: disable=unused-import
