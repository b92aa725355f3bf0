"""Reading JSON files (domains, workloads, plans, release manifests) with actionable errors.

Parsing is strict: a key given twice in one object (``json`` would keep
the last silently) and the non-standard constants ``NaN``, ``Infinity``, ``-Infinity`` (which
``json`` accepts by default) are refused with a message naming the file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["json_float", "loads_strict", "read_json"]


class _StrictJSONError(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _StrictJSONError(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def _no_constants(name: str) -> Any:
    raise _StrictJSONError(f"{name} is not a JSON number (write a finite number)")


def loads_strict(text: str, error: type[Exception], what: str) -> Any:
    """Parse JSON text, refusing duplicate keys and NaN/Infinity; failures raise ``error``
    naming ``what``."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except _StrictJSONError as exc:
        raise error(f"{what} is not valid: {exc}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:  # the decoder recurses once per nesting level
        raise error(f"{what} is nested too deeply to be a dpmatrix file") from None


def read_json(path: str | Path, error: type[Exception], what: str, missing: str | None = None) -> Any:
    """Parse the JSON file at ``path``; every failure raises ``error`` with a message naming
    ``what`` (e.g. ``"domain file 'd.json'"``): it does not exist (or ``missing``), cannot be
    read, is not valid JSON, repeats a key or holds NaN/Infinity."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise error(missing or f"{what} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what}: {exc}") from None
    return loads_strict(text, error, what)


def json_float(v: float) -> float | str:
    """A float for JSON: finite values as numbers, ``inf``/``-inf``/``nan`` as strings."""
    v = float(v)
    if math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
