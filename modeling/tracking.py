"""Attributes a `tf.Module` holds without saving them."""

import tensorflow as tf


@tf.__internal__.tracking.no_automatic_dependency_tracking
def set_untracked(module, name, value):
  """Sets `module.name = value` without making `value` part of what `module` saves (checkpoints
  and SavedModels).

  For what a module uses but should not save: a server's Keras model, whose variables it lists
  itself (saving the model too stores every weight twice), or an optimizer's compiled functions
  (a dict keyed by options, which a checkpoint cannot hold).
  """
  setattr(module, name, value)
