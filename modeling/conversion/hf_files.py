"""Reading the weight files of a HuggingFace BERT directory, whatever the format.

A HuggingFace directory holds its weights in one of three formats; when it has several, the first
of this order is read (they hold the same weights, and the first needs the least to read):
  1. `model.safetensors`, or the shards its `model.safetensors.index.json` lists: safetensors'
     numpy API, no torch, no pickle.
  2. `pytorch_model.bin`, or the shards of `pytorch_model.bin.index.json`: `torch.save`'s zip of
     a pickle and raw storages, read with numpy and an unpickler that accepts only an ordered
     dict of tensors (as `torch.load(weights_only=True)`), so torch is not needed and no code of
     the file runs.
  3. `tf_model.h5`: the Keras-2 `save_weights` file of HuggingFace's TensorFlow classes
     (`TFBertForPreTraining`, ...), read with h5py.
Every tensor comes out under its PyTorch name in the PyTorch layout (`Linear` weights
`[out, in]`), the names `transformers` itself loads: the legacy LayerNorm names that files on the
hub still hold (`LayerNorm.gamma` / `LayerNorm.beta`, which transformers renames on load) become
`LayerNorm.weight` / `LayerNorm.bias`, and TensorFlow names become PyTorch names by the rules of
transformers' `convert_tf_weight_name_to_pt_weight_name`.
"""

import collections
import dataclasses
import io
import os
import pickle
import re
import zipfile

import h5py
import numpy as np
from safetensors import numpy as safetensors_numpy
import tensorflow as tf

from modeling.conversion import original_files
from modeling.conversion.original_files import ConversionError

SAFETENSORS = "model.safetensors"
TORCH = "pytorch_model.bin"
TF_H5 = "tf_model.h5"
INDEX_SUFFIX = ".index.json"
# What is looked for, in order of preference.
WEIGHT_FILES = (SAFETENSORS, TORCH, TF_H5)

_LEGACY_LAYER_NORM = re.compile(r"(?<=\bLayerNorm\.)(gamma|beta)$")


@dataclasses.dataclass(frozen=True)
class HfWeights:
  """The weights of a HuggingFace directory.

  Attributes:
    path: the file read (the shard index of a sharded checkpoint), named in errors.
    tensors: dict PyTorch name -> numpy array, in the PyTorch layout.
    names_in_file: dict PyTorch name -> the tensor's name in the file.
    pytorch_layout: whether the file stores `Linear` weights `[out, in]` (safetensors, torch), or
      `[in, out]` as the original does (TensorFlow's kernels).
  """
  path: str
  tensors: dict
  names_in_file: dict
  pytorch_layout: bool


def weights_file(input_dir):
  """The weights file of `input_dir`: the first of `WEIGHT_FILES` there, as a single file or as
  the index of its shards.

  Raises:
    ConversionError: none of them is there.
  """
  for name in WEIGHT_FILES:
    for candidate in (name + INDEX_SUFFIX, name) if name != TF_H5 else (name,):
      path = os.path.join(input_dir, candidate)
      if tf.io.gfile.exists(path):
        return path
  raise ConversionError(f"{input_dir}: no {', '.join(WEIGHT_FILES[:-1])} or {WEIGHT_FILES[-1]} "
                        "(nor a shard index of the first two)")


def read_weights(input_dir):
  """Reads the weights of `input_dir` (see the module docstring for the formats and names).

  Returns:
    the `HfWeights`.

  Raises:
    ConversionError: a missing, damaged or unreadable file.
  """
  path = weights_file(input_dir)
  if path.endswith(TF_H5):
    names_in_file, tensors = {}, {}
    for tf_name, value in _read_tf_h5(path).items():
      name = tf_to_pytorch_name(tf_name, path)
      names_in_file[name] = tf_name
      # A TensorFlow kernel is `[in, out]`; the transposed view is PyTorch's `[out, in]`.
      tensors[name] = value.T if tf_name.rpartition("/")[2].startswith("kernel") else value
    return HfWeights(path, tensors, names_in_file, pytorch_layout=False)
  read = _read_safetensors if os.path.basename(path).startswith(SAFETENSORS) else _read_torch
  tensors, names_in_file = {}, {}
  for shard in _shards(path):
    for file_name, value in read(shard).items():
      name = _LEGACY_LAYER_NORM.sub(lambda match: {"gamma": "weight", "beta": "bias"}[match[1]],
                                    file_name)
      names_in_file[name] = file_name
      tensors[name] = value
  return HfWeights(path, tensors, names_in_file, pytorch_layout=True)


def tf_to_pytorch_name(tf_name, path):
  """Maps the name of a weight of HuggingFace's TensorFlow BERT to its PyTorch name.

  `tf_bert_for_pre_training/bert/encoder/layer_._0/attention/self/query/kernel:0` ->
  `bert.encoder.layer.0.attention.self.query.weight`, as transformers'
  `convert_tf_weight_name_to_pt_weight_name` maps it: the model's name (level zero) and `:0`
  dropped, `<a>___<b>` scopes become `<b>` (`mlm___cls` -> `cls`), `_._` separates list indices,
  and `kernel`, `embeddings` and `gamma` become `weight`, `beta` becomes `bias`.

  Raises:
    ConversionError: a name with no scope below the model's (naming `path`).
  """
  name = re.sub(r":\d+$", "", tf_name)
  name = re.sub(r"(^|/)[^/]*___([^/]*)(?=/)", r"\1\2", name).replace("_._", "/")
  parts = [part for part in name.split("/") if part][1:]
  if not parts:
    raise ConversionError(f"{path}: unexpected TensorFlow weight {tf_name}")
  parts[-1] = {"kernel": "weight", "embeddings": "weight", "gamma": "weight",
               "beta": "bias"}.get(parts[-1], parts[-1])
  return ".".join(parts)


def _shards(path):
  """The files of the weights at `path`: the shards its index lists, or `path` itself."""
  if not path.endswith(INDEX_SUFFIX):
    return [path]
  weight_map = original_files.read_json(path).get("weight_map")
  if not isinstance(weight_map, dict) or not weight_map:
    raise ConversionError(f"{path}: no 'weight_map' naming the shards")
  return [os.path.join(os.path.dirname(path), shard) for shard in sorted(set(weight_map.values()))]


def _read_safetensors(path):
  """{name: array} of a safetensors file."""
  contents = original_files.read_bytes(path)
  try:
    return safetensors_numpy.load(contents)
  except Exception as error:  # safetensors raises its own SafetensorError and OSError kinds.
    raise ConversionError(f"{path}: unreadable safetensors file: {error}") from None


# Storage classes torch.save pickles -> numpy dtypes; bfloat16 (which numpy lacks) is read as
# uint16 and widened to float32, which holds every bfloat16 value exactly.
_TORCH_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "BFloat16Storage": np.uint16, "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_}


class _TorchStorage:
  """A storage of a torch zip file: its class name and its bytes as a flat numpy array."""

  def __init__(self, storage_class, values):
    self.storage_class = storage_class
    self.values = values


def _rebuild_tensor(storage, offset, size, stride, *unused_args):
  """`torch._utils._rebuild_tensor_v2` in numpy: the strided view of the storage, copied."""
  itemsize = storage.values.itemsize
  view = np.lib.stride_tricks.as_strided(
      storage.values[offset:], shape=tuple(size), strides=tuple(s * itemsize for s in stride))
  array = np.array(view)
  if storage.storage_class == "BFloat16Storage":
    array = (array.astype(np.uint32) << 16).view(np.float32)
  return array


class _StateDictUnpickler(pickle.Unpickler):
  """Reads a `torch.save`d state dict without torch: only an ordered dict of tensors is
  accepted (the globals torch's own `weights_only` loading allows for one); any other global
  is refused, so no code of the file runs."""

  def __init__(self, data, read_storage):
    super().__init__(data)
    self._read_storage = read_storage

  def find_class(self, module, name):
    if (module, name) == ("collections", "OrderedDict"):
      return collections.OrderedDict
    if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
      return _rebuild_tensor
    if module == "torch" and name in _TORCH_STORAGE_DTYPES:
      return name
    raise pickle.UnpicklingError(f"{module}.{name} is not part of a state dict of tensors")

  def persistent_load(self, pid):
    kind, storage_class, key = pid[0], pid[1], pid[2]
    if kind != "storage" or storage_class not in _TORCH_STORAGE_DTYPES:
      raise pickle.UnpicklingError(f"unexpected persistent id {pid[:2]}")
    return _TorchStorage(storage_class, self._read_storage(key, storage_class))


def _read_torch(path):
  """{name: array} of a `torch.save`d state dict (the zip format of torch 1.6 and later), read
  with numpy alone; bfloat16 as float32."""
  contents = original_files.read_bytes(path)
  try:
    with zipfile.ZipFile(io.BytesIO(contents)) as archive:
      pickles = [name for name in archive.namelist() if name.endswith("/data.pkl")]
      if len(pickles) != 1:
        raise pickle.UnpicklingError("no data.pkl (not the zip format of torch.save)")
      root = pickles[0][:-len("data.pkl")]

      def read_storage(key, storage_class):
        return np.frombuffer(archive.read(f"{root}data/{key}"),
                             dtype=np.dtype(_TORCH_STORAGE_DTYPES[storage_class]).newbyteorder("<"))

      state_dict = _StateDictUnpickler(io.BytesIO(archive.read(pickles[0])), read_storage).load()
  except (zipfile.BadZipFile, pickle.UnpicklingError, KeyError, EOFError, ValueError,
          TypeError, AttributeError, IndexError) as error:
    first_line = (str(error).strip() or type(error).__name__).splitlines()[0]
    raise ConversionError(f"{path}: unreadable PyTorch file: {first_line}") from None
  if not isinstance(state_dict, dict) or not all(
      isinstance(value, np.ndarray) for value in state_dict.values()):
    raise ConversionError(f"{path}: not a state dict of tensors")
  return dict(state_dict)


def _attribute_strings(group, name):
  """The strings of attribute `name` of an h5 group, as Keras 2 stores them: one array, or
  chunks `<name>0`, `<name>1`, ... when they exceed the HDF5 object header limit (64 KiB)."""
  if name in group.attrs:
    chunks = [group.attrs[name]]
  else:
    chunks = []
    while f"{name}{len(chunks)}" in group.attrs:
      chunks.append(group.attrs[f"{name}{len(chunks)}"])
  return [value.decode("utf-8") if isinstance(value, bytes) else str(value)
          for chunk in chunks for value in np.atleast_1d(chunk)]


def _read_tf_h5(path):
  """{TensorFlow weight name: array} of a Keras-2 `save_weights` h5 file.

  The root's `layer_names` attribute lists the model's top-level layers (`bert`, `mlm___cls`,
  ...); each has a group whose `weight_names` attribute lists its weights by their full names
  (`tf_bert_for_pre_training/bert/embeddings/word_embeddings/weight:0`), each stored at that
  path below the group. A weight shared by two layers (the masked LM's tied word embeddings) is
  listed by both.
  """
  contents = original_files.read_bytes(path)
  weights = {}
  try:
    with h5py.File(io.BytesIO(contents), "r") as h5_file:
      layer_names = _attribute_strings(h5_file, "layer_names")
      if not layer_names:
        raise ConversionError(f"{path}: not a Keras weights file of HuggingFace's TensorFlow "
                              "classes (no layer_names)")
      for layer_name in layer_names:
        group = h5_file[layer_name]
        for weight_name in _attribute_strings(group, "weight_names"):
          weights[weight_name] = np.asarray(group[weight_name])
  except (OSError, KeyError) as error:
    raise ConversionError(f"{path}: not a Keras weights file: {error}") from None
  return weights
