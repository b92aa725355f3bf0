r"""QuerySmasher's solved sub-mechanisms written into a plan file and read back without solving.

A plan's ``to_dict`` stores, per distinct sub-workload, what the solver produced: the strategy
(Kronecker factors ``B_j``, a dense ``B``, or WFF's Fourier weights ``h``), its loss at σ² = 1 and
its certificate (lower bound, gap, convergence, iterations). Arrays are little-endian float64
bytes in base64 (exact, and read without parsing a list of numbers; :mod:`dpmatrix._jsonarray`).
Reading rebuilds the mechanisms only: pseudo-inverses of the (small) Kronecker factors and of a
dense strategy are recomputed, never read, and the caller checks every stored number against
the workload (:func:`dpmatrix.planners._querysmasher.planner.rebuild_querysmasher`).

Every strategy is stored, however large: a release moves large arrays out of its manifest into
binary files listed with their digests (:mod:`dpmatrix.release._arrays`), so reading never
re-optimizes. Plans written before the strategies were stored (or, by earlier versions, plans
whose strategies held more than 250,000 numbers) have none and are re-planned when read.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._jsonarray import array_from_json, array_to_json
from ..._jsonfile import json_float
from ..._solvers.lowdim_optimal import LowDimMechanism
from ..._solvers.result import STATUSES
from ...errors import PlanError
from .submechanisms import DenseMech, FourierMech, KronMech, SubMechanism

__all__ = ["solution_from_dict", "solution_to_dict", "solutions_to_list"]


def _array_to_dict(a: np.ndarray) -> dict[str, Any]:
    return array_to_json(a)


def _array_from_dict(d: Any) -> np.ndarray:
    return array_from_json(d, PlanError, "a stored QuerySmasher strategy")


def _report(m: SubMechanism) -> dict[str, Any]:
    return {"loss": json_float(m.loss), "lower_bound": json_float(m.lower_bound), "gap": json_float(m.gap),
            "converged": bool(m.converged), "iterations": int(m.iterations)}


def solution_to_dict(m: SubMechanism) -> dict[str, Any]:
    """JSON-ready description of one solved sub-mechanism (module docstring)."""
    head = {"sizes": list(m.sizes), "method": m.method, **_report(m)}  # type: ignore[attr-defined]
    if isinstance(m, KronMech):
        return {"kind": "kron", **head, "factors": [_array_to_dict(b) for b in m.B]}
    if isinstance(m, DenseMech):
        return {"kind": "dense", **head, "solver_method": m.mech.method, "status": m.mech.status,
                "B": _array_to_dict(m.mech.B)}
    if isinstance(m, FourierMech):
        return {"kind": "fourier", **head, "h": _array_to_dict(m.h)}
    raise PlanError(f"cannot store a QuerySmasher sub-mechanism of type {type(m).__name__}")


def solutions_to_list(solutions: list[SubMechanism]) -> list[dict[str, Any]]:
    """Every sub-mechanism's description (module docstring)."""
    return [solution_to_dict(m) for m in solutions]


def _pinv_rows(B: np.ndarray) -> np.ndarray:
    """Pseudo-inverse of a strategy (SVD; rank-deficient directions dropped as numpy does)."""
    if B.size == 0:
        return np.zeros(B.shape[::-1])
    P = np.linalg.pinv(B)
    P.setflags(write=False)
    return P


def solution_from_dict(d: Any) -> SubMechanism:
    """The sub-mechanism described by :func:`solution_to_dict` (shapes checked; numbers are
    checked against the workload by the caller)."""
    if not isinstance(d, dict) or d.get("kind") not in ("kron", "dense", "fourier"):
        raise PlanError("a stored QuerySmasher sub-mechanism has no valid 'kind'")
    try:
        sizes = tuple(int(s) for s in d["sizes"])
        rep = dict(loss=float(d["loss"]), lower_bound=float(d["lower_bound"]), gap=float(d["gap"]),
                   converged=bool(d["converged"]), iterations=int(d["iterations"]))
        method = str(d["method"])
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"a stored QuerySmasher sub-mechanism lacks {exc}") from None
    kind = d["kind"]
    if kind == "kron":
        Bs = tuple(_array_from_dict(f) for f in d.get("factors", []))
        if len(Bs) != len(sizes) or any(b.ndim != 2 or b.shape[1] != n for b, n in zip(Bs, sizes)):
            raise PlanError("a stored QuerySmasher Kronecker strategy does not fit its residual space")
        return KronMech(sizes, Bs, tuple(_pinv_rows(b) for b in Bs), method, **rep)
    if kind == "dense":
        B = _array_from_dict(d.get("B"))
        if B.ndim != 2 or B.shape[1] != math.prod(sizes):
            raise PlanError("a stored QuerySmasher dense strategy does not fit its residual space")
        status = str(d.get("status", "optimal"))
        if status not in STATUSES:
            raise PlanError(f"a stored QuerySmasher dense strategy has an unknown solver status {status!r}")
        mech = LowDimMechanism(solution=B, Bpinv=_pinv_rows(B), pcost=float(np.max(np.einsum("ij,ij->j", B, B),
                                                                                     initial=0.0)),
                               objective=rep["loss"], lower_bound=rep["lower_bound"], gap=rep["gap"],
                               iterations=rep["iterations"], status=status,
                               method=str(d.get("solver_method", "dual-multiplicative")))
        return DenseMech(sizes, mech, method, **rep)
    h = _array_from_dict(d.get("h"))
    if h.shape != sizes:
        raise PlanError("stored QuerySmasher Fourier weights do not fit their residual space")
    return FourierMech(sizes, h, method, **rep)
