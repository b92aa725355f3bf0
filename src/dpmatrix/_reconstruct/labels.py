"""Display labels of the rows of a query matrix over one attribute (tidy tables' label columns)."""

from __future__ import annotations

import numpy as np

from .._domain import fmt_edge
from .._linalg.query_sets import DenseQueries, IntervalQueries

__all__ = ["cell_labels", "query_labels"]


def query_labels(attr, key: str, W) -> list[str]:
    """Display label of each row of an attribute's query matrix (cells, ``key == "identity"``:
    the value labels; ``W`` is not read and may be ``None``). ``W`` is a matrix or query rows
    (:class:`~dpmatrix._solvers.pidentity.IntervalQueries`: labelled from the bounds, the
    ``n(n+1)/2`` range rows are never built)."""
    lab = [attr.label(c) for c in range(attr.size)]
    if key == "identity":
        return lab
    edges = attr.bins if attr.labels is None and attr.bins is not None else None
    n_bins = len(edges) - 1 if edges is not None else 0
    if isinstance(W, IntervalQueries):
        bounds = [(int(lo), int(hi)) for lo, hi in zip(W.a, W.b)]
    else:
        w = np.asarray(W.q if isinstance(W, DenseQueries) else W)
        bounds = []
        for row in w:
            nz = np.flatnonzero(row)
            contiguous = nz.size and np.all(row[nz] == 1) and nz[-1] - nz[0] + 1 == nz.size
            bounds.append((int(nz[0]), int(nz[-1])) if contiguous else None)
    out = []
    for bd in bounds:
        if bd is None:
            out.append(f"q{len(out)}")
            continue
        lo, hi = bd
        if edges is not None and hi < n_bins:  # numeric bins: show the value interval
            close = "]" if hi == n_bins - 1 else ")"
            if lo == 0 and key == "prefix":
                out.append(f"{'<=' if close == ']' else '<'} {fmt_edge(edges[hi + 1])}")
            else:
                out.append(f"[{fmt_edge(edges[lo])}, {fmt_edge(edges[hi + 1])}{close}")
        elif key == "prefix" and lo == 0:
            out.append(f"<= {lab[hi]}")
        else:
            out.append(lab[lo] if lo == hi else f"{lab[lo]}..{lab[hi]}")
    return out


def cell_labels(domain, key) -> list:
    """Per attribute of ``key``, the display labels of its cells (codes ``0 .. size-1``), or
    ``None`` for an attribute with neither labels nor bins (its cells are shown as codes)."""
    labels = []
    for a in key:
        attr = domain.attributes[a]
        shown = attr.labels is not None or getattr(attr, "bins", None) is not None
        labels.append([attr.label(c) for c in range(attr.size)] if shown else None)
    return labels
