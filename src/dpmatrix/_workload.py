"""Workloads of marginals and their downward closure.

A marginal on an attribute set ``A`` is the table of counts of every combination of values of
the attributes in ``A`` (the 0-way marginal, ``A = ()``, is the total count). A workload is a list
of distinct marginals with non-negative importance weights. Its downward closure — every subset of
every workload marginal — indexes the residual mechanisms of ResidualPlanner (paper §4.2,
Theorem 4.2); it is computed once, with vectorized integer keys so that workloads on 100–200
attributes (hundreds of thousands of closure sets) stay cheap.

Attribute sets are always stored as sorted tuples of attribute *positions* in the domain.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ._domain import Domain
from ._linalg.attribute_queries import QUERY_KINDS, kind_name, query_matrix, validate_query_matrix
from .errors import WorkloadError

AttrSet = tuple[int, ...]

__all__ = ["AttrSet", "Closure", "Workload"]


# --------------------------------------------------------------------------------------------
# integer keys for attribute sets: key(A) = Σ_pos (A[pos] + 1) (d + 1)^pos
# Keys of smaller sets are smaller than keys of larger sets, so sorting keys sorts by size first.
# --------------------------------------------------------------------------------------------
def _key_dtype(n_attrs: int, max_size: int) -> type:
    return np.int64 if (n_attrs + 1) ** max(max_size, 1) < 2**62 else object


def _encode(rows: np.ndarray, n_attrs: int, dtype: type) -> np.ndarray:
    """Keys of the sets given as rows of sorted positions (shape (m, k))."""
    m, k = rows.shape
    keys = np.zeros(m, dtype=dtype)
    base = 1
    for pos in range(k):
        keys = keys + (rows[:, pos].astype(dtype) + 1) * base
        base *= n_attrs + 1
    return keys


def _decode(key: int, n_attrs: int) -> AttrSet:
    out = []
    key = int(key)
    while key:
        key, digit = divmod(key, n_attrs + 1)
        out.append(digit - 1)
    return tuple(out)


def _combinations(d: int, k: int) -> np.ndarray:
    """Every k-subset of ``range(d)`` as rows of an ``(C(d, k), k)`` int64 array, in the order of
    :func:`itertools.combinations` (lexicographic), built without Python tuples: the rows of size
    j starting with ``i`` are ``i`` followed by the (lexicographically sorted, hence contiguous)
    rows of size j−1 whose first element exceeds ``i``."""
    if k == 0:
        return np.zeros((1, 0), dtype=np.int64)
    if k > d:
        return np.zeros((0, k), dtype=np.int64)
    rows = np.arange(d, dtype=np.int64).reshape(-1, 1)
    heads = np.arange(d, dtype=np.int64)
    for _ in range(2, k + 1):
        starts = np.searchsorted(rows[:, 0], heads + 1)
        lens = len(rows) - starts
        first = np.concatenate([[0], np.cumsum(lens)[:-1]])
        idx = np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(starts - first, lens)
        rows = np.hstack([np.repeat(heads, lens)[:, None], rows[idx]])
    return rows


def subset_masks(k: int) -> list[tuple[int, ...]]:
    """Column selections of every subset of ``k`` columns (bit masks in increasing order)."""
    return [tuple(j for j in range(k) if mask >> j & 1) for mask in range(1 << k)]


# dense key -> position tables are used for closures whose key space has at most this many
# entries (int32, so at most 128 MB; Synth-10^200 with all <=3-way marginals needs 8.1 M)
_DENSE_LOOKUP_MAX = 1 << 25
# boolean presence maps dedupe one level of the closure when its key space is at most this big
_BITMAP_MAX = 1 << 27


def _unique_keys(keys: np.ndarray, space: int) -> np.ndarray:
    """Sorted distinct keys, by a presence bitmap when the key space is small (linear time)."""
    if keys.dtype != object and space <= _BITMAP_MAX:
        seen = np.zeros(space, dtype=bool)
        seen[keys] = True
        return np.flatnonzero(seen).astype(keys.dtype, copy=False)
    return np.unique(keys)


@dataclass(frozen=True, eq=False)
class Closure:
    """The downward closure of a collection of attribute sets.

    ``sets[i]`` is the i-th closure member (sorted by size, then by key); ``index(A)`` and the
    vectorized :meth:`indices` find members by their attribute positions.
    """

    n_attrs: int
    keys: np.ndarray  # sorted, unique

    @classmethod
    def of(cls, n_attrs: int, marginals) -> Closure:
        """Closure of a sequence of sorted position tuples (or of ``{k: (positions, rows)}``).

        Built level by level from the largest sets down: the members of size k−1 are the
        workload's (k−1)-sets and the k immediate subsets of every member of size k, so a
        k-set costs k keys per level instead of 2^k, and each level is deduplicated with a
        presence bitmap over its key space when that is small."""
        groups = _group_positions(marginals)
        if not groups or not any(len(rows) for _, rows in groups.values()):
            raise WorkloadError("cannot take the closure of an empty workload")
        max_size = max(k for k, (_, rows) in groups.items() if len(rows))
        dtype = _key_dtype(n_attrs, max_size)
        base = n_attrs + 1
        levels: dict[int, np.ndarray] = {}
        above = np.zeros((0, max_size + 1), dtype=np.int64)  # rows of the level above
        for k in range(max_size, -1, -1):
            parts = []
            if k in groups and len(groups[k][1]):
                parts.append(_encode(groups[k][1], n_attrs, dtype))
            for drop in range(above.shape[1]):
                cols = [c for c in range(above.shape[1]) if c != drop]
                parts.append(_encode(above[:, cols], n_attrs, dtype))
            keys = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
            keys = _unique_keys(keys, base**k if dtype is not object else 0)
            levels[k] = keys
            above = _decode_rows(keys, k, n_attrs) if k else above[:0, :0]
        all_keys = np.concatenate([levels[k] for k in range(max_size + 1)])
        return cls(n_attrs, all_keys)

    def __len__(self) -> int:
        return len(self.keys)

    @cached_property
    def sets(self) -> tuple[AttrSet, ...]:
        if self.keys.dtype == object:
            return tuple(_decode(k, self.n_attrs) for k in self.keys)
        out: list[AttrSet] = []
        for k, (idx, rows) in self.rows_by_size().items():
            out.extend(map(tuple, rows.tolist()) if k else [()] * len(idx))
        return tuple(out)

    def __iter__(self):
        return iter(self.sets)

    def __contains__(self, attrs: object) -> bool:
        try:
            self.index(attrs)  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            return False
        return True

    def subsets(self, key: AttrSet) -> list[tuple[tuple[int, ...], AttrSet, int]]:
        """Every subset of the attribute set ``key`` (by size, then lexicographically) as
        ``(positions within key, attribute set, position in the closure or −1)``."""
        out = []
        for r in range(len(key) + 1):
            for cols in itertools.combinations(range(len(key)), r):
                sub = tuple(key[c] for c in cols)
                try:
                    j = self.index(sub)
                except KeyError:
                    j = -1
                out.append((cols, sub, j))
        return out

    def index(self, attrs: Iterable[int]) -> int:
        """Position of one member; ``KeyError`` if it is not in the closure."""
        key_set = tuple(sorted(attrs))
        base = self.n_attrs + 1
        key = 0
        mult = 1
        for a in key_set:
            a = int(a)
            if not 0 <= a < self.n_attrs:
                raise KeyError(key_set)
            key += (a + 1) * mult
            mult *= base
        lookup = self._lookup
        if lookup is not None:
            i = int(lookup[key]) if key < len(lookup) else -1
        else:
            keys = self.keys
            j = int(np.searchsorted(keys, key))
            i = j if j < len(keys) and keys[j] == key else -1
        if i < 0:
            raise KeyError(key_set)
        return i

    @cached_property
    def _lookup(self) -> np.ndarray | None:
        """Dense table key -> position (−1 if absent) when the key space is small enough."""
        if self.keys.dtype == object or len(self.keys) == 0:
            return None
        space = int(self.keys[-1]) + 1
        if space > _DENSE_LOOKUP_MAX:
            return None
        table = np.full(space, -1, dtype=np.int32)
        table[self.keys] = np.arange(len(self.keys), dtype=np.int32)
        return table

    def indices(self, rows: np.ndarray) -> np.ndarray:
        """Positions of the sets given as rows of sorted attribute positions; −1 if absent."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.ndim != 2:
            raise ValueError("rows must be a 2-D array of attribute positions")
        q = _encode(rows, self.n_attrs, self.keys.dtype.type if self.keys.dtype != object else object)
        lookup = self._lookup
        if lookup is not None:
            inside = q < len(lookup)
            out = np.full(len(q), -1, dtype=np.int64)
            out[inside] = lookup[q[inside]]
            return out
        pos = np.searchsorted(self.keys, q)
        pos = np.minimum(pos, len(self.keys) - 1)
        found = self.keys[pos] == q
        return np.where(found, pos, -1).astype(np.int64)

    @cached_property
    def sizes(self) -> np.ndarray:
        """Number of attributes of each member."""
        if self.keys.dtype == object:
            return np.array([len(s) for s in self.sets], dtype=np.int64)
        out = np.zeros(len(self.keys), dtype=np.int64)
        bound = 1
        while True:
            more = self.keys >= bound
            if not more.any():
                return out
            out += more
            bound *= self.n_attrs + 1

    def rows_by_size(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Members grouped by size: ``{k: (positions in the closure, (m, k) attribute rows)}``
        (computed once; the arrays are read-only)."""
        return self._rows_by_size

    @cached_property
    def _rows_by_size(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        sizes = self.sizes
        out = {}
        bounds = np.searchsorted(sizes, np.arange(int(sizes.max()) + 2)) if len(sizes) else []
        for k in sorted(set(sizes.tolist())):  # not np.unique: it imports numpy.ma
            idx = np.arange(bounds[k], bounds[k + 1], dtype=np.int64)  # sorted by size first
            if self.keys.dtype == object:
                rows = np.asarray([self.sets[i] for i in idx], dtype=np.int64).reshape(len(idx), k)
            else:
                rows = _decode_rows(self.keys[idx], k, self.n_attrs)
            idx.setflags(write=False)
            rows.setflags(write=False)
            out[k] = (idx, rows)
        return out


def _decode_rows(keys: np.ndarray, k: int, n_attrs: int) -> np.ndarray:
    """Rows of sorted attribute positions of keys of k-sets (inverse of :func:`_encode`)."""
    rows = np.empty((len(keys), k), dtype=np.int64)
    rest = keys.copy()
    for pos in range(k):
        rest, digit = np.divmod(rest, n_attrs + 1)
        rows[:, pos] = digit - 1
    return rows


def _group_positions(marginals) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``{k: (positions in the list, (m_k, k) rows)}`` for the marginals of each size k.

    ``marginals`` is a sequence of sorted position tuples, or already such a dict (returned as
    is). Vectorized: one pass to flatten, then one gather per size."""
    if isinstance(marginals, Mapping):
        return marginals  # type: ignore[return-value]
    n = len(marginals)
    lengths = np.fromiter(map(len, marginals), dtype=np.int64, count=n)
    total = int(lengths.sum())
    flat = np.fromiter(itertools.chain.from_iterable(marginals), dtype=np.int64, count=total)
    starts = np.cumsum(lengths) - lengths
    out = {}
    for k in sorted(set(lengths.tolist())):  # not np.unique: it imports numpy.ma (slow start)
        pos = np.flatnonzero(lengths == k)
        rows = flat[starts[pos][:, None] + np.arange(k, dtype=np.int64)] if k else np.zeros(
            (len(pos), 0), dtype=np.int64
        )
        out[k] = (pos, rows)
    return dict(sorted(out.items()))


IDENTITY = "identity"


def _default_type(attr) -> str:
    """Default per-attribute query type: plain cells (``"identity"``) whatever the attribute's
    kind, as on the command line (a published table is a table of cells; prefix or
    range queries, paper §7.1, are asked for by name)."""
    return IDENTITY


@dataclass(frozen=True, eq=False)
class Workload:
    """A list of distinct (generalized) marginals on a domain, each with a non-negative weight.

    ``Workload(dom, [("age", "sex"), ("race",)], weights=[1.0, 2.0])``; builders
    :meth:`marginals` (all k-way or all ≤k-way) and :meth:`small_marginals`.

    Each attribute of a marginal carries a *query type* (ResidualPlanner+, paper §7.1): the base
    matrix ``W_i`` applied to it — ``"identity"`` (plain cells), ``"prefix"`` (``value ≤ v``),
    ``"range"`` (every ``[a, b]``) or a user matrix whose row space contains the all-ones row.
    ``query_types={"age": "prefix"}`` sets an attribute's type everywhere; attributes not named
    are ``"identity"`` (cells), whatever their kind. A single marginal
    can override it: ``{"attributes": ("age", "race"), "query_types": {"age": "range"}}``.
    """

    domain: Domain
    weights: np.ndarray = field(repr=False)
    attr_types: tuple[str, ...] = field(repr=False)
    overrides: Mapping[int, tuple[str, ...]] = field(repr=False)
    matrices: Mapping[str, np.ndarray] = field(repr=False)

    def __init__(
        self,
        domain: Domain,
        marginals: Iterable[Iterable[str | int] | str | Mapping],
        weights: Iterable[float] | None = None,
        query_types: Mapping[str, str | np.ndarray] | None = None,
    ):
        if not isinstance(domain, Domain):
            raise WorkloadError(f"a workload needs a Domain, got {type(domain).__name__}")
        matrices: dict[str, np.ndarray] = {}
        attr_types = _attribute_types(domain, query_types, matrices)
        sets: list[AttrSet] = []
        overrides: dict[int, tuple[str, ...]] = {}
        seen: dict[AttrSet, int] = {}
        for m in marginals:
            own = None
            if isinstance(m, Mapping):
                unknown = set(m) - {"attributes", "query_types"}
                if unknown or "attributes" not in m:
                    raise WorkloadError(
                        "a marginal given as a mapping needs 'attributes' and optionally "
                        f"'query_types', got keys {sorted(m)}"
                    )
                own = m.get("query_types")
                m = m["attributes"]
            attrs = domain.resolve(m)
            if attrs in seen:
                raise WorkloadError(
                    f"marginal {domain.names_of(attrs)} is listed twice in the workload; "
                    "list each marginal once (use its weight to make it more important)"
                )
            if own:
                types = dict(zip(attrs, (attr_types[a] for a in attrs)))
                for name, t in own.items():
                    a = domain.index(name)
                    if a not in attrs:
                        raise WorkloadError(
                            f"query type given for {name!r}, which is not in the marginal "
                            f"{domain.names_of(attrs)}"
                        )
                    types[a] = _type_key(domain, a, t, matrices)
                key = tuple(types[a] for a in attrs)
                if key != tuple(attr_types[a] for a in attrs):
                    overrides[len(sets)] = key
            seen[attrs] = len(sets)
            sets.append(attrs)
        if not sets:
            raise WorkloadError("the workload is empty: give at least one marginal")
        if weights is None:
            w = np.ones(len(sets))
        else:
            try:
                w = np.asarray(list(weights), dtype=float)
            except (TypeError, ValueError):
                raise WorkloadError("weights must be numbers") from None
            if w.shape != (len(sets),):
                raise WorkloadError(
                    f"{w.size} weights given for {len(sets)} marginals; give one weight per marginal"
                )
            if not np.all(np.isfinite(w)):
                raise WorkloadError("weights must be finite numbers (no NaN or infinity)")
            if np.any(w < 0):
                bad = [domain.names_of(sets[i]) for i in np.flatnonzero(w < 0)[:3]]
                raise WorkloadError(f"weights must be non-negative; negative for {bad}")
            if not np.any(w > 0):
                raise WorkloadError("at least one weight must be positive")
        w.setflags(write=False)
        self._set(domain, tuple(sets), w, attr_types, overrides, matrices)

    def _set(self, domain, sets, w, attr_types, overrides, matrices, groups=None) -> None:
        object.__setattr__(self, "domain", domain)
        if sets is not None:
            self.__dict__["sets"] = sets
        if groups is not None:
            self.__dict__["_groups"] = groups
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "attr_types", attr_types)
        object.__setattr__(self, "overrides", overrides)
        object.__setattr__(self, "matrices", matrices)

    # -- builders -----------------------------------------------------------------------------
    @classmethod
    def marginals(
        cls,
        domain: Domain,
        k: int,
        upto: bool = False,
        attributes: Iterable[str] | None = None,
        query_types: Mapping[str, str | np.ndarray] | None = None,
    ) -> Workload:
        """All k-way marginals (``upto=True``: all marginals on at most k attributes, including
        the 0-way total), optionally restricted to a subset of ``attributes``."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise WorkloadError(f"k must be an integer, got {k!r}")
        pool = domain.resolve(attributes) if attributes is not None else tuple(range(len(domain)))
        if k < 0 or (not upto and k > len(pool)):
            raise WorkloadError(
                f"k must be between 0 and {len(pool)} (the number of attributes), got {k}"
            )
        ks = range(0, min(k, len(pool)) + 1) if upto else (k,)
        # built as integer arrays (one per size); the tuples of ``sets`` only on demand
        pool_arr = np.asarray(pool, dtype=np.int64)
        groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        start = 0
        for j in ks:
            rows = pool_arr[_combinations(len(pool), j)]
            rows.setflags(write=False)
            groups[j] = (np.arange(start, start + len(rows), dtype=np.int64), rows)
            start += len(rows)
        return cls._trusted(domain, None, query_types, groups=groups)

    @classmethod
    def _trusted(
        cls, domain: Domain, sets: list[AttrSet] | None, query_types=None, groups=None
    ) -> Workload:
        """Workload from distinct sorted position tuples built by this module (unit weights),
        given as tuples or as ``{k: (positions, (m_k, k) rows)}``."""
        self = object.__new__(cls)
        n = len(sets) if sets is not None else sum(len(pos) for pos, _ in groups.values())
        w = np.ones(n)
        w.setflags(write=False)
        matrices: dict[str, np.ndarray] = {}
        attr_types = _attribute_types(domain, query_types, matrices)
        self._set(domain, None if sets is None else tuple(sets), w, attr_types, {}, matrices, groups)
        return self

    @cached_property
    def sets(self) -> tuple[AttrSet, ...]:
        """The marginals, as sorted tuples of attribute positions (in workload order)."""
        out: list[AttrSet] = [()] * len(self.weights)
        for k, (pos, rows) in self._groups.items():
            if k:
                for i, t in zip(pos.tolist(), map(tuple, rows.tolist())):
                    out[i] = t
        return tuple(out)

    @cached_property
    def _groups(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """``{k: (positions, (m_k, k) attribute rows)}``: the marginals of each size as arrays."""
        return _group_positions(self.sets)

    @property
    def sets_by_size(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """The marginals grouped by size, as arrays: ``{k: (positions, rows)}`` with ``positions``
        the indices in workload order of the ``k``-way marginals and ``rows`` their ``(m_k, k)``
        sorted attribute positions (read-only; no Python tuple per marginal, so it stays cheap at
        100+ attributes where :attr:`sets` has 10⁵–10⁶ entries).

        Examples
        --------
        >>> from dpmatrix import Domain
        >>> wk = Workload(Domain({"a": 2, "b": 3, "c": 2}), [("a", "b"), ("c",)])
        >>> {k: (pos.tolist(), rows.tolist()) for k, (pos, rows) in sorted(wk.sets_by_size.items())}
        {1: ([1], [[2]]), 2: ([0], [[0, 1]])}
        """
        return self._groups

    @classmethod
    def small_marginals(
        cls,
        domain: Domain,
        max_cells: int = 5000,
        min_attributes: int = 0,
        query_types: Mapping[str, str | np.ndarray] | None = None,
    ) -> Workload:
        """Every marginal with at most ``max_cells`` cells (paper appendix I, "Small Marginals";
        it includes the 0-way total unless ``min_attributes`` > 0)."""
        if max_cells < 1:
            raise WorkloadError("max_cells must be at least 1")
        sizes = domain.sizes
        out: list[AttrSet] = []

        def grow(prefix: AttrSet, cells: int, start: int) -> None:
            if len(prefix) >= min_attributes:
                out.append(prefix)
            for i in range(start, len(sizes)):
                if cells * sizes[i] <= max_cells:
                    grow(prefix + (i,), cells * sizes[i], i + 1)

        grow((), 1, 0)
        if not out:
            raise WorkloadError(f"no marginal has at most {max_cells} cells")
        return cls._trusted(domain, out, query_types)

    # -- query types --------------------------------------------------------------------------
    def types(self, i: int) -> tuple[str, ...]:
        """Query type key of each attribute of workload marginal ``i``."""
        own = self.overrides.get(i)
        return own if own is not None else tuple(self.attr_types[a] for a in self.sets[i])

    def query_matrix(self, attr: int, key: str) -> np.ndarray:
        """The base matrix ``W`` of a query type key on attribute position ``attr``."""
        if key in self.matrices:
            return self.matrices[key]
        return query_matrix(key, self.domain.sizes[attr])

    @cached_property
    def is_plain(self) -> bool:
        """True when every query is an ordinary marginal (ResidualPlanner's case)."""
        used = {self.attr_types[a] for a in self._attributes_used}
        used |= {t for key in self.overrides.values() for t in key}
        return used <= {IDENTITY}

    @cached_property
    def _attributes_used(self) -> list[int]:
        """Positions of the attributes that appear in some marginal (sorted)."""
        seen = np.zeros(len(self.domain), dtype=bool)
        for k, (_, rows) in self._groups.items():
            if k:
                seen[rows.reshape(-1)] = True
        return np.flatnonzero(seen).tolist()

    @cached_property
    def types_by_attribute(self) -> tuple[tuple[str, ...], ...]:
        """For each attribute, the distinct query type keys it is used with (sorted)."""
        used: list[set[str]] = [set() for _ in self.domain.names]
        for a in self._attributes_used:
            used[a].add(self.attr_types[a])
        for i, key in self.overrides.items():
            for a, t in zip(self.sets[i], key):
                used[a].add(t)
        return tuple(tuple(sorted(u)) for u in used)

    # -- derived ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.weights)

    @cached_property
    def closure(self) -> Closure:
        """Downward closure (computed once)."""
        return Closure.of(len(self.domain), self._groups)

    @cached_property
    def cells(self) -> np.ndarray:
        """Number of cells of each workload marginal."""
        sizes = np.asarray(self.domain.sizes, dtype=float)
        out = np.ones(len(self))
        for k, (pos, rows) in self._groups.items():
            if k:
                out[pos] = np.prod(sizes[rows], axis=1)
        return out

    @cached_property
    def n_queries(self) -> np.ndarray:
        """Number of queries (rows of ⊗ W_i) of each workload marginal; the cells if plain."""
        if self.is_plain:
            return self.cells
        rows = {}
        out = np.ones(len(self.sets))
        for i, s in enumerate(self.sets):
            n = 1.0
            for a, t in zip(s, self.types(i)):
                if (a, t) not in rows:  # a plain attribute's n rows: no identity matrix built
                    rows[a, t] = self.domain.sizes[a] if t == IDENTITY else self.query_matrix(a, t).shape[0]
                n *= rows[a, t]
            out[i] = n
        return out

    def names(self, i: int) -> tuple[str, ...]:
        return self.domain.names_of(self.sets[i])

    def index(self, attrs: Iterable[str | int] | str) -> int:
        """Position of a marginal in the workload."""
        key = self.domain.resolve(attrs)
        try:
            return self._position[key]
        except KeyError:
            raise WorkloadError(
                f"marginal {self.domain.names_of(key)} is not in the workload"
            ) from None

    @cached_property
    def _position(self) -> dict[AttrSet, int]:
        return {s: i for i, s in enumerate(self.sets)}

    def to_dict(self) -> dict:
        """JSON-ready form: marginals (with their query types where not identity) and weights."""
        out_marg = []
        for i, s in enumerate(self.sets):
            names = list(self.domain.names_of(s))
            types = {n: t for n, t in zip(names, self.types(i)) if t != IDENTITY}
            out_marg.append({"attributes": names, "query_types": types} if types else names)
        return {
            "marginals": out_marg,
            "weights": self.weights.tolist(),
            "matrices": {k: v.tolist() for k, v in self.matrices.items()},
        }

    @classmethod
    def from_dict(cls, domain: Domain, spec: Mapping) -> Workload:
        matrices = {k: np.asarray(v, dtype=float) for k, v in spec.get("matrices", {}).items()}
        marg = []
        for m in spec["marginals"]:
            if isinstance(m, Mapping) and m.get("query_types"):
                qt = {n: (matrices[t] if t in matrices else t) for n, t in m["query_types"].items()}
                marg.append({"attributes": m["attributes"], "query_types": qt})
            else:
                marg.append(m["attributes"] if isinstance(m, Mapping) else m)
        # attribute-level defaults are identity here: every non-identity type is explicit above
        plain = {n: IDENTITY for n in domain.names}
        return cls(domain, marg, spec.get("weights"), query_types=plain)

    def __repr__(self) -> str:
        counts = {k: len(pos) for k, (pos, _) in self._groups.items()}
        arity = np.bincount(list(counts), weights=list(counts.values())).astype(int)
        desc = ", ".join(f"{n}×{k}-way" for k, n in enumerate(arity) if n)
        kinds = "" if self.is_plain else ", generalized"
        return f"Workload({desc} on {len(self.domain)} attributes{kinds})"


def _type_key(domain: Domain, a: int, t, matrices: dict[str, np.ndarray]) -> str:
    """Normalize a query type (name or matrix) to a key; user matrices are validated and stored."""
    name = domain.names[a]
    if isinstance(t, str):
        key = kind_name(t)
        if key is None:
            raise WorkloadError(
                f"unknown query type {t!r} for attribute {name!r}: use one of "
                f"{sorted(QUERY_KINDS)} or a matrix with {domain.sizes[a]} columns"
            )
        return key
    W = validate_query_matrix(np.asarray(t, dtype=float), domain.sizes[a], name=f"query matrix for {name!r}")
    for key, M in matrices.items():
        if key.startswith(f"matrix:{name}") and M.shape == W.shape and np.array_equal(M, W):
            return key
    key = f"matrix:{name}" + ("" if f"matrix:{name}" not in matrices else f":{len(matrices)}")
    W = np.array(W, dtype=float)
    W.setflags(write=False)
    matrices[key] = W
    return key


def _attribute_types(domain: Domain, query_types, matrices: dict[str, np.ndarray]) -> tuple[str, ...]:
    types = [_default_type(a) for a in domain.attributes]
    for name, t in (query_types or {}).items():
        a = domain.index(name)
        types[a] = _type_key(domain, a, t, matrices)
    return tuple(types)
