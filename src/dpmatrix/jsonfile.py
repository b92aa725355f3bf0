"""Reading JSON files (domains, workloads, plans, release manifests) with actionable errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["json_float", "read_json"]


def read_json(path: str | Path, error: type[Exception], what: str, missing: str | None = None) -> Any:
    """Parse the JSON file at ``path``; every failure raises ``error`` with a message naming
    ``what`` (e.g. ``"domain file 'd.json'"``): it does not exist (or ``missing``), cannot be
    read, or is not valid JSON."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise error(missing or f"{what} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{what} is not valid JSON: {exc}") from None


def json_float(v: float) -> float | str:
    """A float for JSON: finite values as numbers, ``inf``/``-inf``/``nan`` as strings."""
    v = float(v)
    if math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
