"""Plan descriptions with their stored arrays written out as lists of numbers: compares a plan
written now (arrays as base64 float64 bytes, and an explicit strategy's eigendecomposition
stored beside it) with a file written before arrays were stored (lists of numbers, no
eigendecomposition). Decoded here with the standard library and NumPy, not with dpmatrix."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np


def as_lists(d: Any, drop: tuple[str, ...] = ("solution",)) -> Any:
    """``d`` with every ``{"shape", "f8"}`` array as nested lists and the keys ``drop`` removed
    from every explicit-strategy plan (``"format": "dpmatrix.explicit_plan/1"``)."""
    if isinstance(d, dict) and set(d) == {"shape", "f8"}:
        return np.frombuffer(base64.b64decode(d["f8"]), dtype="<f8").reshape(d["shape"]).tolist()
    if isinstance(d, dict):
        explicit = d.get("format") == "dpmatrix.explicit_plan/1"
        return {k: as_lists(v, drop) for k, v in d.items() if not (explicit and k in drop)}
    if isinstance(d, list):
        return [as_lists(v, drop) for v in d]
    return d
