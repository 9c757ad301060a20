"""Started by every child process of the tests (`tests/conftest.py` puts this folder first on their
PYTHONPATH): they run without the test-only packages, as on a runtime-only install.

Keras imports scikit-learn at start-up whenever it is installed, about 0.6 s of each child's
start; no project module uses it. A `None` entry in `sys.modules` makes `import sklearn` raise
ImportError, which Keras expects when it is absent.
"""

import sys

sys.modules["sklearn"] = None
