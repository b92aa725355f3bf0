import sys
from pathlib import Path

# the brute-force oracle lives next to the tests and is imported as a plain module
sys.path.insert(0, str(Path(__file__).parent))
