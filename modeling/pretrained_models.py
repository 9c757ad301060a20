"""Pretrained weights by name: the original release's models and HuggingFace repositories,
downloaded once into a cache and used from there in the original layout.

What a value of `--init_checkpoint` (or `convert_checkpoint.py --input_dir`) means, in order:
  1. an existing path (a file, a directory, a checkpoint prefix), or any `scheme://` path, is
     that path, whatever its name;
  2. a released model's name, `[<date>/]<name>` (e.g. `uncased_L-12_H-768_A-12`,
     `2020_02_20/uncased_L-4_H-256_A-4`), or one of `ALIASES` (e.g. `bert-base-uncased`), is
     that model's zip from the original release (`$BERT_MODELS_URL`, default
     `https://storage.googleapis.com/bert_models`). The aliases are HuggingFace's own names of
     the same releases, whose hub copies are conversions of these zips: a name without `/` is
     always the release, `google-bert/bert-base-uncased` the hub's copy;
  3. `owner/name`, when no local directory `owner` exists, is a HuggingFace repository
     (`$HF_ENDPOINT`, default `https://huggingface.co`), fetched with `huggingface_hub` and
     converted to the original layout once;
  4. anything else is refused in one line naming the flag.

Cache layout (`base.downloads.cache_dir()`): `<cache>/<date>/<name>/` for a release,
`<cache>/huggingface/<owner>/<name>/hf/` (the hub's files) and `.../bert/` (converted) for a
repository. A model found there is used without any network access; delete its directory to
fetch it again.
"""

import dataclasses
import difflib
import os
import re
import shutil

from absl import logging
import huggingface_hub
from huggingface_hub import errors as hub_errors
import tensorflow as tf

from base import atomic_files
from base import downloads
from base import errors
from modeling.conversion import hf_metadata
from modeling.conversion import huggingface

RELEASE_URL_ENV = "BERT_MODELS_URL"
DEFAULT_RELEASE_URL = "https://storage.googleapis.com/bert_models"
HF_ENDPOINT_ENV = "HF_ENDPOINT"

CHECKPOINT = "bert_model.ckpt"
CONFIG = "bert_config.json"
VOCAB = "vocab.txt"
ORIGINAL_FILES = (CONFIG, VOCAB, CHECKPOINT + ".index")
HF_TOKENIZER_CONFIG = hf_metadata.TOKENIZER_CONFIG
# The weights of a hub repository, in the order looked for.
HF_WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin", "tf_model.h5")


@dataclasses.dataclass(frozen=True)
class Release:
  """A model of the original release.

  Attributes:
    date: its folder under the release's URL, e.g. "2018_10_18".
    name: e.g. "uncased_L-12_H-768_A-12".
    do_lower_case: whether it was pretrained on lower-cased text.
  """
  date: str
  name: str
  do_lower_case: bool

  def url(self, base_url):
    """The zip's URL under `base_url` (the release's root)."""
    return f"{base_url.rstrip('/')}/{self.date}/{self.name}.zip"


def _releases():
  models = [("2018_10_18", "uncased_L-12_H-768_A-12", True),
            ("2018_10_18", "uncased_L-24_H-1024_A-16", True),
            ("2018_10_18", "cased_L-12_H-768_A-12", False),
            ("2018_10_18", "cased_L-24_H-1024_A-16", False),
            ("2018_11_23", "multi_cased_L-12_H-768_A-12", False),
            ("2018_11_03", "multilingual_L-12_H-768_A-12", True),
            ("2018_11_03", "chinese_L-12_H-768_A-12", True),
            ("2019_05_30", "wwm_uncased_L-24_H-1024_A-16", True),
            ("2019_05_30", "wwm_cased_L-24_H-1024_A-16", False)]
  models += [("2020_02_20", f"uncased_L-{layers}_H-{hidden}_A-{hidden // 64}", True)
             for layers in (2, 4, 6, 8, 10, 12) for hidden in (128, 256, 512, 768)]
  return [Release(*model) for model in models]


RELEASES = _releases()
# `<date>/<name>` -> Release; a bare `<name>` -> its first release (the 2018 BERT-Base, not
# the 2020 small-BERT release's retrained copy, `2020_02_20/uncased_L-12_H-768_A-12`).
_BY_NAME = {}
for _release in RELEASES:
  _BY_NAME[f"{_release.date}/{_release.name}"] = _release
  _BY_NAME.setdefault(_release.name, _release)

ALIASES = {
    "bert-base-uncased": "uncased_L-12_H-768_A-12",
    "bert-large-uncased": "uncased_L-24_H-1024_A-16",
    "bert-base-cased": "cased_L-12_H-768_A-12",
    "bert-large-cased": "cased_L-24_H-1024_A-16",
    "bert-base-multilingual-cased": "multi_cased_L-12_H-768_A-12",
    "bert-base-multilingual-uncased": "multilingual_L-12_H-768_A-12",
    "bert-base-chinese": "chinese_L-12_H-768_A-12",
    "bert-large-uncased-whole-word-masking": "wwm_uncased_L-24_H-1024_A-16",
    "bert-large-cased-whole-word-masking": "wwm_cased_L-24_H-1024_A-16",
    # The original README's names of four small BERTs.
    "bert-tiny": "2020_02_20/uncased_L-2_H-128_A-2",
    "bert-mini": "2020_02_20/uncased_L-4_H-256_A-4",
    "bert-small": "2020_02_20/uncased_L-4_H-512_A-8",
    "bert-medium": "2020_02_20/uncased_L-8_H-512_A-8",
}

# HuggingFace's rule for a repository id: `owner/name`, letters, digits, `-`, `_` and `.`.
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
# The original's test of a checkpoint path: `.../<model name>/bert_model.ckpt`.
_NAMED_CHECKPOINT = re.compile(r"^.*?([A-Za-z0-9_-]+)/bert_model\.ckpt")


@dataclasses.dataclass(frozen=True)
class PretrainedModel:
  """A model resolved to a directory in the original layout.

  Attributes:
    name: what the flag said, e.g. "bert-base-uncased".
    directory: the directory holding `bert_config.json`, `vocab.txt`, `bert_model.ckpt.*`.
    do_lower_case: whether the model expects lower-cased text, or None when unknown.
    source_dir: the files it came from (the hub's, for a repository), or `directory`.
  """
  name: str
  directory: str
  do_lower_case: bool | None
  source_dir: str

  @property
  def checkpoint(self):
    return os.path.join(self.directory, CHECKPOINT)

  @property
  def bert_config_file(self):
    return os.path.join(self.directory, CONFIG)

  @property
  def vocab_file(self):
    return os.path.join(self.directory, VOCAB)


def release_of(value):
  """The `Release` a value names (`[<date>/]<name>` or an alias), or None.

  Example:
    >>> from modeling import pretrained_models
    >>> pretrained_models.release_of("bert-base-cased")
    Release(date='2018_10_18', name='cased_L-12_H-768_A-12', do_lower_case=False)
    >>> pretrained_models.release_of("2020_02_20/uncased_L-12_H-768_A-12").date
    '2020_02_20'
    >>> pretrained_models.release_of("google-bert/bert-base-cased") is None
    True
  """
  if not value:
    return None
  value = value.rstrip("/")
  return _BY_NAME.get(ALIASES.get(value, value))


def _is_path(value):
  return "://" in value or any(os.path.exists(os.path.expanduser(path))
                               for path in (value, value + ".index"))


def is_known_name(value):
  """True if `value` names a released model (rule 2 of the module's docstring) and is not a
  path: checked without network access, so that a config's `validate()` can accept it."""
  return bool(value) and release_of(value) is not None and not _is_path(value)


def _is_repo_id(value):
  return (_REPO_ID.fullmatch(value) is not None and ".." not in value and "--" not in value
          and not os.path.isdir(value.split("/")[0]))


def resolve(value, flag, cache_dir=None):
  """The `PretrainedModel` that `value` names, downloaded (and converted) into the cache if it
  is not there yet; None for a path, left to the caller's own checks.

  Args:
    value: the flag's value (see the module's docstring for the rules).
    flag: the flag's name, for the messages, e.g. "init_checkpoint".
    cache_dir: the cache (default `base.downloads.cache_dir()`).

  Raises:
    errors.UsageError: a value that is no path, release name or hub repository.
    downloads.DownloadError: a download or archive that failed (one line).
  """
  if not value or _is_path(value):
    return None
  cache_dir = cache_dir or downloads.cache_dir()
  release = release_of(value)
  if release is not None:
    return _release_model(value, release, cache_dir)
  if _is_repo_id(value):
    return _hub_model(value, flag, cache_dir)
  if "/" in value.strip("/"):
    return None  # a path whose directory exists: its own checks say what is missing
  close = difflib.get_close_matches(value, list(_BY_NAME) + list(ALIASES), n=1)
  hint = f"; did you mean {close[0]}?" if close else (
      " (a HuggingFace repository id is owner/name, e.g. google-bert/bert-base-uncased)")
  raise errors.UsageError(f"--{flag}={value}: no such checkpoint, file or directory, and not "
                          f"the name of a released model{hint}")


def _release_model(value, release, cache_dir):
  parent = os.path.join(cache_dir, release.date)
  directory = os.path.join(parent, release.name)
  model = PretrainedModel(value, directory, release.do_lower_case, directory)
  if os.path.isdir(directory):
    return model
  with downloads.locked(os.path.join(cache_dir, ".locks", f"{release.date}-{release.name}")):
    if os.path.isdir(directory):  # another process fetched it while this one waited
      return model
    atomic_files.remove_stale_temporaries(parent, release.name)
    zip_path = directory + ".zip"
    downloads.fetch(release.url(os.environ.get(RELEASE_URL_ENV) or DEFAULT_RELEASE_URL),
                    zip_path)
    try:
      downloads.unpack_zip(zip_path, directory, required=ORIGINAL_FILES)
    except downloads.DownloadError as error:
      raise downloads.DownloadError(f"{error}; removed it: the next run downloads it again")
    finally:
      os.remove(zip_path)  # unpacked, or refused
  logging.info("%s: unpacked into %s", value, directory)
  return model


def _hub_model(repo_id, flag, cache_dir):
  base = os.path.join(cache_dir, "huggingface", repo_id)
  hub_dir, directory = os.path.join(base, "hf"), os.path.join(base, "bert")
  if not os.path.isdir(directory):
    with downloads.locked(os.path.join(cache_dir, ".locks", repo_id.replace("/", "--"))):
      if not os.path.isdir(directory):
        try:
          _hub_download(repo_id, flag, hub_dir)
        except errors.UsageError:  # no such repository, or not one to use: keep nothing
          shutil.rmtree(base, ignore_errors=True)
          raise
        atomic_files.remove_stale_temporaries(base, "bert")
        temporary = atomic_files.temporary_name(directory)
        try:
          huggingface.convert_hf_to_original(hub_dir, temporary)
          os.rename(temporary, directory)
        finally:
          shutil.rmtree(temporary, ignore_errors=True)
        logging.info("%s: converted to the original layout in %s", repo_id, directory)
  return PretrainedModel(repo_id, directory, hf_metadata.read_do_lower_case(directory), hub_dir)


def _hub_download(repo_id, flag, hub_dir):
  """Fetches a repository's config, vocab, tokenizer config and first weights file into
  `hub_dir` with `huggingface_hub` (which resumes and checks sizes itself)."""
  # huggingface_hub reads HF_ENDPOINT once, at import; read it at each call.
  endpoint = os.environ.get(HF_ENDPOINT_ENV)

  def fetch(filename):
    try:
      return huggingface_hub.hf_hub_download(repo_id, filename, local_dir=hub_dir,
                                             endpoint=endpoint)
    except hub_errors.RepositoryNotFoundError:
      raise errors.UsageError(
          f"--{flag}={repo_id}: no such checkpoint, file or directory, not the name of a "
          "released model, and no HuggingFace repository of that id (or a private or gated "
          "one: log in with `hf auth login`)") from None
    except hub_errors.LocalEntryNotFoundError as error:  # the hub cannot be reached
      raise downloads.DownloadError(f"--{flag}={repo_id}: cannot download {filename} from the "
                                    f"HuggingFace hub ({_first_line(error)})") from None
    except hub_errors.EntryNotFoundError:
      return None
    except (hub_errors.HfHubHTTPError, OSError) as error:
      raise downloads.DownloadError(f"--{flag}={repo_id}: cannot download {filename} from "
                                    f"the HuggingFace hub ({_first_line(error)})") from None

  logging.info("%s: downloading from the HuggingFace hub into %s", repo_id, hub_dir)
  for filename in (huggingface.HF_CONFIG, VOCAB):
    if fetch(filename) is None:
      raise errors.UsageError(f"--{flag}={repo_id}: the repository has no {filename}, which "
                              "the original layout needs")
  fetch(HF_TOKENIZER_CONFIG)
  if not any(fetch(filename) for filename in HF_WEIGHTS_FILES):
    raise errors.UsageError(f"--{flag}={repo_id}: the repository has none of "
                            f"{', '.join(HF_WEIGHTS_FILES)}")


def _first_line(error):
  text = str(error).strip()
  return text.splitlines()[0] if text else repr(error)


def check_case(do_lower_case, init_checkpoint):
  """The original's `validate_case_matches_checkpoint`, for every released model: raises if
  `do_lower_case` contradicts the model that `init_checkpoint` names, whether by its name, by
  a path `.../<name>/bert_model.ckpt`, or by the HuggingFace `tokenizer_config.json` beside it.

  Raises:
    errors.UsageError: naming both flags and the value to pass.

  Example:
    >>> from modeling import pretrained_models
    >>> pretrained_models.check_case(False, "cased_L-12_H-768_A-12")
    >>> pretrained_models.check_case(True, "models/wwm_cased_L-24_H-1024_A-16/bert_model.ckpt")
    Traceback (most recent call last):
    ...
    base.errors.UsageError: --do_lower_case=True contradicts --init_checkpoint=models/...
  """
  if not init_checkpoint:
    return
  release = release_of(init_checkpoint)
  match = _NAMED_CHECKPOINT.match(init_checkpoint)
  if release is None and match:
    release = release_of(match.group(1))
  if release is not None:
    expected = release.do_lower_case
  elif os.path.basename(init_checkpoint) == CHECKPOINT and "://" not in init_checkpoint:
    expected = hf_metadata.read_do_lower_case(os.path.dirname(init_checkpoint) or ".")
  else:
    expected = None
  if expected is None or expected == do_lower_case:
    return
  raise errors.UsageError(
      f"--do_lower_case={do_lower_case} contradicts --init_checkpoint={init_checkpoint}, a "
      f"{'lower-cased' if expected else 'cased'} model: pass --do_lower_case={expected}, as "
      "the model was pretrained")


def _files_beside(checkpoint):
  """`(bert_config.json, vocab.txt)` in the directory of a checkpoint path (a prefix or a
  directory), each None where the directory has no such file."""
  directory = checkpoint if tf.io.gfile.isdir(checkpoint) else os.path.dirname(checkpoint)
  return tuple(path if tf.io.gfile.exists(path) else None
               for path in (os.path.join(directory, CONFIG), os.path.join(directory, VOCAB)))


def resolve_config(config, flag="init_checkpoint"):
  """`config` with the model its `flag` names resolved (`resolve`): the flag set to the
  model's checkpoint, and `bert_config_file` and `vocab_file`, the config's fields that are
  unset, to the model's files. For a path, those fields default to the `bert_config.json` and
  `vocab.txt` beside the checkpoint, when it has them (a released model's directory, a
  conversion's output, a run's `--output_dir`).

  Args:
    config: a `base.config.FlagConfig` with a field `flag`.
    flag: the field that may name a model.
  """
  value = getattr(config, flag)
  model = resolve(value, flag)
  if model is None:
    if not value:
      return config
    changes = {}
    bert_config_file, vocab_file = _files_beside(value)
  else:
    changes = {flag: model.checkpoint}
    bert_config_file, vocab_file = model.bert_config_file, model.vocab_file
    logging.info("--%s=%s: using %s", flag, value, model.directory)
  for field, path in (("bert_config_file", bert_config_file), ("vocab_file", vocab_file)):
    if path and hasattr(config, field) and getattr(config, field) is None:
      changes[field] = path
      if model is None:
        logging.info("--%s=%s: the one beside --%s", field, path, flag)
  return config.replace(**changes) if changes else config


def resolve_input_dir(input_dir, direction):
  """`convert_checkpoint.py`'s `--input_dir` with a model's name resolved: the hub's files for
  `hf_to_bert`, the original layout for `bert_to_*`; any other direction, or a path, as it is.

  Example:
    >>> from modeling import pretrained_models
    >>> pretrained_models.resolve_input_dir("keras_hub_preset", "keras_hub_to_bert")
    'keras_hub_preset'
  """
  if direction != "hf_to_bert" and not direction.startswith("bert_to_"):
    return input_dir
  model = resolve(input_dir, "input_dir")
  if model is None:
    return input_dir
  if direction == "hf_to_bert":
    if model.source_dir == model.directory:
      raise errors.UsageError(f"--input_dir={input_dir} names a model of the original release, "
                              "already in the original layout: use it directly, or "
                              "--direction=bert_to_hf")
    return model.source_dir
  return model.directory


class WeightsByName:
  """Mixin of a run config whose `init_checkpoint` may name a pretrained model: the run calls
  `resolve_weights()` first (validation never touches the network)."""

  def resolve_weights(self):
    """This config with its --init_checkpoint's model resolved (`resolve_config`)."""
    return resolve_config(self)

  def check_model_files(self, names=("bert_config_file", "vocab_file")):
    """Raises `errors.UsageError` for the first of the fields `names` that is unset: each is
    needed, unless --init_checkpoint names a model (its files are then the defaults, which
    `resolve_weights()` sets)."""
    for name in names:
      if getattr(self, name) is None:
        raise errors.UsageError(
            f"--{name} is needed" + (
                f": --init_checkpoint={self.init_checkpoint} gives its default only once "
                "resolved (run() does it first; or call config.resolve_weights())"
                if is_known_name(self.init_checkpoint) else
                " (or an --init_checkpoint naming a released or HuggingFace model, or beside "
                "which it lies, whose file it then defaults to)"))
