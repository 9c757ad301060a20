"""Runs one of the project's scripts with its files on TensorFlow's in-memory `ram://` file system.

`ram://` lives inside one process, so this wrapper copies the inputs in, runs the script in its
own process (as `python script.py`, through runpy), then copies the outputs out and writes a JSON
listing of every `ram://` file the script left.

Usage:
  python tests/ram_fs_run.py --in LOCAL=ram://... --out ram://...=LOCAL --listing FILE \
      -- script.py --flag=ram://... ...

Exits with the script's exit status.
"""

import atexit
import json
import os
import runpy
import sys

import tensorflow as tf


def copy_tree(source, target):
  """Copies a file, or a directory recursively, from the local disk to ram:// or back."""
  if source.startswith("ram://"):
    files = [name for name in ram_files() if name == source or name.startswith(source + "/")]
  else:
    files = ([source] if os.path.isfile(source) else
             [os.path.join(directory, name) for directory, _, names in os.walk(source)
              for name in names])
  for name in files:
    destination = target if name == source else os.path.join(target,
                                                              os.path.relpath(name, source))
    tf.io.gfile.makedirs(os.path.dirname(destination))
    # ram:// appends to a file that exists instead of replacing it.
    if tf.io.gfile.exists(destination):
      tf.io.gfile.remove(destination)
    tf.io.gfile.copy(name, destination)


def ram_files():
  """Every file on ram://, by path. (Its directories are not listed by `listdir` unless made by
  `makedirs`, so the files are found by globbing each depth.)"""
  names = set()
  for depth in range(1, 10):
    names.update(tf.io.gfile.glob("ram://" + "/".join(["*"] * depth)))
  return sorted(name for name in names if not any(other.startswith(name + "/") for other in names))


def main(argv):
  separator = argv.index("--")
  options, command = argv[1:separator], argv[separator + 1:]
  copies_in, copies_out, listing = [], [], None
  for option, value in zip(options[::2], options[1::2]):
    if option == "--in":
      copies_in.append(value.split("=", 1))
    elif option == "--out":
      copies_out.append(value.split("=", 1))
    elif option == "--listing":
      listing = value
  for source, target in copies_in:
    copy_tree(source, target)
  sys.argv = command
  status = 0
  try:
    runpy.run_path(command[0], run_name="__main__")
  except SystemExit as exit_:
    status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    if isinstance(exit_.code, str):
      print(exit_.code, file=sys.stderr)
  # The script's exit handlers (which release its output directory's lock) run now, as they would
  # when its own process ends, so that what is copied out is what the script leaves.
  atexit._run_exitfuncs()
  if status == 0:
    for source, target in copies_out:
      copy_tree(source, target)
  if listing:
    with open(listing, "w", encoding="utf-8") as f:
      json.dump(ram_files(), f)
  return status


if __name__ == "__main__":
  sys.exit(main(sys.argv))
