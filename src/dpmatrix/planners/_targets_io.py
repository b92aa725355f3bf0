"""A targets plan read back from a file: its :class:`~dpmatrix.planners._targets.TargetReport`.

A plan planned from accuracy targets saves its report under ``"targets"``
(:meth:`TargetReport.to_dict`: the kind, one row per marginal/group, the certificate and every
query's variance target).  A plan file (``dpmatrix plan --target ... --save``) and a release
manifest keep that dict, so reading them back gives the plan wrapped with its targets
(:class:`~dpmatrix.planners._targets.TargetedPlan`) with the same ``target_table()`` and
``certificate()``: the targets come from the file, the achieved
variances are recomputed from the plan's noise (they are what the plan delivers, not a copy).
Files written before the per-query targets were saved have only the rows: each entry's target
is then its row's (the worst query's) target, exact when an entry's targets are all equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._queries import QueryWorkload
from ..errors import PlanError
from ._explicit.plan import ExplicitStrategyPlan
from ._residual.plan import Plan
from ._targets import TARGET_KINDS, TargetedPlan, TargetReport, achieved_variances

__all__ = ["with_manifest_targets", "with_target_report"]

_CERTIFICATE = ("problem", "route", "pcost_lower_bound", "gap", "status", "tol")


def _achieved(plan) -> tuple[np.ndarray, ...]:
    if isinstance(plan, ExplicitStrategyPlan):
        if not isinstance(plan.workload, QueryWorkload):
            raise PlanError("saved targets need a query workload for an explicit-strategy plan")
        return achieved_variances(plan, "explicit")
    return achieved_variances(plan, "residual")


def _targets(saved: Mapping[str, Any], rows: list, achieved: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    values = saved.get("variances")
    if values is None:  # an older file: the rows' (worst-query) targets
        values = [float(r["target"]) for r in rows]
    if not isinstance(values, list) or len(values) != len(achieved):
        raise PlanError(f"saved targets: {len(achieved)} entries expected, got {values!r:.80}")
    out = []
    for v, a in zip(values, achieved):
        t = np.full(a.shape, float(v)) if np.ndim(v) == 0 else np.asarray(v, dtype=float)
        if t.size != a.size:
            raise PlanError(f"saved targets: an entry has {a.size} queries but {t.size} targets")
        t = t.reshape(a.shape)
        if not np.all(np.isfinite(t) & (t > 0)):
            raise PlanError("saved targets must be positive finite variances")
        t.setflags(write=False)
        out.append(t)
    return tuple(out)


def with_target_report(plan, saved: Mapping[str, Any]):
    """``plan`` (read from a file) as the targets plan it was, with its :class:`TargetReport`.

    Parameters
    ----------
    plan : Plan or ExplicitStrategyPlan
        The plan as read by its own ``from_dict``.
    saved : mapping
        ``TargetReport.to_dict()`` as saved with it.

    Returns
    -------
    TargetedPlan

    Raises
    ------
    PlanError
        When the saved targets do not fit the plan's workload.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 3, "b": 2}), [("a",), ("b",)])
    >>> p = dm.plan(wk, targets={"a": 4.0, "b": 1.0})
    >>> q = with_target_report(dm.Plan.from_dict(p.to_dict()), p.to_dict()["targets"])
    >>> q.target_table().equals(p.target_table()), q.certificate() == p.certificate()
    (True, True)
    """
    if not isinstance(saved, Mapping) or not isinstance(saved.get("rows"), list):
        raise PlanError("saved targets need their rows (TargetReport.to_dict())")
    cert = saved.get("certificate")
    if not isinstance(cert, Mapping) or any(k not in cert for k in _CERTIFICATE):
        raise PlanError(f"saved targets need a certificate with {', '.join(_CERTIFICATE)}")
    kind = saved.get("kind", cert.get("kind"))
    if kind not in TARGET_KINDS:
        raise PlanError(f"saved targets have an unknown kind {kind!r}")
    rows = saved["rows"]
    achieved = _achieved(plan)
    if len(rows) != len(achieved):
        raise PlanError(f"saved targets have {len(rows)} rows but the workload has {len(achieved)} entries")
    column = "group" if isinstance(plan.workload, QueryWorkload) else "marginal"
    labels = tuple(str(r.get(column, "")) for r in rows)
    for a in achieved:
        a.setflags(write=False)
    report = TargetReport(
        labels, kind, _targets(saved, rows, achieved), achieved, str(cert["problem"]), str(cert["route"]),
        float(plan.pcost), float(cert["pcost_lower_bound"]), float(cert["gap"]), str(cert["status"]),
        column, float(cert["tol"]),
    )
    if not isinstance(plan, (ExplicitStrategyPlan, Plan)):
        raise PlanError(f"a {type(plan).__name__} cannot carry accuracy targets")
    return TargetedPlan(plan, report)


def with_manifest_targets(plan, manifest: Mapping[str, Any]):
    """``plan`` with the target report a ResidualPlanner release manifest records (its rows under
    ``"targets"``, ``"target_certificate"`` and ``"target_variances"``), or ``plan`` unchanged
    when the release was not planned from targets.

    Parameters
    ----------
    plan : Plan
    manifest : mapping

    Returns
    -------
    Plan or TargetedPlan

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 3}), [("a",)])
    >>> p = dm.plan(wk, targets=2.0)
    >>> t = p.to_dict()["targets"]
    >>> manifest = {"targets": t["rows"], "target_certificate": {"kind": t["kind"], **t["certificate"]},
    ...             "target_variances": t["variances"]}
    >>> with_manifest_targets(dm.Plan.from_dict(p.to_dict()), manifest).certificate() == p.certificate()
    True
    """
    if "targets" not in manifest or "target_certificate" not in manifest:
        return plan
    cert = dict(manifest["target_certificate"])
    saved = {"kind": cert.pop("kind", None), "rows": manifest["targets"], "certificate": cert,
             "variances": manifest.get("target_variances")}
    return with_target_report(plan, saved)
