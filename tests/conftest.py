import sys
from pathlib import Path

# tests/ on the path: the brute-force oracle is the package tests/oracle (``import oracle``; it
# never imports dpmatrix), and test helpers are shared as ``from <layer>.test_x import ...``
sys.path.insert(0, str(Path(__file__).parent))
