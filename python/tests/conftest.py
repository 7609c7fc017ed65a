import os
import sys

# The checkout's package when it is not installed (pip install ./python).
try:
    import loom  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
