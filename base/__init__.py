"""The base layer: what every other package may import, importing nothing of the project.

Importing it imports TensorFlow with its start-up lines hidden (`tensorflow_start`), so every
script and test process starts quietly whichever module it imports first.
"""

from base import tensorflow_start

tensorflow_start.import_tensorflow()
