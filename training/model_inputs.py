"""Checks of what a script will feed the model against its `bert_config.json`, made before any
work: an id beyond one of the config's embedding tables fails deep inside the graph, or, in an
export, on nearly every request."""

from base import errors
from data import tokenization
from modeling import checkpoint_io


def check_vocab(vocab_file, bert_config, config_file):
  """Raises `errors.UsageError` if `vocab_file` holds more entries than the config's `vocab_size`
  (its last ids would index past the word-embedding table)."""
  vocab_size = len(tokenization.load_vocab(vocab_file))
  if vocab_size > bert_config.vocab_size:
    raise errors.UsageError(f"--vocab_file={vocab_file} has {vocab_size} entries, more than "
                         f"vocab_size {bert_config.vocab_size} of {config_file}")


def check_max_seq_length(max_seq_length, bert_config, config_file, minimum=3):
  """Raises `errors.UsageError` unless `minimum <= max_seq_length <= max_position_embeddings` (3:
  room for [CLS], one word piece and [SEP])."""
  if max_seq_length > bert_config.max_position_embeddings:
    raise errors.UsageError(
        f"--max_seq_length={max_seq_length} exceeds max_position_embeddings "
        f"{bert_config.max_position_embeddings} of {config_file}")
  if max_seq_length < minimum:
    raise errors.UsageError(f"--max_seq_length={max_seq_length}: must be at least {minimum} "
                         "(room for [CLS], a word piece and [SEP] per segment)")


def check_segments(num_segments, bert_config, config_file, reason):
  """Raises `errors.UsageError` if inputs with `num_segments` segments (segment ids 0 ..
  num_segments - 1) do not fit the config's `type_vocab_size`; `reason` says why there are that
  many (e.g. "SQuAD packs question and context")."""
  if num_segments > bert_config.type_vocab_size:
    raise errors.UsageError(
        f"{reason}, but type_vocab_size {bert_config.type_vocab_size} of {config_file} allows "
        f"{bert_config.type_vocab_size} segment(s)")


def check_init_checkpoint(init_checkpoint, bert_config, config_file, allow_partial=False):
  """Raises `checkpoint_io.CheckpointError` if the encoder of `init_checkpoint` has another depth
  (unless `allow_partial`), width or vocabulary than the config: read from the checkpoint's
  index alone, before any data is processed; the load itself checks every variable."""
  prefix = checkpoint_io.resolve_checkpoint(init_checkpoint)
  found = checkpoint_io.encoder_mismatches(
      dict(checkpoint_io.list_checkpoint_variables(prefix)), bert_config,
      compare_depth=not allow_partial)
  if found:
    raise checkpoint_io.CheckpointError(f"{prefix} does not fit {config_file}: "
                                        + "; ".join(found))
