r"""QuerySmasher's solved sub-mechanisms written into a plan file and read back without solving.

A plan's ``to_dict`` stores, per distinct sub-workload, what the solver produced: the strategy
(Kronecker factors ``B_j``, a dense ``B``, or WFF's Fourier weights ``h``), its loss at σ² = 1 and
its certificate (lower bound, gap, convergence, iterations). Arrays are little-endian float64
bytes in base64 (exact, and read without parsing a list of numbers; :mod:`dpmatrix._jsonarray`).
Reading rebuilds the mechanisms only: pseudo-inverses of the (small) Kronecker factors and of a
small dense strategy are recomputed; a dense strategy of :data:`MIN_STORED_PINV` numbers or more
is stored with its pseudo-inverse, which reading checks (the four Penrose conditions on random
probes, :func:`checked_pinv`) instead of computing an SVD; and the caller checks every stored
number against the workload (:func:`dpmatrix.planners._querysmasher.planner.rebuild_querysmasher`:
privacy cost at unit noise recomputed from the strategy, loss recomputed).

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

__all__ = ["MIN_STORED_PINV", "PINV_TOL", "checked_pinv", "solution_from_dict", "solution_to_dict",
           "solutions_to_list"]

#: a dense strategy of at least this many numbers is stored with its pseudo-inverse (its SVD
#: costs more than reading and checking it: ~0.3 s for 729 × 1,000)
MIN_STORED_PINV = 40_000
#: relative tolerance of the pseudo-inverse's checks (numpy's pinv: ~1e-15 for a well-conditioned strategy)
PINV_TOL = 1e-9
_PROBES = 8


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
        pinv = {"Bpinv": _array_to_dict(m.mech.Bpinv)} if m.mech.B.size >= MIN_STORED_PINV else {}
        return {"kind": "dense", **head, "solver_method": m.mech.method, "status": m.mech.status,
                "B": _array_to_dict(m.mech.B), **pinv}
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


def checked_pinv(B: np.ndarray, d: Any, rng: np.random.Generator | None = None) -> np.ndarray:
    r"""The stored pseudo-inverse ``P`` of the dense strategy ``B``, checked, not recomputed.

    ``P = B⁺`` exactly when the four Penrose conditions hold: ``BPB = B``, ``PBP = P`` and
    ``BP``, ``PB`` symmetric. Each is checked on random Gaussian probes from the OS's entropy
    (Freivalds' method, ``O(rN)`` per probe instead of an ``O(r²N)`` SVD), to :data:`PINV_TOL`
    relative to ``‖B‖_F``, ``‖P‖_F`` or 1 (``BP`` and ``PB`` are orthogonal projectors).

    Raises
    ------
    PlanError
        A stored ``P`` of the wrong shape, not finite, or failing a condition (edited).

    Examples
    --------
    >>> B = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    >>> P = checked_pinv(B, _array_to_dict(np.linalg.pinv(B)))
    >>> checked_pinv(B, _array_to_dict(np.linalg.pinv(B) * 1.001))
    Traceback (most recent call last):
    ...
    dpmatrix.errors.PlanError: the stored pseudo-inverse of a QuerySmasher dense strategy is not its pseudo-inverse (BPB ≠ B): the plan file was edited; refusing it (plan again, or restore the file)
    """
    P = _array_from_dict(d)
    if P.shape != B.shape[::-1] or not np.all(np.isfinite(P)):
        raise PlanError(f"the stored pseudo-inverse of a QuerySmasher dense strategy has shape {list(P.shape)} or "
                        f"is not finite (strategy {list(B.shape)}): the plan file was edited")
    rng = np.random.default_rng() if rng is None else rng
    w = rng.standard_normal((B.shape[1], _PROBES))
    u = rng.standard_normal((B.shape[0], _PROBES))
    nB, nP, nw, nu = (float(np.linalg.norm(x)) for x in (B, P, w, u))
    Bw, Pu = B @ w, P @ u
    BPu = B @ Pu
    for bad, why in (
        (np.linalg.norm(B @ (P @ Bw) - Bw) > PINV_TOL * nB * nw, "BPB ≠ B"),
        (np.linalg.norm(P @ BPu - Pu) > PINV_TOL * nP * nu, "PBP ≠ P"),
        (np.linalg.norm(P.T @ (B.T @ u) - BPu) > PINV_TOL * nu, "BP not symmetric"),
        (np.linalg.norm(B.T @ (P.T @ w) - P @ Bw) > PINV_TOL * nw, "PB not symmetric"),
    ):
        if bad:
            raise PlanError(f"the stored pseudo-inverse of a QuerySmasher dense strategy is not its pseudo-inverse "
                            f"({why}): the plan file was edited; refusing it (plan again, or restore the file)")
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
        Bpinv = checked_pinv(B, d["Bpinv"]) if "Bpinv" in d else _pinv_rows(B)
        mech = LowDimMechanism(solution=B, Bpinv=Bpinv, pcost=float(np.max(np.einsum("ij,ij->j", B, B),
                                                                                     initial=0.0)),
                               objective=rep["loss"], lower_bound=rep["lower_bound"], gap=rep["gap"],
                               iterations=rep["iterations"], status=status,
                               method=str(d.get("solver_method", "dual-multiplicative")))
        return DenseMech(sizes, mech, method, **rep)
    h = _array_from_dict(d.get("h"))
    if h.shape != sizes:
        raise PlanError("stored QuerySmasher Fourier weights do not fit their residual space")
    return FourierMech(sizes, h, method, **rep)
