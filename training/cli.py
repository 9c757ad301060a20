"""Entry point of the runners: an absl app whose bad-input errors end in one line, exit status 1."""

import os
import sys

from absl import app

from data import file_patterns
from data import tokenization
from modeling import bert_config
from modeling import checkpoint_io
from modeling import hf_conversion
from serving import saved_model_export
from training import distribution
from training import engine


class UsageError(ValueError):
  """A flag value a runner cannot use (named in the message)."""

USER_ERRORS = (
    UsageError,
    bert_config.ConfigError,
    tokenization.VocabError,
    checkpoint_io.CheckpointError,
    hf_conversion.ConversionError,
    distribution.DistributionError,
    engine.ConfigError,
    engine.NonFiniteLossError,
    file_patterns.InputError,
    saved_model_export.ExportError,
)


def run(main):
  """`absl.app.run(main)`, printing `<script>: error: <message>` instead of a traceback for
  `USER_ERRORS` (bad flags, files, checkpoints, TPU address, or a diverged loss)."""
  def main_with_clear_errors(argv):
    try:
      return main(argv)
    except USER_ERRORS as error:
      sys.exit(f"{os.path.basename(sys.argv[0])}: error: {error}")
  app.run(main_with_clear_errors)
