"""Classic strategies by name over the cells of a small marginal (Li & Miklau §2.3, Fig. 4).

For a marginal on several attributes, the *per-attribute* strategies — ``identity``,
``hierarchical`` (binary, or ``hierarchical:b`` b-ary), ``haar`` and ``fourier`` — are combined
by the Kronecker product ``A₁ ⊗ … ⊗ A_d`` (attributes in domain order, matching the row-major
cells); every one of them contains the total (or spans it), so marginals that sum some
attributes out stay answerable. ``fourier`` keeps only the Kronecker basis vectors the
workload has a non-zero coefficient on (Barak et al.). The *whole-workload* strategies are built
on the flattened marginal: ``workload`` (the workload's own positive-weight queries, unweighted),
``quarter-root`` (``(WᵀW)^{1/4}``, App. D.1) and ``lsa`` (the Level Selection Algorithm,
Program 4.1, with multi-dimensional cuts over the marginal's shape).
"""

from __future__ import annotations

import numpy as np

from ..._linalg import strategies as classic
from ..._solvers.lsa import lsa
from ...errors import PlanError

__all__ = ["NAMES", "PER_ATTRIBUTE", "named_strategy", "normalize_name"]

PER_ATTRIBUTE = ("identity", "hierarchical", "haar", "fourier")
NAMES = ("identity", "workload", "hierarchical", "hierarchical:4", "haar", "fourier", "quarter-root", "lsa")


def normalize_name(name: str) -> tuple[str, int]:
    """``(kind, branching)`` of a strategy name: ``"hierarchical:4"`` / ``"hierarchical4"`` →
    ``("hierarchical", 4)``; ``"quarter_root"`` / ``"eigen"`` → ``("quarter-root", 0)``."""
    s = str(name).strip().lower().replace("_", "-")
    if s.startswith("hierarchical"):
        b = s[len("hierarchical"):].lstrip(":-")
        try:
            branching = int(b) if b else 2
        except ValueError:
            raise PlanError(f"unknown strategy {name!r}: write 'hierarchical' or 'hierarchical:<b>' (b ≥ 2)") from None
        if branching < 2:
            raise PlanError(f"strategy {name!r}: the branching factor must be ≥ 2")
        return "hierarchical", branching
    if s in ("quarter-root", "eigen"):
        return "quarter-root", 0
    if s in ("identity", "workload", "haar", "fourier", "lsa"):
        return s, 0
    raise PlanError(f"unknown strategy {name!r}; choose one of {', '.join(NAMES)} or pass a matrix")


def named_strategy(name: str, W: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The strategy ``name`` for the dense workload ``W`` (``m × Π shape``, positive-weight rows,
    scaled by √weight) over a marginal of ``shape`` (module docstring for what each name means)."""
    kind, b = normalize_name(name)
    if kind == "workload":
        return W[np.any(W != 0, axis=1)]
    if kind == "quarter-root":
        return classic.quarter_root(W)
    if kind == "lsa":
        return lsa(W, shape=shape).strategy(reduced=True)
    if kind == "identity":
        return np.eye(int(np.prod(shape)))
    if kind == "hierarchical":
        return classic.kron(*(classic.hierarchical(n, b) for n in shape))
    if kind == "haar":
        return classic.kron(*(classic.haar(n) for n in shape))
    B = classic.kron(*(classic.fourier(n) for n in shape))  # fourier: orthonormal, filtered by W
    coef = W @ B.T
    keep = np.max(np.abs(coef), axis=0) > 1e-9 * max(1.0, float(np.max(np.abs(coef))))
    return B[keep]
