"""BLAS threads for small matrices.

Planning works on per-attribute matrices (a few hundred rows at most) and on small convex
programs: a multi-threaded BLAS gains nothing there and, when other processes keep the cores
busy, its threads spin and wait for each other — planning steps were measured 9–50× slower
than with one thread. :func:`blas_threads_for` runs a block with one BLAS thread when the
matrices are small (largest dimension at most :data:`SMALL_DIMENSION`), so the default is never
worse than single-threaded there; large matrices keep the BLAS's own setting.
``benchmarks/bench_threads.py`` measures both side by side under a background load.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import ThreadpoolController

__all__ = ["SMALL_DIMENSION", "blas_threads_for", "limiting"]

#: dense matrices up to this dimension are multiplied with one BLAS thread
SMALL_DIMENSION = 1024

_state: dict = {"enabled": True, "controller": None}


def _controller() -> ThreadpoolController:
    """One controller per process: finding the loaded BLAS libraries takes ~0.1 s, limiting
    their threads afterwards microseconds."""
    if _state["controller"] is None:
        _state["controller"] = ThreadpoolController()
    return _state["controller"]


@contextmanager
def limiting(enabled: bool) -> Iterator[None]:
    """Turn the limit on or off inside a block (for the benchmark's side-by-side comparison)."""
    before = _state["enabled"]
    _state["enabled"] = bool(enabled)
    try:
        yield
    finally:
        _state["enabled"] = before


@contextmanager
def blas_threads_for(max_dimension: int) -> Iterator[None]:
    """One BLAS thread inside the block if ``max_dimension <= SMALL_DIMENSION``, else unchanged.

    Parameters
    ----------
    max_dimension : int
        The largest dimension of the dense matrices the block multiplies or factors.

    Examples
    --------
    >>> import numpy as np
    >>> with blas_threads_for(85):
    ...     float(np.eye(3).sum())
    3.0
    """
    if not _state["enabled"] or max_dimension > SMALL_DIMENSION:
        yield
        return
    with _controller().limit(limits=1, user_api="blas"):
        yield
