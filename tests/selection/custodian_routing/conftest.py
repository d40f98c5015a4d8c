"""Engine tests need no database. The suite runs with --import-mode=importlib, so make the local
helper module (custodian_kit) importable by name from these test files."""

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
