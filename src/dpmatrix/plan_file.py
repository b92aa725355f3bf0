"""Checking a plan read from a file (a saved plan or a release manifest) before it is used.

A plan's noise scales decide the privacy actually spent, so a plan file is refused at load
when a residual's ``sigma2`` is negative, zero, NaN (number or the string
``"nan"``), ``"-inf"``, a non-numeric string or a boolean: with a negative σ² the release would
have NaN estimates and a reported ρ far from what the mechanism spends. ``"inf"`` is the plan
format's mark of an unmeasured residual and is accepted. Duplicate keys and NaN constants are
refused by :func:`dpmatrix.jsonfile.read_json`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .errors import DPMatrixError, PlanError
from .jsonfile import read_json
from .planners.dispatch import plan_from_dict
from .planners.residual.plan import PLAN_FORMAT

__all__ = ["check_plan_spec", "load_plan"]


def _sigma2(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise PlanError(f"{where}: sigma2 must be a positive number (or \"inf\" if unmeasured), got {value!r}")
    if isinstance(value, str):
        if value.strip().lower() not in ("inf", "+inf", "infinity"):
            raise PlanError(f"{where}: sigma2 must be a positive number (or \"inf\" if unmeasured), got {value!r}")
        return math.inf
    v = float(value)
    if math.isnan(v) or v <= 0:
        raise PlanError(f"{where}: sigma2 must be a positive number (or \"inf\" if unmeasured), got {value!r}")
    return v


def check_plan_spec(spec: Any, what: str = "plan") -> None:
    """Raise :class:`~dpmatrix.PlanError` (naming ``what`` and the residual) unless ``spec``
    has the plan format's fields and every ``sigma2`` is positive (or ``"inf"``).

    Parameters
    ----------
    spec : dict
        A plan dict (``Plan.to_dict()``) or a release manifest (same keys).
    what : str
        How the file is named in messages.

    Examples
    --------
    >>> check_plan_spec({"residuals": [{"attributes": ["a"], "sigma2": -1}]})
    Traceback (most recent call last):
    ...
    dpmatrix.errors.PlanError: plan, residual ['a']: sigma2 must be a positive number (or "inf" if unmeasured), got -1
    """
    if not isinstance(spec, dict):
        raise PlanError(f"{what} is not a JSON object")
    res = spec.get("residuals")
    if not isinstance(res, list):
        raise PlanError(f"{what} has no list of residuals")
    seen: set[tuple[str, ...]] = set()
    for r in res:
        if not isinstance(r, dict) or not isinstance(r.get("attributes"), list):
            raise PlanError(f"{what}: every residual needs attributes and sigma2, got {r!r}")
        names = tuple(str(a) for a in r["attributes"])
        if names in seen:
            raise PlanError(f"{what}: residual {list(names)} is listed twice")
        seen.add(names)
        if "sigma2" not in r:
            raise PlanError(f"{what}, residual {list(names)}: no sigma2")
        _sigma2(r["sigma2"], f"{what}, residual {list(names)}")


def load_plan(path: str | Path):
    """A :class:`~dpmatrix.Plan` from a plan file, checked by :func:`check_plan_spec` first.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    Plan
    """
    what = f"plan file {str(path)!r}"
    spec = read_json(path, PlanError, what)
    if isinstance(spec, dict) and spec.get("format", PLAN_FORMAT) != PLAN_FORMAT:
        try:  # another planner's plan (pure epsilon-DP, QuerySmasher): its own from_dict checks it
            return plan_from_dict(spec)
        except DPMatrixError as exc:
            raise PlanError(f"{what}: {exc}") from None
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise PlanError(f"{what} is not a valid plan: {type(exc).__name__}: {exc}") from None
    check_plan_spec(spec, what)
    try:
        plan = plan_from_dict(spec)  # a targets plan keeps its target report
        plan.pcost  # noqa: B018 - a subnormal sigma2 gives an infinite privacy cost: refuse now
        return plan
    except DPMatrixError as exc:
        raise PlanError(f"{what}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise PlanError(f"{what} is not a valid plan: {type(exc).__name__}: {exc}") from None
