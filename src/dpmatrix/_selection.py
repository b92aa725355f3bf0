"""Which values of one attribute a counting query selects, in the units of the data.

``meas.query({...})`` names, per attribute, a value, an inclusive range ``(low, high)`` or a list.
The selection is an indicator vector over the attribute's codes ``0..size-1``:

* labelled attributes: labels (``"White"``; a range of labels follows the label order), matched
  by :func:`dpmatrix._values.code_of` (``3``, ``3.0`` and ``"3"`` all name label ``"3"``);
* binned attributes, with or without labels (numeric ``bins`` edges ``e_0 < ... < e_k``, bin ``i`` = ``[e_i, e_{i+1})``,
  the last one closed): numbers in the attribute's own units. A single number selects the bin
  that holds it; a range ``(low, high)`` selects the bins inside ``[low, high)`` (``high`` the last
  edge: up to and including the last bin), and each bound must be a bin edge — a bound inside a
  bin would count only part of it, which the released counts cannot do, so it is an error that
  names the bin and the nearest edges;
* codes, explicitly: :func:`codes` (``codes(0, 3)`` = codes 0..3, ``codes(2)``,
  ``codes([1, 4])``); on attributes with neither labels nor bins, plain integers are codes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ._domain import Attribute
from ._values import code_of
from .errors import WorkloadError

__all__ = ["Codes", "codes", "selector"]


@dataclass(frozen=True)
class Codes:
    """Codes of an attribute named explicitly: an inclusive range ``low..high`` or a list."""

    values: tuple[int, ...]


def codes(low: int | Iterable[int], high: int | None = None) -> Codes:
    """Address an attribute by its codes ``0..size-1`` rather than by labels or values.

    Parameters
    ----------
    low : int or iterable of int
        One code, the first code of an inclusive range (with ``high``), or a list of codes.
    high : int, optional
        Last code of the inclusive range.

    Returns
    -------
    Codes

    Examples
    --------
    >>> codes(0, 3).values
    (0, 1, 2, 3)
    >>> codes([5, 1]).values
    (5, 1)
    """
    if high is not None:
        if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in (low, high)):
            raise WorkloadError(f"codes(low, high) takes two integers, got {low!r}, {high!r}")
        if int(high) < int(low):
            raise WorkloadError(f"empty code range: codes({low}, {high})")
        return Codes(tuple(range(int(low), int(high) + 1)))
    if isinstance(low, (int, np.integer)) and not isinstance(low, bool):
        return Codes((int(low),))
    vals = tuple(low)  # type: ignore[arg-type]
    if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in vals):
        raise WorkloadError(f"codes([...]) takes integers, got {vals!r}")
    return Codes(tuple(int(x) for x in vals))


def _fmt(x: float) -> str:
    return f"{x:g}"


def _bin_name(edges: tuple[float, ...], i: int) -> str:
    close = "]" if i == len(edges) - 2 else ")"
    return f"[{_fmt(edges[i])}, {_fmt(edges[i + 1])}{close}"


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _bin_of(attr: Attribute, x: float) -> int:
    e = attr.bins
    assert e is not None
    if not (math.isfinite(x) and e[0] <= x <= e[-1]):
        raise WorkloadError(
            f"{x!r} is outside the bins of {attr.name!r} [{_fmt(e[0])}, {_fmt(e[-1])}]"
        )
    return min(int(np.searchsorted(e, x, side="right")) - 1, len(e) - 2)


def _edge_index(attr: Attribute, x: float, which: str) -> int:
    e = attr.bins
    assert e is not None
    for i, edge in enumerate(e):
        if x == edge:
            return i
    i = _bin_of(attr, x)
    raise WorkloadError(
        f"the {which} bound {_fmt(x)} of {attr.name!r} cuts the bin {_bin_name(e, i)}: a count of "
        f"part of a bin is not released; use an edge ({_fmt(e[i])} or {_fmt(e[i + 1])}), or "
        f"codes explicitly (dpmatrix.codes({i}, ...))"
    )


def _binned_range(attr: Attribute, lo, hi) -> tuple[int, int]:
    e = attr.bins
    assert e is not None
    i = _edge_index(attr, float(lo), "lower")
    j = _edge_index(attr, float(hi), "upper")
    if j <= i:
        raise WorkloadError(f"empty range for {attr.name!r}: [{_fmt(float(lo))}, {_fmt(float(hi))}) holds no bin")
    return i, j - 1


def _code_of(attr: Attribute, value) -> int:
    """The one value-matching rule (:func:`dpmatrix._values.code_of`)."""
    return code_of(attr, value)


def _check_code(attr: Attribute, c: int) -> int:
    if not 0 <= c < attr.size:
        raise WorkloadError(f"code {c} of {attr.name!r} is outside 0..{attr.size - 1}")
    return c


def selector(attr: Attribute, sel) -> np.ndarray:
    """Indicator vector over an attribute's codes for a value, an inclusive range, a list or
    :func:`codes` (see the module docstring for the units).

    Examples
    --------
    >>> from dpmatrix._domain import Attribute
    >>> wage = Attribute("wage", 3, "ordinal", bins=(0, 500, 1000, 5000))
    >>> selector(wage, (0, 1000)).tolist(), selector(wage, 700).tolist()
    ([1.0, 1.0, 0.0], [0.0, 1.0, 0.0])
    """
    v = np.zeros(attr.size)
    if isinstance(sel, Codes):
        for c in sel.values:
            v[_check_code(attr, c)] = 1.0
    elif isinstance(sel, tuple):
        if len(sel) != 2:
            raise WorkloadError(f"a range for {attr.name!r} is a pair (low, high), got {sel!r}")
        if attr.bins is not None and all(_is_number(x) for x in sel):
            lo, hi = _binned_range(attr, *sel)
        else:
            lo, hi = (_code_of(attr, x) for x in sel)
            if lo > hi:
                raise WorkloadError(f"empty range for {attr.name!r}: {sel[0]!r} comes after {sel[1]!r}")
        v[lo : hi + 1] = 1.0
    elif isinstance(sel, (list, set, frozenset)):
        for x in sel:
            v[_code_of(attr, x)] = 1.0
    else:
        v[_code_of(attr, sel)] = 1.0
    return v
