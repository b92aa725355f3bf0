"""``python -m dpmatrix.cli``: the same as ``dpmatrix`` (and ``python -m dpmatrix``)."""

import sys

from . import main

if __name__ == "__main__":  # importing this module runs nothing
    sys.exit(main())
