"""Checking a plan read from a file (a saved plan or a release manifest) before it is used.

A plan's noise scales decide the privacy actually spent, so a plan file is refused at load
when a residual's ``sigma2`` is negative, zero, NaN (number or the string
``"nan"``), ``"-inf"``, a non-numeric string or a boolean: with a negative σ² the release would
have NaN estimates and a reported ρ far from what the mechanism spends. ``"inf"`` is the plan
format's mark of an unmeasured residual and is accepted. Duplicate keys and NaN constants are
refused by :func:`dpmatrix._jsonfile.read_json`.

A plan file states its privacy (``privacy.rho`` for zCDP plans) next to its noise scales. The
privacy actually spent is recomputed from the scales (ρ = Σ pcost_A'/σ²_A', design notes) and
must equal the stated one to 1e-9 relative: an edited σ² with the statement left alone — a
release at a far larger ρ than the reviewer approved — is refused, as the release loader refuses
an altered manifest. A residual the workload needs (every workload marginal must have a finite
variance) but the file leaves unmeasured is refused too, before any data are read or budget
charged.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ._jsonfile import read_json
from .errors import DPMatrixError, PlanError
from .planners._formats import RESIDUAL_PLAN_FORMAT as PLAN_FORMAT  # (not the planner: a string)

__all__ = ["check_needed_residuals", "check_plan_spec", "check_stated_privacy", "load_plan"]


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
    from .planners._read import plan_from_dict

    what = f"plan file {str(path)!r}"
    spec = read_json(path, PlanError, what)
    if isinstance(spec, dict) and spec.get("format", PLAN_FORMAT) != PLAN_FORMAT:
        try:  # another planner's plan (pure epsilon-DP, QuerySmasher): its own from_dict checks it
            plan = plan_from_dict(spec)
            if isinstance(spec.get("privacy"), dict):  # a stated rho (QuerySmasher) must be spent
                check_stated_privacy(spec, plan, what)
            return plan
        except PlanError:
            raise
        except DPMatrixError as exc:
            raise PlanError(f"{what}: {exc}") from None
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise PlanError(f"{what} is not a valid plan: {type(exc).__name__}: {exc}") from None
    check_plan_spec(spec, what)
    try:
        plan = plan_from_dict(spec)  # a targets plan keeps its target report
        plan.pcost  # noqa: B018 - a subnormal sigma2 gives an infinite privacy cost: refuse now
    except DPMatrixError as exc:
        raise PlanError(f"{what}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise PlanError(f"{what} is not a valid plan: {type(exc).__name__}: {exc}") from None
    check_needed_residuals(plan, what)
    check_stated_privacy(spec, plan, what)
    return plan


def check_stated_privacy(spec: Any, plan: Any, what: str = "plan") -> None:
    """Raise :class:`~dpmatrix.PlanError` unless the ρ a plan file states equals the ρ of the
    loaded plan's noise scales (relative tolerance 1e-9).

    Parameters
    ----------
    spec : dict
        The file's JSON.
    plan : Plan
        The plan built from it.
    what : str
        How the file is named in messages.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2}), [("a",)]), rho=0.5)
    >>> spec = plan.to_dict()
    >>> spec["privacy"]["rho"] = 0.05
    >>> check_stated_privacy(spec, plan)
    Traceback (most recent call last):
    ...
    dpmatrix.errors.PlanError: plan states rho = 0.05, but its noise scales spend rho = 0.5: the file was edited after it was planned; refusing it (plan again, or restore the file)
    """
    stated = spec.get("privacy") if isinstance(spec, dict) else None
    if not isinstance(stated, dict) or "rho" not in stated:
        raise PlanError(f"{what} states no privacy (privacy.rho): a plan file must say what it spends")
    try:
        rho = float(stated["rho"])
    except (TypeError, ValueError):
        raise PlanError(f"{what}: privacy.rho must be a number, got {stated['rho']!r}") from None
    actual = float(plan.rho)
    if not math.isclose(rho, actual, rel_tol=1e-9, abs_tol=0.0):
        raise PlanError(
            f"{what} states rho = {rho:.6g}, but its noise scales spend rho = {actual:.6g}: the file was "
            "edited after it was planned; refusing it (plan again, or restore the file)"
        )


def check_needed_residuals(plan: Any, what: str = "plan") -> None:
    """Raise :class:`~dpmatrix.PlanError` when a workload marginal has no finite variance: the
    file leaves a residual it needs unmeasured (``sigma2`` missing or ``"inf"``).

    Parameters
    ----------
    plan : Plan
    what : str
    """
    if math.isfinite(float(plan.max_variance())):
        return
    table = plan.marginal_table()
    bad = [str(m) for m, v in zip(table["marginal"], table["max_variance"]) if not math.isfinite(float(v))]
    if bad:
        raise PlanError(
            f"{what} leaves a residual unmeasured that the workload needs: marginal(s) {', '.join(bad[:3])} "
            "could not be answered; the file is incomplete or was edited (plan again)"
        )
