"""A release's large plan arrays in binary files beside the manifest, read back only when the
plan is built.

A plan's ``to_dict`` writes its solved numbers as stored arrays (``{"shape", "f8"}``,
:mod:`dpmatrix._jsonarray`). In a release, every such array of at least :data:`MIN_FLOATS`
numbers is moved into ``plan/array-NNN.npy`` (NumPy's format, little-endian float64) and
replaced in the manifest by ``{"shape": [...], "file": "plan/array-NNN.npy"}``; the files are
listed in the manifest's ``files`` with their SHA-256 like every other file of the release. So
the manifest stays small — listing a release or printing a saved table neither reads nor parses
a strategy — and building the plan reads the bytes, checks their digest and loads them without
parsing text. The plan's own ``from_dict`` then checks the numbers (privacy recomputed from the
strategy, solved quantities verified), as it does for a plan file.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._jsonarray import is_json_array
from ..errors import ReleaseError

__all__ = ["ARRAY_DIR", "MIN_FLOATS", "arrays_in", "arrays_out"]

#: folder of the array files inside a release
ARRAY_DIR = "plan"
#: arrays with fewer numbers stay in the manifest
MIN_FLOATS = 4096


def _is_file_ref(d: Any) -> bool:
    return isinstance(d, dict) and len(d) == 2 and "shape" in d and "file" in d


def arrays_out(spec: Any, stage: Path) -> tuple[Any, list[str]]:
    """``spec`` with every stored array of at least :data:`MIN_FLOATS` numbers written to
    ``stage/plan/array-NNN.npy`` and replaced by a reference; the relative paths written."""
    written: list[str] = []

    def walk(v: Any) -> Any:
        if is_json_array(v) and "f8" in v and math.prod(int(s) for s in v["shape"]) >= MIN_FLOATS:
            rel = f"{ARRAY_DIR}/array-{len(written):03d}.npy"
            a = np.frombuffer(base64.b64decode(v["f8"]), dtype="<f8").reshape([int(s) for s in v["shape"]])
            (stage / ARRAY_DIR).mkdir(exist_ok=True)
            with open(stage / rel, "wb") as f:
                np.save(f, a, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())  # synced before the manifest that lists it, as every file of a release
            written.append(rel)
            return {"shape": list(v["shape"]), "file": rel}
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(spec), written


def arrays_in(spec: Any, folder: Path, digest: Callable[[str], str | None],
              inside: Callable[[Path, Any], Path]) -> Any:
    """``spec`` with every file reference of :func:`arrays_out` replaced by
    ``{"shape", "array"}``, the file's bytes checked against ``digest(rel)`` (``None``: not
    verifying) and confined to the folder by ``inside``; :class:`~dpmatrix.ReleaseError` for a
    modified, missing or malformed file."""

    def load(ref: dict) -> dict:
        rel = ref["file"]
        path = inside(folder, rel)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ReleaseError(f"cannot read {rel!r} of {str(folder)!r}: {exc.strerror or exc}") from None
        want = digest(rel)
        if want is not None and hashlib.sha256(raw).hexdigest() != want:
            raise ReleaseError(
                f"{rel} in {str(folder)!r} was modified after the release was written (SHA-256 mismatch); "
                "refusing to use it (--no-verify / verify=False skips the check)"
            )
        try:
            a = np.load(io.BytesIO(raw), allow_pickle=False)
            shape = tuple(int(s) for s in ref["shape"])
        except (OSError, TypeError, ValueError) as exc:
            raise ReleaseError(f"{rel} in {str(folder)!r} is not a stored plan array ({exc})") from None
        if a.dtype != np.float64 or a.shape != shape:
            raise ReleaseError(f"{rel} in {str(folder)!r} holds a {a.dtype} array of shape {list(a.shape)}, the "
                               f"manifest states float64 of shape {list(shape)}")
        return {"shape": list(shape), "array": a}

    def walk(v: Any) -> Any:
        if _is_file_ref(v):
            return load(v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(spec)
