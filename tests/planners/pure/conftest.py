import sys
from pathlib import Path

# pure_oracle.py lives next to these tests and is imported as a plain module
sys.path.insert(0, str(Path(__file__).parent))
