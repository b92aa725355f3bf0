"""Linear queries over low-dimensional marginals (QuerySmasher, paper section 8.1).

A :class:`QueryGroup` is a set of linear queries answerable from the marginal on one attribute
set ``A`` (sorted attribute positions), all with the same importance weight (or one weight per
query), in one of two forms:

* **Kronecker** (``factors``): every row of ``W_1 ⊗ ... ⊗ W_k`` where ``W_j`` (``m_j × n_j``)
  holds per-attribute rows — marginal cells (identity), prefixes ``A_j ≤ c``, ranges, circular
  ranges, or any user matrix.  This is ResidualPlanner+'s generalized marginal.
* **explicit** (``matrix``): an ``m × Π n_j`` matrix, one query per row over the cells of the
  marginal in C (row-major) order — e.g. 2-d affine ``A_i + A_j ≤ c``, abs ``|A_i − A_j| ≤ c``
  or random 0/1 queries.

A :class:`QueryWorkload` is a list of groups on a :class:`~dpmatrix._domain.Domain`.  Builders:
:meth:`QueryWorkload.from_workload` (a :class:`~dpmatrix._workload.Workload` with its query types),
:meth:`QueryWorkload.kway` (all k-way Kronecker queries of one per-attribute kind),
:meth:`QueryWorkload.pairs` (all 2-way affine / abs queries), :meth:`QueryWorkload.random`;
workloads are combined with ``+``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ._domain import Domain
from ._linalg.attribute_queries import all_ranges
from ._linalg.kron import kron_apply
from .errors import WorkloadError

__all__ = [
    "QueryGroup",
    "QueryWorkload",
    "identity_rows",
    "prefix_rows",
    "range_rows",
    "circular_range_rows",
    "affine_queries",
    "abs_queries",
    "random_queries",
    "ROW_KINDS",
]


# -- per-attribute rows -----------------------------------------------------------------------
def _n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise WorkloadError(f"attribute size must be a positive integer, got {n!r}")
    return int(n)


def identity_rows(n: int) -> np.ndarray:
    """Marginal cells: ``I_n``."""
    return np.eye(_n(n))


def prefix_rows(n: int) -> np.ndarray:
    """Prefixes ``value ≤ c`` for ``c = 0..n-1`` (lower-triangular ones)."""
    return np.tril(np.ones((_n(n), n)))


def range_rows(n: int) -> np.ndarray:
    """Every range ``[a, b]``, ``0 ≤ a ≤ b < n``: ``n(n+1)/2`` rows (by length, then start)."""
    return all_ranges(_n(n))


def circular_range_rows(n: int) -> np.ndarray:
    """Circular ranges: for every start ``s`` and length ``L = 1..n`` the values
    ``s, s+1, ..., s+L-1 (mod n)``: ``n²`` rows (the full range appears ``n`` times, once per
    start — the paper's count, Table 4: 100 per attribute of size 10)."""
    n = _n(n)
    rows = np.zeros((n * n, n))
    k = 0
    for s in range(n):
        for length in range(1, n + 1):
            rows[k, (s + np.arange(length)) % n] = 1.0
            k += 1
    return rows


ROW_KINDS: dict[str, Callable[[int], np.ndarray]] = {
    "identity": identity_rows,
    "marginal": identity_rows,
    "prefix": prefix_rows,
    "range": range_rows,
    "circular": circular_range_rows,
}


def _rows(kind, n: int) -> np.ndarray:
    if isinstance(kind, str):
        key = kind.lower()
        if key not in ROW_KINDS:
            raise WorkloadError(f"unknown per-attribute query kind {kind!r}; use one of {sorted(ROW_KINDS)} or a matrix")
        return ROW_KINDS[key](n)
    M = np.asarray(kind, dtype=float)
    if M.ndim != 2 or M.shape[1] != n or M.shape[0] == 0 or not np.all(np.isfinite(M)):
        raise WorkloadError(f"per-attribute query matrix must be finite, 2-D with {n} columns, got shape {M.shape}")
    return M


# -- explicit 2-d families --------------------------------------------------------------------
def affine_queries(n1: int, n2: int, thresholds: Iterable[int] | None = None) -> np.ndarray:
    """``A_i + A_j ≤ c`` over the ``n1 × n2`` marginal, for ``c = 0 .. n1+n2-2`` (default)."""
    n1, n2 = _n(n1), _n(n2)
    a, b = np.meshgrid(np.arange(n1), np.arange(n2), indexing="ij")
    cs = range(n1 + n2 - 1) if thresholds is None else thresholds
    return np.array([((a + b) <= c).ravel() for c in cs], dtype=float)


def abs_queries(n1: int, n2: int, thresholds: Iterable[int] | None = None) -> np.ndarray:
    """``|A_i − A_j| ≤ c`` over the ``n1 × n2`` marginal, for ``c = 0 .. max(n1, n2)-1``."""
    n1, n2 = _n(n1), _n(n2)
    a, b = np.meshgrid(np.arange(n1), np.arange(n2), indexing="ij")
    cs = range(max(n1, n2)) if thresholds is None else thresholds
    return np.array([(np.abs(a - b) <= c).ravel() for c in cs], dtype=float)


def random_queries(sizes: Sequence[int], m: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """``m`` random 0/1 queries over the cells of a marginal: each bit is 1 with probability p."""
    if not isinstance(rng, np.random.Generator):
        raise WorkloadError("rng must be a numpy.random.Generator")
    N = math.prod(_n(s) for s in sizes)
    return (rng.random((int(m), N)) < p).astype(float)


# -- groups -----------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class QueryGroup:
    """Queries answerable from the marginal on ``attrs`` (sorted positions), with weights.

    Exactly one of ``factors`` (per-attribute rows, Kronecker form) and ``matrix`` (explicit,
    ``m × Π n_j``) is set.  ``weights`` is a scalar (every query) or one weight per query.
    """

    attrs: tuple[int, ...]
    sizes: tuple[int, ...]
    factors: tuple[np.ndarray, ...] | None = field(default=None, repr=False)
    matrix: np.ndarray | None = field(default=None, repr=False)
    weights: float | np.ndarray = 1.0
    label: str = ""

    @property
    def is_kron(self) -> bool:
        return self.factors is not None

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the table of queries: ``(m_1, ..., m_k)`` (Kronecker) or ``(m,)``."""
        if self.factors is not None:
            return tuple(f.shape[0] for f in self.factors)
        return (self.matrix.shape[0],)

    @property
    def n_queries(self) -> int:
        return math.prod(self.shape)

    @property
    def n_cells(self) -> int:
        return math.prod(self.sizes)

    @property
    def scalar_weight(self) -> bool:
        return np.ndim(self.weights) == 0

    def weight_array(self) -> np.ndarray:
        """Weights shaped like :attr:`shape`."""
        return np.broadcast_to(np.asarray(self.weights, dtype=float), self.shape)

    def dense(self) -> np.ndarray:
        """Explicit ``m × Π n_j`` query matrix (Kronecker groups are expanded: small ones only)."""
        if self.matrix is not None:
            return self.matrix
        out = np.ones((1, 1))
        for f in self.factors:
            out = np.kron(out, f)
        return out

    def answer(self, table: np.ndarray) -> np.ndarray:
        """Answers of every query on a marginal table (shape :attr:`sizes`), shaped :attr:`shape`."""
        t = np.asarray(table, dtype=float).reshape(self.sizes)
        if self.factors is not None:
            return kron_apply(self.factors, t)
        return self.matrix @ t.reshape(-1)


def _check_weights(weights, shape) -> float | np.ndarray:
    w = np.asarray(weights, dtype=float)
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise WorkloadError("query weights must be finite and non-negative")
    if w.ndim == 0:
        return float(w)
    try:
        w = np.broadcast_to(w.reshape(w.shape), shape).copy()
    except ValueError:
        raise WorkloadError(f"weights of shape {w.shape} do not match the queries' shape {shape}") from None
    w.setflags(write=False)
    return w


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


class QueryWorkload:
    """A list of :class:`QueryGroup` on one domain (the input of the QuerySmasher planner)."""

    def __init__(self, domain: Domain, groups: Iterable[QueryGroup] = ()):
        if not isinstance(domain, Domain):
            raise WorkloadError(f"a query workload needs a Domain, got {type(domain).__name__}")
        self.domain = domain
        self.groups: list[QueryGroup] = list(groups)

    # -- adding groups --------------------------------------------------------------------------
    def add_kron(self, attrs, rows: Sequence | Mapping, weight=1.0, label: str = "") -> QueryWorkload:
        """Add every row of ``⊗_j rows_j``.  ``rows``: one entry per attribute of ``attrs`` (in the
        given order, or a mapping name → entry); an entry is a kind name (``"identity"``,
        ``"prefix"``, ``"range"``, ``"circular"``) or an ``m_j × n_j`` matrix."""
        dom = self.domain
        names = [attrs] if isinstance(attrs, (str, int)) else list(attrs)
        pos = [dom.index(a) if isinstance(a, str) else int(a) for a in names]
        if isinstance(rows, Mapping):
            rows = [rows[dom.names[p]] if dom.names[p] in rows else rows[p] for p in pos]
        if isinstance(rows, str):
            rows = [rows] * len(pos)
        rows = list(rows)
        if len(rows) != len(pos) or len(set(pos)) != len(pos):
            raise WorkloadError("give one row spec per attribute, attributes distinct")
        order = np.argsort(pos)
        pos_s = tuple(pos[i] for i in order)
        mats = tuple(_ro(_rows(rows[i], dom.sizes[pos[i]])) for i in order)
        shape_given = tuple(_rows(r, dom.sizes[p]).shape[0] for r, p in zip(rows, pos)) if np.ndim(weight) else None
        w = weight
        if shape_given is not None:
            w = np.broadcast_to(np.asarray(weight, float), shape_given).transpose(order)
        sizes = tuple(dom.sizes[p] for p in pos_s)
        self.groups.append(
            QueryGroup(pos_s, sizes, factors=mats, weights=_check_weights(w, tuple(m.shape[0] for m in mats)), label=label)
        )
        return self

    def add_explicit(self, attrs, matrix, weight=1.0, label: str = "") -> QueryWorkload:
        """Add explicit queries: ``matrix`` is ``m × Π n_j`` over the cells of the marginal on
        ``attrs`` in the *given* attribute order (C order); it is re-ordered to domain order."""
        dom = self.domain
        names = [attrs] if isinstance(attrs, (str, int)) else list(attrs)
        pos = [dom.index(a) if isinstance(a, str) else int(a) for a in names]
        if len(set(pos)) != len(pos):
            raise WorkloadError("attributes must be distinct")
        sizes_given = tuple(dom.sizes[p] for p in pos)
        Q = np.asarray(matrix, dtype=float)
        if Q.ndim == 1:
            Q = Q[None, :]
        N = math.prod(sizes_given)
        if Q.ndim != 2 or Q.shape[1] != N or Q.shape[0] == 0 or not np.all(np.isfinite(Q)):
            raise WorkloadError(f"explicit queries must be a finite m × {N} matrix, got shape {Q.shape}")
        order = np.argsort(pos)
        Q = Q.reshape((Q.shape[0],) + sizes_given).transpose((0,) + tuple(1 + order)).reshape(Q.shape[0], N)
        pos_s = tuple(pos[i] for i in order)
        sizes = tuple(dom.sizes[p] for p in pos_s)
        self.groups.append(
            QueryGroup(pos_s, sizes, matrix=_ro(Q), weights=_check_weights(weight, (Q.shape[0],)), label=label)
        )
        return self

    def __add__(self, other: QueryWorkload) -> QueryWorkload:
        if not isinstance(other, QueryWorkload) or other.domain != self.domain:
            raise WorkloadError("can only add query workloads on the same domain")
        return QueryWorkload(self.domain, self.groups + other.groups)

    def __len__(self) -> int:
        return len(self.groups)

    @property
    def n_queries(self) -> int:
        return int(sum(g.n_queries for g in self.groups))

    @property
    def cells(self) -> list[int]:
        """Cells of each group's marginal (the counts its queries read), in group order."""
        return [g.n_cells for g in self.groups]

    def __repr__(self) -> str:
        return f"QueryWorkload({len(self.groups)} groups, {self.n_queries} queries on {len(self.domain)} attributes)"

    # -- persistence ----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON-ready form: one entry per group (attribute names, Kronecker rows or the explicit
        matrix in domain order, weights, label); :meth:`from_dict` reads it back exactly."""
        out = []
        for g in self.groups:
            e: dict = {"attributes": list(self.domain.names_of(g.attrs)), "label": g.label,
                       "weights": g.weights if g.scalar_weight else np.asarray(g.weights).tolist()}
            if g.is_kron:
                e["factors"] = [f.tolist() for f in g.factors]
            else:
                e["matrix"] = g.matrix.tolist()
            out.append(e)
        return {"groups": out}

    @classmethod
    def from_dict(cls, domain: Domain, spec: Mapping) -> QueryWorkload:
        """The query workload written by :meth:`to_dict`.

        Parameters
        ----------
        domain : Domain
        spec : mapping
            ``{"groups": [...]}`` as written by :meth:`to_dict`.

        Returns
        -------
        QueryWorkload

        Examples
        --------
        >>> dom = Domain({"a": 2, "b": 3})
        >>> wk = QueryWorkload(dom).add_kron(("a", "b"), ["identity", "prefix"])
        >>> QueryWorkload.from_dict(dom, wk.to_dict()).n_queries
        6
        """
        out = cls(domain)
        try:
            for e in spec["groups"]:
                w = e.get("weights", 1.0)
                w = float(w) if np.ndim(w) == 0 else np.asarray(w, dtype=float)
                if "factors" in e:
                    out.add_kron(list(e["attributes"]), [np.asarray(f, dtype=float) for f in e["factors"]],
                                 weight=w, label=e.get("label", ""))
                else:
                    out.add_explicit(list(e["attributes"]), np.asarray(e["matrix"], dtype=float),
                                     weight=w, label=e.get("label", ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise WorkloadError(f"not a query workload description: {type(exc).__name__}: {exc}") from None
        return out

    # -- builders -------------------------------------------------------------------------------
    @classmethod
    def from_workload(cls, wk) -> QueryWorkload:
        """The queries of a :class:`~dpmatrix._workload.Workload`: every row of ``⊗ W_i`` of each
        generalized marginal (its query types), with the marginal's weight."""
        out = cls(wk.domain)
        for i, s in enumerate(wk.sets):
            mats = tuple(_ro(wk.query_matrix(a, t)) for a, t in zip(s, wk.types(i)))
            sizes = tuple(wk.domain.sizes[a] for a in s)
            out.groups.append(QueryGroup(tuple(s), sizes, factors=mats, weights=float(wk.weights[i]),
                                         label=",".join(wk.types(i))))
        return out

    @classmethod
    def kway(cls, domain: Domain, k: int, kind="identity", upto: bool = False, weight=1.0,
             attributes: Iterable[str] | None = None) -> QueryWorkload:
        """All k-way Kronecker queries of one per-attribute ``kind`` (name, or a mapping
        attribute name → kind; ``upto=True`` adds every smaller arity down to 0)."""
        out = cls(domain)
        pool = domain.resolve(attributes) if attributes is not None else tuple(range(len(domain)))
        ks = range(0, k + 1) if upto else (k,)
        for j in ks:
            for s in itertools.combinations(pool, j):
                if isinstance(kind, Mapping):
                    rows = [kind.get(domain.names[a], "identity") for a in s]
                else:
                    rows = [kind] * j
                out.add_kron(s, rows, weight=weight, label=str(kind) if isinstance(kind, str) else "")
        return out

    @classmethod
    def pairs(cls, domain: Domain, kind: str = "affine", weight=1.0,
              attributes: Iterable[str] | None = None) -> QueryWorkload:
        """All 2-way explicit queries of one family: ``"affine"`` (``A_i + A_j ≤ c``) or
        ``"abs"`` (``|A_i − A_j| ≤ c``), for every pair of attributes."""
        build = {"affine": affine_queries, "abs": abs_queries}.get(kind)
        if build is None:
            raise WorkloadError(f"unknown 2-way family {kind!r}: use 'affine' or 'abs'")
        out = cls(domain)
        pool = domain.resolve(attributes) if attributes is not None else tuple(range(len(domain)))
        cache: dict[tuple[int, int], np.ndarray] = {}
        for i, j in itertools.combinations(pool, 2):
            key = (domain.sizes[i], domain.sizes[j])
            if key not in cache:
                cache[key] = _ro(build(*key))
            out.groups.append(QueryGroup((i, j), key, matrix=cache[key], weights=_check_weights(weight, (cache[key].shape[0],)),
                                         label=kind))
        return out

    @classmethod
    def random(cls, domain: Domain, k: int, rng: np.random.Generator, per_cell: float = 3.0,
               p: float = 0.3, weight=1.0) -> QueryWorkload:
        """For every k-way marginal, ``per_cell × cells`` random 0/1 queries (bit probability p)."""
        out = cls(domain)
        for s in itertools.combinations(range(len(domain)), k):
            sizes = tuple(domain.sizes[a] for a in s)
            m = int(round(per_cell * math.prod(sizes)))
            out.add_explicit(s, random_queries(sizes, m, p, rng), weight=weight, label="random")
        return out
