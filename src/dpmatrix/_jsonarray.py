"""Float arrays inside plan files and release manifests, exact and cheap to read.

A plan's solved numbers (a strategy matrix, its eigendecomposition, QuerySmasher's factors) are
written as ``{"shape": [...], "f8": "<base64>"}``: the little-endian IEEE-754 float64 bytes,
so a value read back is the value written, bit for bit, and reading decodes bytes instead of
parsing one JSON number per entry. A release moves large arrays out of its manifest into binary
``.npy`` files listed (with their SHA-256) in the manifest (:mod:`dpmatrix.release._arrays`); the
reader puts the loaded array back as ``{"shape": [...], "array": ndarray}``, which
:func:`array_from_json` accepts as well.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np

__all__ = ["array_from_json", "array_to_json", "is_json_array"]


def array_to_json(a: Any) -> dict[str, Any]:
    """``{"shape": [...], "f8": base64 of the little-endian float64 bytes}`` (C order).

    Examples
    --------
    >>> array_to_json([[1.0, 0.5]])
    {'shape': [1, 2], 'f8': 'AAAAAAAA8D8AAAAAAADgPw=='}
    """
    arr = np.ascontiguousarray(a, dtype="<f8")
    return {"shape": [int(s) for s in arr.shape], "f8": base64.b64encode(arr.tobytes()).decode("ascii")}


def is_json_array(d: Any) -> bool:
    """True for what :func:`array_to_json` writes (or a release reader put back)."""
    return isinstance(d, dict) and "shape" in d and ("f8" in d or "array" in d) and len(d) == 2


def array_from_json(d: Any, error: type[Exception], what: str) -> np.ndarray:
    """The read-only float64 array described by ``d`` (:func:`array_to_json`'s form, or
    ``{"shape", "array"}`` holding an array already read from a release file); anything else —
    a wrong shape, bytes of the wrong length, invalid base64 — raises ``error`` naming ``what``.

    Examples
    --------
    >>> array_from_json({"shape": [1, 2], "f8": "AAAAAAAA8D8AAAAAAADgPw=="}, ValueError, "x")
    array([[1. , 0.5]])
    """
    if not is_json_array(d):
        raise error(f"{what} is not a stored array (expected shape and f8)")
    try:
        shape = tuple(int(s) for s in d["shape"])
        if any(s < 0 for s in shape):
            raise ValueError(f"negative shape {list(shape)}")
        if "array" in d:
            a = np.asarray(d["array"])
            if a.dtype != np.float64 or a.shape != shape:
                raise ValueError(f"a {a.dtype} array of shape {list(a.shape)}, stated {list(shape)}")
        else:
            raw = base64.b64decode(str(d["f8"]).encode("ascii"), validate=True)
            if len(raw) != 8 * math.prod(shape):
                raise ValueError(f"{len(raw)} bytes for shape {list(shape)}")
            a = np.frombuffer(raw, dtype="<f8").reshape(shape).astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise error(f"{what} is not a valid stored array ({exc})") from None
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.setflags(write=False)
    return a
