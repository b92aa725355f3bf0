"""The certified dual fixed point shared by fitness-for-use and the max-variance strategy.

Both :mod:`dpmatrix._solvers.fitness` (Problem 1 with its polish, the weighted-sum baseline) and
:mod:`dpmatrix._solvers.maxvar_strategy` ascend the same dual of fitness-for-use (Xiao et al.,
PVLDB 14(1), §3.3): the joint multiplicative fixed point ``λ_j ← λ_j r_j / s``,
``μ_i ← μ_i X_ii / s`` on the query and cell simplices, written in log coordinates and
accelerated by SQUAREM (Varadhan & Roland 2008, scheme S3, step length
``α = −‖r‖/‖v‖`` clamped to ``[−4, −1]``), keeping the extrapolated point only when its lower
bound does not drop.  This module is that driver; each solver supplies its own evaluation of
the map (an SVD of the m × n matrix, or r × r eigen-decompositions), which also records the
certified bounds, so the safeguard affects speed, never the certificate.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["LOG_FLOOR", "STEP_MAX", "normalize_log_weights", "squarem"]

LOG_FLOOR = math.log(1e-200)  # weights are kept ≥ 1e-200 × their maximum
STEP_MAX = 4.0  # SQUAREM step length clamp |α| ≤ 4


def normalize_log_weights(x: np.ndarray, m: int) -> np.ndarray:
    """``x = (log λ, log μ)`` shifted so each block's maximum is 0, floored at ``LOG_FLOOR``."""
    xl, xm = x[:m] - x[:m].max(), x[m:] - x[m:].max()
    return np.maximum(np.concatenate([xl, xm]), LOG_FLOOR)


def squarem(
    step: Callable[[np.ndarray], tuple[np.ndarray, float]],
    x: np.ndarray,
    m: int,
    done: Callable[[], bool],
) -> None:
    """Iterate ``x ← step(x)`` with SQUAREM extrapolation until ``done()``.

    Parameters
    ----------
    step : callable
        ``x -> (image of x under the fixed-point map (normalized), lower bound at x)``; it
        records the best bounds itself.
    x : ndarray
        Start point ``(log λ, log μ)``.
    m : int
        Length of the ``log λ`` block.
    done : callable
        Stopping test, checked after every evaluation.
    """
    while not done():
        x1, _ = step(x)
        if done():
            return
        x2, lo2 = step(x1)
        if done():
            return
        rr, vv = x1 - x, x2 - 2.0 * x1 + x
        nr, nv = float(np.linalg.norm(rr)), float(np.linalg.norm(vv))
        if nv <= 1e-12 * max(nr, 1e-300):
            x = x2
            continue
        alpha = min(max(-nr / nv, -STEP_MAX), -1.0)
        xe = normalize_log_weights(x - 2.0 * alpha * rr + alpha * alpha * vv, m)
        x3, lo3 = step(xe)
        x = x3 if lo3 >= lo2 * (1.0 - 1e-13) else x2
