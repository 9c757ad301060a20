"""Files fetched over HTTP(S) into a local cache: resumed, size-checked and unpacked atomically.

`fetch(url, path)` downloads into `<path>.part` and renames it to `path` once it holds every byte
the server announced (`Content-Length`); a download cut short is resumed from the partial file's
size with an HTTP `Range` request, within the same call (a few times) or by the next run.
`unpack_zip` checks every member's CRC-32 while extracting into a temporary directory that is
renamed into place only when complete, so nothing half-written is ever used. `cache_dir` is
where downloads go: `$BERT_CACHE_DIR`, else `$XDG_CACHE_HOME/bert`, else `~/.cache/bert`.

The HTTP here is hand-written on `urllib.request` on purpose: HuggingFace's hub has its own
well-kept client (`huggingface_hub`, used for hub repositories), but for a plain URL no
well-kept library resumes with a `Range` request without pulling in heavy dependencies
(`requests` does not resume; `fsspec`, `pooch` and the like bring their own stacks).
"""

import contextlib
import fcntl
import http.client
import os
import shutil
import urllib.error
import urllib.request
import zipfile
import zlib

from absl import logging

from base import atomic_files
from base import errors
from base import progress as progress_lib

CACHE_ENV = "BERT_CACHE_DIR"
PART_SUFFIX = ".part"
_CHUNK_BYTES = 1 << 20
_MEGABYTE = 1e6


class DownloadError(errors.UserError, OSError):
  """A download or an archive that cannot be used, in one line naming the URL or file."""


class _CutShort(Exception):
  """The connection ended before the last byte (the partial file keeps what arrived)."""


def cache_dir(environ=None):
  """The directory of downloaded models: `$BERT_CACHE_DIR`, else `$XDG_CACHE_HOME/bert`, else
  `~/.cache/bert` (not created here).

  Args:
    environ: the environment variables to read (default `os.environ`).

  Example:
    >>> from base import downloads
    >>> downloads.cache_dir({"XDG_CACHE_HOME": "/data/cache"})
    '/data/cache/bert'
    >>> downloads.cache_dir({"BERT_CACHE_DIR": "/data/bert", "XDG_CACHE_HOME": "/data/cache"})
    '/data/bert'
  """
  environ = os.environ if environ is None else environ
  if environ.get(CACHE_ENV):
    return os.path.expanduser(environ[CACHE_ENV])
  base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "bert")


@contextlib.contextmanager
def locked(path):
  """Holds an exclusive lock on the file `path` (created if needed) for the block: a second
  process fetching the same model waits, then finds it in the cache."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "a", encoding="utf-8") as lock_file:
    fcntl.flock(lock_file, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(lock_file, fcntl.LOCK_UN)


def fetch(url, path, attempts=3, timeout=60.0):
  """Downloads `url` to `path` through `<path>.part`, resuming a partial file, with progress.

  Args:
    url: an http(s) URL.
    path: the local file to write (its directory is created).
    attempts: how many times a connection that ends early is resumed within this call.
    timeout: seconds without data after which a connection counts as cut.

  Returns:
    `path`, complete: as many bytes as the server's `Content-Length` announced.

  Raises:
    DownloadError: the server cannot be reached or refuses (HTTP status), or the connection was
      cut `attempts` times (the partial file stays, for the next run to resume).
  """
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  part = path + PART_SUFFIX
  for _ in range(attempts):
    try:
      _fetch_once(url, part, timeout)
    except _CutShort as cut:
      logging.warning("%s: %s; resuming", url, cut)
      continue
    os.replace(part, path)
    return path
  raise DownloadError(f"{url}: the connection ended early {attempts} times; {part} keeps "
                      f"{os.path.getsize(part)} bytes, which the next run resumes from")


def _fetch_once(url, part, timeout):
  """One request for the bytes `part` lacks; raises `_CutShort` when it ends early."""
  offset = os.path.getsize(part) if os.path.exists(part) else 0
  headers = {"Range": f"bytes={offset}-"} if offset else {}
  try:
    response = urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                      timeout=timeout)
  except urllib.error.HTTPError as error:
    if error.code == 416 and offset:
      # The partial file is as long as the file, or longer (the file changed): start again.
      os.remove(part)
      raise _CutShort(f"the server has no bytes after {offset} (HTTP 416)") from None
    raise DownloadError(f"{url}: HTTP {error.code} {error.reason}") from None
  except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
    reason = getattr(error, "reason", None) or error
    raise DownloadError(f"{url}: cannot download ({reason})") from None
  with response:
    resumed = offset and response.status == 206
    start = offset if resumed else 0  # a server that ignores Range sends the whole file
    length = response.headers.get("Content-Length")
    total = start + int(length) if length is not None else None
    logging.info("downloading %s: %s bytes%s", url, "unknown" if total is None else total,
                 f", resuming at byte {start}" if resumed else "")
    bar = progress_lib.Progress(total=None if length is None else int(length) / _MEGABYTE,
                                unit="MB", count_format=",.1f")
    with open(part, "ab" if resumed else "wb") as output:
      try:
        while chunk := response.read(_CHUNK_BYTES):
          output.write(chunk)
          bar.update(len(chunk) / _MEGABYTE)
      except (http.client.HTTPException, ConnectionError, TimeoutError) as error:
        raise _CutShort(f"the connection broke ({error!r})") from None
      finally:
        bar.close()
  size = os.path.getsize(part)
  if total is not None and size != total:
    raise _CutShort(f"the connection ended at byte {size} of {total}")


def unpack_zip(zip_path, directory, required=(), extra_files=None):
  """Extracts the zip file `zip_path` into `directory`, atomically, every member's CRC-32
  checked; an archive whose members all sit in one top-level folder gives that folder's content.

  Args:
    zip_path: the archive.
    directory: the directory to create (it must not exist).
    required: names of files the unpacked directory must hold (e.g. `("vocab.txt",)`).
    extra_files: `{name: bytes}` written into the directory before it is renamed into place.

  Returns:
    `directory`.

  Raises:
    DownloadError: a damaged archive (bad CRC, truncated, not a zip) or one lacking a
      `required` file; nothing is left under `directory`.
  """
  temporary = atomic_files.temporary_name(directory)
  shutil.rmtree(temporary, ignore_errors=True)
  try:
    with atomic_files.no_space_is_one_line(directory):
      with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(temporary)  # member names with '..' or '/' first are made safe
      content = temporary
      entries = os.listdir(temporary)
      if len(entries) == 1 and os.path.isdir(os.path.join(temporary, entries[0])):
        content = os.path.join(temporary, entries[0])
      missing = [name for name in required if not os.path.isfile(os.path.join(content, name))]
      if missing:
        raise DownloadError(f"{zip_path}: the archive holds no {', '.join(missing)}")
      for name, data in (extra_files or {}).items():
        with open(os.path.join(content, name), "wb") as extra:
          extra.write(data)
      os.rename(content, directory)
  except (zipfile.BadZipFile, zlib.error, EOFError) as error:
    raise DownloadError(f"{zip_path}: damaged archive ({error})") from None
  finally:
    shutil.rmtree(temporary, ignore_errors=True)
  return directory
