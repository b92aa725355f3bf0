"""Workloads written as text (command line) or as a JSON file.

Text form: terms separated by ``;``. Each term is one of

* ``all:K`` or ``k:K`` — every marginal on exactly ``K`` attributes;
* ``all:<=K`` or ``upto:K`` — every marginal on at most ``K`` attributes, including the 0-way
  total;
* ``small:N`` — every marginal with at most ``N`` cells (including the total);
* ``age,sex`` — one marginal (``total`` or ``()`` is the 0-way total);
* ``age=prefix`` (or ``age=prefix,hours=range``) — the query type of attributes: ``identity``
  (plain cells, the default), ``prefix`` (``value <= v``) or ``range`` (every interval).

Any marginal term or generator may end with ``*W`` to give it the weight ``W`` (default 1), e.g.
``"all:<=2; age,sex,race*3; age=prefix"``. A marginal produced by a generator and also listed
on its own takes the weight written with it; a marginal listed twice on its own is an error.
Attribute names are stripped of surrounding spaces and cannot contain ``,``, ``;``, ``*`` or
``=`` in this form (use a JSON file for such names).

JSON form (a file): either a list of marginals or an object::

    {"marginals": ["all:<=2", ["age", "sex", "race"],
                   {"attributes": ["age", "hours"], "weight": 2,
                    "query_types": {"age": "range"}}],
     "query_types": {"age": "prefix"}}

where each entry is a text term, a list of attribute names, or an object with ``attributes``
and optionally ``weight`` and per-marginal ``query_types``; an optional ``weights`` list (one
per entry, only for entries that are single marginals) is also read, so the ``workload`` of a
plan or release manifest can be used as a workload file.

As in :class:`dpmatrix.Workload`, a parsed workload asks for plain cells (``identity``) on every
attribute not given a type, whatever its kind: a released "marginal" is then exactly the table
of counts.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._domain import Domain
from ._jsonfile import read_json
from ._workload import AttrSet, Workload
from .errors import WorkloadError

__all__ = ["WorkloadSpecError", "parse_workload", "parse_terms", "load_workload_file"]


class WorkloadSpecError(WorkloadError):
    """A workload written as text or JSON cannot be parsed."""


_GEN = re.compile(r"^(all|k|upto|small)\s*:\s*(<=|≤)?\s*(\S+?)$", re.IGNORECASE)
_TYPES = ("identity", "prefix", "range")
_TOTAL = ("total", "()", "")


def _weight(text: str, term: str) -> float:
    try:
        w = float(text)
    except ValueError:
        raise WorkloadSpecError(f"bad weight {text!r} in workload term {term!r}: use a number, e.g. 'age,sex*2'") from None
    if not math.isfinite(w) or w < 0:
        raise WorkloadSpecError(f"weight in workload term {term!r} must be a finite non-negative number")
    return w


def _int(text: str, term: str, what: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise WorkloadSpecError(f"bad {what} {text!r} in workload term {term!r}: expected an integer") from None
    return v


class _Builder:
    """Collects marginals (in order), their weights and query types."""

    def __init__(self, domain: Domain, attributes: Sequence[str] | None = None):
        self.domain = domain
        self.pool = domain.resolve(attributes) if attributes is not None else tuple(range(len(domain)))
        self.weights: dict[AttrSet, float] = {}
        self.explicit: set[AttrSet] = set()
        self.own_types: dict[AttrSet, dict[str, str]] = {}
        self.types: dict[str, str] = {}

    def generated(self, sets: Iterable[AttrSet], w: float) -> None:
        for s in sets:
            if s not in self.weights:
                self.weights[s] = w

    def marginal(self, s: AttrSet, w: float, label: str, own: Mapping[str, str] | None = None) -> None:
        if s in self.explicit:
            raise WorkloadSpecError(
                f"marginal {label} is listed twice in the workload; list it once (its weight "
                "sets its importance)"
            )
        self.explicit.add(s)
        self.weights[s] = w
        if own:
            self.own_types[s] = dict(own)

    def set_type(self, name: str, t: str, term: str) -> None:
        self.domain.index(name)  # unknown attribute: error with a suggestion
        key = t.strip().lower()
        if key not in _TYPES:
            raise WorkloadSpecError(
                f"unknown query type {t!r} for {name!r} in {term!r}: use one of {', '.join(_TYPES)}"
            )
        if name in self.types and self.types[name] != key:
            raise WorkloadSpecError(f"two query types given for {name!r}: {self.types[name]!r} and {key!r}")
        self.types[name] = key

    # -- generators ---------------------------------------------------------------------------
    def all_k(self, k: int, upto: bool, term: str) -> list[AttrSet]:
        n = len(self.pool)
        if k < 0 or (not upto and k > n):
            raise WorkloadSpecError(f"{term!r}: k must be between 0 and {n} (the number of attributes)")
        ks = range(0, min(k, n) + 1) if upto else (k,)
        return [c for j in ks for c in itertools.combinations(self.pool, j)]

    def small(self, max_cells: int, term: str) -> list[AttrSet]:
        if max_cells < 1:
            raise WorkloadSpecError(f"{term!r}: the number of cells must be at least 1")
        sizes = self.domain.sizes
        out: list[AttrSet] = []

        def grow(prefix: AttrSet, cells: int, start: int) -> None:
            out.append(prefix)
            for j in range(start, len(self.pool)):
                i = self.pool[j]
                if cells * sizes[i] <= max_cells:
                    grow(prefix + (i,), cells * sizes[i], j + 1)

        grow((), 1, 0)
        return out

    def build(self) -> Workload:
        if not self.weights:
            raise WorkloadSpecError("the workload is empty: give at least one marginal, e.g. 'all:2'")
        qt = {n: "identity" for n in self.domain.names}
        qt.update(self.types)
        marg: list[Any] = []
        for s in self.weights:
            names = self.domain.names_of(s)
            own = self.own_types.get(s)
            marg.append({"attributes": names, "query_types": own} if own else names)
        return Workload(self.domain, marg, list(self.weights.values()), query_types=qt)


def _split_weight(term: str) -> tuple[str, float]:
    if "*" in term:
        body, _, w = term.rpartition("*")
        return body.strip(), _weight(w.strip(), term)
    return term, 1.0


def _add_term(b: _Builder, raw: str) -> None:
    term = raw.strip()
    if not term:
        return
    body, w = _split_weight(term)
    m = _GEN.match(body)
    if m:
        kind, le, num = m.group(1).lower(), m.group(2), m.group(3)
        if kind == "small":
            if le:
                raise WorkloadSpecError(f"{term!r}: write small:N (at most N cells)")
            b.generated(b.small(_int(num, term, "number of cells"), term), w)
        else:
            upto = kind == "upto" or le is not None
            if kind == "upto" and le:
                raise WorkloadSpecError(f"{term!r}: write upto:K or all:<=K")
            b.generated(b.all_k(_int(num, term, "k"), upto, term), w)
        return
    if "=" in term:
        if "*" in term:
            raise WorkloadSpecError(f"{term!r}: a query-type term takes no weight")
        for part in term.split(","):
            name, eq, t = part.partition("=")
            if not eq or not name.strip():
                raise WorkloadSpecError(
                    f"bad query-type term {term!r}: write name=type[,name=type], e.g. 'age=prefix'"
                )
            b.set_type(name.strip(), t, term)
        return
    if body.lower() in _TOTAL:
        b.marginal((), w, "total")
        return
    names = [n.strip() for n in body.split(",")]
    if any(not n for n in names):
        raise WorkloadSpecError(f"empty attribute name in workload term {term!r}")
    s = b.domain.resolve(names)
    b.marginal(s, w, repr(",".join(names)))


def parse_terms(domain: Domain, text: str, builder: _Builder | None = None) -> _Builder:
    """Add the ``;``-separated terms of ``text`` to a builder (a new one if not given)."""
    b = builder or _Builder(domain)
    if not isinstance(text, str):
        raise WorkloadSpecError(f"a workload spec must be text, got {type(text).__name__}")
    for raw in text.split(";"):
        _add_term(b, raw)
    return b


def _add_json(b: _Builder, spec: Any, where: str) -> None:
    if isinstance(spec, list):
        spec = {"marginals": spec}
    if not isinstance(spec, Mapping):
        raise WorkloadSpecError(f"{where}: a workload file holds a JSON list or object")
    unknown = set(spec) - {"marginals", "weights", "query_types", "matrices"}
    if unknown:
        raise WorkloadSpecError(f"{where}: unknown key(s) {sorted(unknown)}; expected 'marginals', 'weights', 'query_types'")
    if spec.get("matrices"):
        raise WorkloadSpecError(f"{where}: custom query matrices are not supported in workload files; use the Python API")
    for name, t in (spec.get("query_types") or {}).items():
        if not isinstance(t, str):
            raise WorkloadSpecError(f"{where}: query type of {name!r} must be a string")
        b.set_type(name, t, where)
    items = spec.get("marginals")
    if not isinstance(items, list) or not items:
        raise WorkloadSpecError(f"{where}: 'marginals' must be a non-empty list")
    weights = spec.get("weights")
    if weights is not None and (not isinstance(weights, list) or len(weights) != len(items)):
        raise WorkloadSpecError(f"{where}: 'weights' must be a list with one number per entry of 'marginals'")
    for j, item in enumerate(items):
        w = weights[j] if weights is not None else None
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float))):
            raise WorkloadSpecError(f"{where}: weight {w!r} is not a number")
        if isinstance(item, str):
            if w is not None:
                item = f"{item}*{w!r}"
            _add_term(b, item)
            continue
        own = None
        if isinstance(item, Mapping):
            unknown = set(item) - {"attributes", "weight", "query_types"}
            if unknown or "attributes" not in item:
                raise WorkloadSpecError(f"{where}: a marginal object needs 'attributes' (and optionally 'weight', 'query_types'), got keys {sorted(item)}")
            if "weight" in item:
                w = item["weight"]
                if isinstance(w, bool) or not isinstance(w, (int, float)):
                    raise WorkloadSpecError(f"{where}: weight {w!r} is not a number")
            own = item.get("query_types") or None
            if own is not None:
                if not isinstance(own, Mapping) or not all(isinstance(v, str) for v in own.values()):
                    raise WorkloadSpecError(f"{where}: per-marginal 'query_types' must map names to type names")
                bad = [v for v in own.values() if v.lower() not in _TYPES]
                if bad:
                    raise WorkloadSpecError(f"{where}: unknown query type {bad[0]!r}: use one of {', '.join(_TYPES)}")
            item = item["attributes"]
        if not isinstance(item, list) or not all(isinstance(n, str) for n in item):
            raise WorkloadSpecError(f"{where}: marginal {item!r} must be a list of attribute names")
        s = b.domain.resolve(item)
        ww = 1.0 if w is None else _weight(repr(float(w)), repr(item))
        if own:
            for n in own:
                if b.domain.index(n) not in s:
                    raise WorkloadSpecError(f"{where}: query type given for {n!r}, not in the marginal {item}")
        b.marginal(s, ww, repr(",".join(item)), {k: v.lower() for k, v in own.items()} if own else None)


def load_workload_file(domain: Domain, path: str | Path, builder: _Builder | None = None) -> _Builder:
    """Add the marginals of a JSON workload file to a builder."""
    b = builder or _Builder(domain)
    what = f"workload file {str(Path(path))!r}"
    _add_json(b, read_json(path, WorkloadSpecError, what), what)
    return b


def parse_workload(
    domain: Domain,
    workload: str | None = None,
    *,
    marginals: str | None = None,
    query_types: str | None = None,
    file: str | Path | None = None,
    attributes: Sequence[str] | str | None = None,
) -> Workload:
    """A :class:`~dpmatrix.Workload` from text and/or a JSON file (see the module docstring).

    ``workload`` and ``marginals`` are both text specs (the two names of the command line);
    ``query_types`` is ``"age=prefix,hours=range"``; ``file`` a JSON workload file (a text
    ``workload`` naming an existing ``.json`` file is read as one). ``attributes`` restricts the
    generators (``all:K``, ``small:N``) to those attributes.
    """
    if isinstance(attributes, str):
        attributes = [a.strip() for a in attributes.split(",") if a.strip()]
    b = _Builder(domain, attributes)
    if workload is not None and workload.strip().lower().endswith(".json") and ";" not in workload:
        if file is not None:
            raise WorkloadSpecError("give one workload file, not two")
        file, workload = workload.strip(), None
    if file is not None:
        load_workload_file(domain, file, b)
    for text in (workload, marginals):
        if text is not None:
            parse_terms(domain, text, b)
    if query_types:
        for part in query_types.split(","):
            if part.strip():
                _add_term(b, part)
    return b.build()
