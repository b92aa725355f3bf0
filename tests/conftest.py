import sys
from pathlib import Path

# tests/ on the path: the brute-force oracle is the package tests/oracle (``import oracle``; it
# never imports dpmatrix), and test helpers are shared as ``from <layer>.test_x import ...``
sys.path.insert(0, str(Path(__file__).parent))


# every release is charged to a privacy-budget ledger: tests use a throw-away one, never the
# user's ~/.local/share/dpmatrix/ledger.sqlite3 (tests that need their own pass --ledger)
import os as _os
import tempfile as _tempfile

_os.environ["DPMATRIX_LEDGER"] = _os.path.join(_tempfile.mkdtemp(prefix="dpmatrix-test-ledger-"), "ledger.sqlite3")
