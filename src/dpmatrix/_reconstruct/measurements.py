"""Reconstruction: unbiased, mutually consistent answers with exact variances (post-processing).

The noisy output ``ω_A`` of each residual mechanism gives ``r_A = (⊗ G_i) ω_A`` (``G_i =
Sub_i⁺`` for the paper's Algorithm 4: an unbiased estimate of the residual component of the
marginal on ``A``). The marginal on any closure member ``M`` is then (Algorithm 2, Theorem 4.4,
Algorithm 6)::

    x̂_M = Σ_{A ⊆ M} r_A ⊗_{j ∈ M∖A} a_j        (a_j = 1/n_j for Algorithm 4: r_A / Π n_j)

(``r_A`` broadcast along the attributes of ``M∖A``; ``[a_j, G_j]`` inverts ``[1ᵀ; Sub_j]``, see
:mod:`dpmatrix._mechanisms.residual`), which is the unique linear unbiased estimate from the measurements —
in particular the best linear unbiased (generalized least squares) one — and the answers to two
marginals agree on their common sub-marginals. Its covariance is
``Σ_{A⊆M} σ²_A ⊗_{i∈A} K_i ⊗_{j∈M∖A} a_j a_jᵀ`` (``K_i`` the residual covariance factor),
whose diagonal gives the per-cell variances without any matrix inversion.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from .._hooks import call as call_hook
from .._provenance import Provenance
from .._selection import selector
from .._workload import AttrSet
from ..errors import NotMeasuredError, PlanError, WorkloadError
from ..protocols import HasClosure, ListsMechanisms
from .broadcast import MarginalBlock, plain_block_batches, plain_blocks
from .estimator import Estimator
from .labels import cell_labels, query_labels
from .residual_estimator import ResidualEstimator
from .store import open_store

if TYPE_CHECKING:  # pragma: no cover - annotations only
    import pandas as pd

__all__ = ["Measurements", "Provenance", "QueryAnswer", "axis_labels", "marginal_frame", "query_labels"]

# residual estimates kept for reuse, in numbers of floats (about 400 MB)
_CACHE_FLOATS = 50_000_000
# cells of workload marginals reconstructed together by iter_marginals (5 arrays of 8 MB)
_BATCH_CELLS = 1 << 20


def _blocks_constructor():
    """pandas >= 3's constructor of a table from its two blocks (attribute codes, statistics),
    or ``None`` on older pandas (the ordinary constructor); looked up when a table is built, so
    importing this module does not import pandas."""
    try:
        from pandas.api.internals import create_dataframe_from_blocks
    except ImportError:  # pragma: no cover - older pandas
        return None
    return create_dataframe_from_blocks

_STATS = ("estimate", "variance", "std", "lower", "upper")


class _ResidualCache:
    """Residual estimates kept for reuse, emptied when they would exceed a float budget."""

    def __init__(self, max_floats: int | None = None):
        self.max_floats = _CACHE_FLOATS if max_floats is None else max_floats
        self.items: dict[AttrSet, np.ndarray] = {}
        self.floats = 0

    def get(self, key: AttrSet) -> np.ndarray | None:
        return self.items.get(key)

    def put(self, key: AttrSet, value: np.ndarray) -> None:
        if self.floats + value.size > self.max_floats:
            self.items.clear()
            self.floats = 0
        self.items[key] = value
        self.floats += value.size


@dataclass(frozen=True, eq=False)
class Measurements:
    """Noisy outputs of a plan's mechanisms, and everything that can be reconstructed from them.

    One type for every planner. ``noisy`` maps each mechanism's key to its noisy output (for the
    ResidualPlanner family: the residual set ``A`` to ``ω_A``, reconstructed here by Algorithm 2;
    for every other plan: the keys of ``plan.mechanisms()``, reconstructed by the plan's
    ``estimator(noisy)``, a :class:`~dpmatrix._reconstruct.estimator.Estimator`). ``marginal``,
    ``answer``, ``workload_answer``, ``query``, ``query_vector``, ``iter_marginals`` give the same
    tidy tables whatever the planner.
    """

    plan: object
    noisy: Mapping[AttrSet, np.ndarray] = field(repr=False)
    noise: str = "gaussian"
    # where the noise came from: "os_csprng" (exact discrete noise from the OS's secure source),
    # "numpy_generator" (floating-point Gaussian), "seeded_insecure" (discrete noise drawn from a
    # user's seeded generator: reproducible, NOT secure)
    randomness: str = "numpy_generator"
    _cache: _ResidualCache = field(default_factory=lambda: _ResidualCache(), repr=False, compare=False)
    # the ledger entry the measurements were charged to ("not in any ledger" unless the release
    # workflow set it) and the randomness source; written into every release's manifest
    provenance: Provenance | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.provenance is None:
            object.__setattr__(self, "provenance", Provenance(randomness=self.randomness))

    def with_ledger(self, anchor: Mapping) -> Measurements:
        """The same measurements, their provenance naming the ledger entry they were charged to
        (:meth:`dpmatrix.Ledger.anchor`; set by :func:`dpmatrix.publish`)."""
        return Measurements(plan=self.plan, noisy=self.noisy, noise=self.noise, randomness=self.randomness,
                            provenance=Provenance(anchor, self.randomness))

    @cached_property
    def _estimator(self) -> Estimator:
        """The plan's estimator bound to the noisy outputs: the plan's own for a plan that lists
        its mechanisms, Algorithm 2's :class:`ResidualEstimator` for a residual plan."""
        return self.plan.estimator(self.noisy) if isinstance(self.plan, ListsMechanisms) else ResidualEstimator(self)

    @property
    def _is_plain(self) -> bool:
        """A plain ResidualPlanner plan (identity strategies and queries: Algorithm 4 applies)."""
        return isinstance(self.plan, HasClosure) and bool(self.plan.is_plain)

    @classmethod
    def from_store(cls, folder, plan) -> Measurements:
        """Measurements kept on disk by ``plan.measure(data, store=folder)``, re-opened with the
        same plan (e.g. ``Plan.from_json``) for reconstruction in another session."""
        store = open_store(folder, plan)
        return cls(plan=plan, noisy=store, noise=store.meta.get("noise", "gaussian"),
                   randomness=store.meta.get("randomness", "numpy_generator"))

    # -- building blocks ------------------------------------------------------------------------
    def _key(self, attrs) -> AttrSet:
        return self.plan.domain.resolve(attrs)

    def residual(self, attrs) -> np.ndarray:
        """``r_A``: unbiased estimate of the residual component of the marginal on ``A``."""
        key = self._key(attrs)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if key not in self.noisy:
            names = self.plan.domain.names_of(key)
            raise NotMeasuredError(
                f"the residual of {names} was not measured: the marginal is not in the closure "
                "of the planned workload (or has zero weight); add it to the workload and re-plan"
            )
        r = self.plan.mechanism(key).residual(self.noisy[key])
        self._cache.put(key, r)
        return r

    def estimate(self, attrs: Iterable[str | int] | str) -> np.ndarray:
        """Unbiased estimate of the marginal on ``attrs``, shaped like the table (domain order)."""
        return self._estimator.estimate(self._key(attrs))

    def variance(self, attrs: Iterable[str | int] | str) -> np.ndarray:
        """Exact per-cell variances of :meth:`estimate` (data-independent)."""
        return self._estimator.variance(self._key(attrs))

    def covariance(self, attrs: Iterable[str | int] | str, max_cells: int = 20_000) -> np.ndarray:
        """Full covariance matrix of the flattened (C order) estimate of one marginal."""
        key = self._key(attrs)
        sizes = self.plan.domain.sizes
        cells = int(np.prod([sizes[a] for a in key])) if key else 1
        if cells > max_cells:
            raise WorkloadError(
                f"the covariance of {self.plan.domain.names_of(key)} would be {cells}×{cells}; "
                f"raise max_cells (now {max_cells}) if you really want it"
            )
        return self._estimator.covariance(key)

    def marginal(self, attrs: Iterable[str | int] | str, level: float = 0.95) -> pd.DataFrame:
        """Tidy table of one marginal: attribute columns, estimate, variance, std, CI bounds.

        The estimate is the reconstruction of Algorithm 2 / 6 (unbiased); the variances are exact
        (Theorem 4.4 / 7.2) and the interval is ``estimate ± z std`` (Gaussian noise).

        Parameters
        ----------
        attrs : str or iterable of str or int
            Any member of the workload's downward closure.
        level : float, default 0.95
            Confidence level of ``lower``/``upper``.

        Returns
        -------
        pandas.DataFrame
            One row per cell: the attributes' labels, ``estimate``, ``variance``, ``std``,
            ``lower``, ``upper``.

        Examples
        --------
        >>> import numpy as np, pandas as pd, dpmatrix as dm
        >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")]), rho=1.0)
        >>> meas = plan.measure(pd.DataFrame({"a": [0, 1], "b": [2, 0]}), rng=np.random.default_rng(0))
        >>> list(meas.marginal("a").columns)
        ['a', 'estimate', 'variance', 'std', 'lower', 'upper']
        """
        key = self._key(attrs)
        return marginal_frame(self.plan.domain, key, self.estimate(key), self.variance(key), level)

    def answer(self, attrs: Iterable[str | int] | str, level: float = 0.95) -> pd.DataFrame:
        """Tidy table of the *workload's queries* on a marginal: one row per query of
        ``⊗ W_i`` (cells for plain marginals; ``≤ v`` rows for prefix, ``a..b`` for ranges),
        with estimates (Algorithm 6) and exact variances (Theorem 7.2)."""
        return self.workload_answer(self._estimator.entry_of(self._key(attrs)), level)

    def workload_answer(self, i: int, level: float = 0.95) -> pd.DataFrame:
        """Tidy table of the queries of workload entry ``i`` (a marginal, or a query group of a
        QuerySmasher workload), with exact variances; see :meth:`answer`.

        Parameters
        ----------
        i : int
            Position of the entry in the workload.
        level : float, default 0.95

        Returns
        -------
        pandas.DataFrame
            Label columns, ``estimate``, ``variance``, ``std``, ``lower``, ``upper``.

        Examples
        --------
        >>> import numpy as np, pandas as pd, dpmatrix as dm
        >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")]), rho=1.0)
        >>> meas = plan.measure(pd.DataFrame({"a": [0, 1], "b": [2, 0]}), rng=np.random.default_rng(0))
        >>> meas.workload_answer(0).shape
        (6, 7)
        """
        e = self._estimator.entry(int(i))
        df = _frame(e.names, e.labels, e.estimate, e.variance, level)
        df.attrs["marginal"] = e.attributes
        return df

    def answer_columns(self, attrs: Iterable[str | int] | str, level: float = 0.95):
        """The table :meth:`answer` gives, as ``(columns, kinds, values)`` lists without pandas
        (:func:`frame_columns`; printed by :mod:`dpmatrix._table_text`)."""
        e = self._estimator.entry(self._estimator.entry_of(self._key(attrs)))
        return frame_columns(e.names, e.labels, e.estimate, e.variance, level)

    def marginal_columns(self, attrs: Iterable[str | int] | str, level: float = 0.95):
        """The table :meth:`marginal` gives, as ``(columns, kinds, values)`` lists without pandas."""
        key = self._key(attrs)
        dom = self.plan.domain
        return frame_columns(dom.names_of(key), cell_labels(dom, key), self.estimate(key), self.variance(key), level)

    def query_vector(self, attrs: Iterable[str | int] | str, q: np.ndarray) -> QueryAnswer:
        """Estimate and exact variance of the linear query ``q · x_M`` over the cells of the
        marginal on ``attrs`` (``q`` shaped like the table, or flat in C order)."""
        key = self._key(attrs)
        sizes = self.plan.domain.sizes
        shape = tuple(sizes[a] for a in key)
        q = np.asarray(q, dtype=float)
        if q.size != int(np.prod(shape)) or not np.all(np.isfinite(q)):
            raise WorkloadError(
                f"the query must have {int(np.prod(shape))} finite entries, one per cell of "
                f"{self.plan.domain.names_of(key)} (got {q.size})"
            )
        q = q.reshape(shape)
        return QueryAnswer(*self._estimator.query_vector(key, q))

    def grouped_answers(self, key: AttrSet, by: tuple[int, ...], shape: tuple[int, ...], w: np.ndarray,
                        level: float = 0.95) -> list[QueryAnswer]:
        """Answers to the queries ``e_g ⊗ w`` over the table on ``key`` (``shape``), one per cell
        ``g`` of the axes ``by`` (ascending positions within ``key``), in C order of those axes;
        ``w`` weights the other axes. All groups at once (the estimator's
        :meth:`~dpmatrix._reconstruct.estimator.Estimator.grouped_queries`)."""
        z_score(level)
        est, var = self._estimator.grouped_queries(tuple(key), tuple(by), tuple(shape), np.asarray(w, dtype=float))
        return [QueryAnswer(float(e), float(v), level) for e, v in zip(np.ravel(est), np.ravel(var))]

    def query(self, spec: Mapping[str, object], level: float = 0.95) -> QueryAnswer:
        """One counting query given per attribute; unnamed attributes are summed over.

        Parameters
        ----------
        spec : mapping of str to value, (low, high), list or dpmatrix.codes(...)
            Per attribute: a value (``"White"``), an inclusive range of labels or codes
            (``(20, 35)``), a list of values; for binned attributes numbers in the data's
            units (``{"wage": (0, 500)}``: bounds are bin edges); ``dm.codes(0, 3)`` names
            codes explicitly (:mod:`dpmatrix._selection`).
        level : float, default 0.95
            Confidence level of the interval.

        Returns
        -------
        QueryAnswer
            ``estimate``, exact ``variance``, ``std``, ``lower``, ``upper``.

        Examples
        --------
        >>> import numpy as np, pandas as pd, dpmatrix as dm
        >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")]), pcost=1e12)
        >>> meas = plan.measure(pd.DataFrame({"a": [0, 1, 1], "b": [2, 0, 2]}), rng=np.random.default_rng(0))
        >>> round(meas.query({"b": [0, 2]}).estimate, 3)
        3.0
        """
        dom = self.plan.domain
        key = dom.resolve(list(spec))
        vecs = []
        for a in key:
            attr = dom.attributes[a]
            vecs.append(selector(attr, spec[attr.name]))
        q = np.array(1.0)
        for v in vecs:
            q = np.multiply.outer(q, v)
        return self.query_vector(key, q).at_level(level)

    def count(self, where: Mapping[str, object] | None = None, *, by=None, contrast=None,
              level: float = 0.95):
        """A count, range, sum or difference of counts with its exact variance and interval
        (:func:`dpmatrix._reconstruct.linear_query.count`; never a sum of cell variances)."""
        from .linear_query import count

        return count(self, where, by=by, contrast=contrast, level=level)

    def iter_marginals(
        self, level: float = 0.95, progress: bool = False
    ) -> Iterator[tuple[tuple[str, ...], pd.DataFrame]]:
        """Yield ``(attribute names, table)`` for every workload marginal, one at a time; the
        table holds the workload's queries (:meth:`answer`; cells for plain marginals).

        A generator: nothing is kept once a table has been yielded. For ResidualPlanner plans
        (plain marginals) the marginals are reconstructed in batches of a bounded number of
        cells, vectorized over marginals of the same shape (the residuals of each subset
        pattern are stacked and broadcast-summed, Algorithm 2), and each table is built from
        the batch just before it is yielded; the values are those of :meth:`marginal`."""
        wk = self.plan.workload
        z = z_score(level)
        from tqdm.auto import tqdm  # a progress bar only when iterating over every table

        bar = tqdm(total=len(wk), desc="reconstructing", unit="marginal", disable=not progress)
        try:
            if self._is_plain:  # Algorithm 4 in batches of shared pieces
                yield from self._iter_plain(level, z, bar)
                return
            for i in self._estimator.entries():
                bar.update(1)
                t = self.workload_answer(i, level)
                yield t.attrs["marginal"], t
        finally:
            bar.close()

    def _iter_plain(self, level: float, z: float, bar) -> Iterator[tuple[tuple[str, ...], pd.DataFrame]]:
        """Batched reconstruction of every marginal of a plain workload by broadcast sums of
        shared pieces (:mod:`dpmatrix._reconstruct.broadcast`); tables in workload order."""
        import pandas as pd

        dom = self.plan.domain
        names_arr = np.asarray(dom.names, dtype=object)
        # attributes shown by label (value labels, or intervals of numeric bins): those tables
        # go through marginal_frame; plain codes take the two-block fast path
        labelled = np.array(
            [a.labels is not None or getattr(a, "bins", None) is not None for a in dom.attributes],
            dtype=bool,
        )
        done = 0
        for blocks in plain_block_batches(self, max_cells=_BATCH_CELLS, cache_floats=_CACHE_FLOATS):
            where: dict[int, tuple[int, int]] = {}
            built: list[tuple] = []
            for gid, blk in enumerate(blocks):  # each block is copied before the next is made
                m, cells = len(blk.positions), math.prod(blk.shape)
                F = np.empty((m, 5, cells))
                F[:, 0] = blk.estimate.reshape(m, cells)
                F[:, 1] = blk.variance.reshape(m, -1)
                np.sqrt(F[:, 1], out=F[:, 2])
                F[:, 3] = F[:, 0] - z * F[:, 2]
                F[:, 4] = F[:, 0] + z * F[:, 2]
                names = names_arr[blk.attrs]
                # one column Index for the block, sliced per table (cheap views)
                flat = np.concatenate(
                    [names, np.broadcast_to(np.asarray(_STATS, dtype=object), (m, 5))], axis=1
                )
                columns = pd.Index(flat.reshape(-1).tolist())
                built.append((blk.attrs, blk.shape, F, names, bool(labelled[blk.attrs].any()), columns))
                for j, pos in enumerate(blk.positions.tolist()):
                    where[pos] = (gid, j)
            last = max(where) + 1 if where else done
            for pos in sorted(where):
                gid, j = where[pos]
                grp_rows, shape, F, names, has_labels, columns = built[gid]
                key = tuple(grp_rows[j].tolist())
                nm = tuple(names[j])
                if has_labels or _blocks_constructor() is None:
                    df = marginal_frame(dom, key, F[j, 0].reshape(shape), F[j, 1].reshape(shape), level)
                else:
                    w = len(nm) + 5
                    df = _plain_frame(nm, shape, F[j], level, columns[j * w : (j + 1) * w], own=len(F) == 1)
                bar.update(pos + 1 - done)
                done = pos + 1
                yield nm, df
            bar.update(max(last - done, 0))
            done = max(done, last)
            built.clear()
        bar.update(max(len(self.plan.workload) - done, 0))

    def iter_blocks(self, *, block_cells: int | None = None) -> Iterator[MarginalBlock]:
        """Every workload marginal of a ResidualPlanner plan with plain cells, as blocks of
        stacked tables (:func:`dpmatrix._reconstruct.broadcast.plain_blocks`): the fastest way to
        stream all the estimates and variances, e.g. to a release writer.

        Each :class:`~dpmatrix._reconstruct.broadcast.MarginalBlock` holds marginals of one
        shape: ``estimate[i]`` is the table of the marginal on ``attrs[i]`` (attribute
        positions; workload position ``positions[i]``), the unbiased estimate of Algorithm 2
        (``x̂_M = Σ_{A⊆M} r_A / Π_{j∈M∖A} n_j``), with the same values as :meth:`estimate`, and
        ``variance[i]`` its exact per-cell variance (Theorem 4.4, one number per table, shaped
        ``(1,)*k``), as :meth:`variance`. **The estimates are a view of one buffer that the
        next block overwrites**: use or copy a block before asking for the next one.

        Parameters
        ----------
        block_cells : int, optional
            Cells per block (the size of the reused buffer; default 65,536).

        Returns
        -------
        iterator of MarginalBlock

        Examples
        --------
        >>> import numpy as np, pandas as pd, dpmatrix as dm
        >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b"), ("b",)]), rho=1.0)
        >>> meas = plan.measure(pd.DataFrame({"a": [0, 1], "b": [2, 0]}), rng=np.random.default_rng(0))
        >>> [(blk.attrs.tolist(), blk.estimate.shape) for blk in meas.iter_blocks()]
        [([[1]], (1, 3)), ([[0, 1]], (1, 2, 3))]
        """
        if not self._is_plain:
            raise PlanError(
                "iter_blocks streams plain marginals of a ResidualPlanner plan; use iter_marginals "
                "for generalized marginals (prefix/range queries) and other planners"
            )
        return plain_blocks(self, block_cells=block_cells)

    def _noisy_stack(self, positions: np.ndarray, sets) -> np.ndarray:
        """Noisy vectors of the closure members at ``positions`` (one shape), stacked, as
        floats."""
        stack = getattr(self.noisy, "stack", None)
        if stack is not None:  # on-disk store: contiguous runs in one read
            return stack(positions)
        vectors = self._noisy_by_position
        return np.array([vectors[i] for i in positions.tolist()], dtype=float)

    @cached_property
    def _noisy_by_position(self) -> list:
        """The in-memory noisy vectors in closure order (``None`` where nothing was measured):
        references, looked up once, so that a reconstruction pass indexes a list instead of
        hashing an attribute tuple per marginal."""
        get = self.noisy.get
        return [get(s) for s in self.plan.closure.sets]

    def postprocess(self, **options):
        """Non-negative, mutually consistent marginals fitted to these measurements by
        private-pgm (no data, no privacy cost; biased, no exact variances). See
        :func:`dpmatrix.postprocess` (this method is an alias of it) for the options."""
        return call_hook("postprocess", self, **options)

    def synthetic(self, rows: int | None = None, *, rng: np.random.Generator, **options) -> pd.DataFrame:
        """Synthetic records drawn from the post-processed distribution
        (:meth:`postprocess`), in the domain's labels."""
        return self.postprocess(**options).synthetic(rows, rng=rng)

    def __repr__(self) -> str:
        n = getattr(self.noisy, "n_values", None)
        if n is None:
            n = sum(v.size for v in self.noisy.values())
        return f"Measurements({len(self.noisy)} mechanisms, {n} noisy numbers, noise={self.noise!r})"


def z_score(level: float) -> float:
    if not 0 < level < 1:
        raise WorkloadError(f"confidence level must be strictly between 0 and 1, got {level!r}")
    return float(NormalDist().inv_cdf(0.5 + level / 2))


@dataclass(frozen=True)
class QueryAnswer:
    """Unbiased estimate of one linear query with its exact variance and a normal interval."""

    estimate: float
    variance: float
    level: float = 0.95

    @property
    def std(self) -> float:
        return float(np.sqrt(self.variance))

    @property
    def lower(self) -> float:
        return self.estimate - z_score(self.level) * self.std

    @property
    def upper(self) -> float:
        return self.estimate + z_score(self.level) * self.std

    def at_level(self, level: float) -> QueryAnswer:
        z_score(level)
        return QueryAnswer(self.estimate, self.variance, level)

    def to_frame(self) -> pd.DataFrame:
        """One tidy row: ``estimate, variance, std, lower, upper, level``."""
        import pandas as pd  # here, not at import: counting stays light

        return pd.DataFrame([{"estimate": self.estimate, "variance": self.variance, "std": self.std,
                              "lower": self.lower, "upper": self.upper, "level": self.level}])



def group_entry_labels(domain, group) -> tuple[tuple[str, ...], tuple[str, ...], list]:
    """``(attribute names, column names, per-column labels)`` of a query group's tidy table: one
    column per attribute of a Kronecker group (labels from :func:`query_labels`, ``None`` for
    plain unlabelled cells), one ``query`` column ``q0, q1, ...`` for a dense group."""
    attrs = domain.names_of(group.attrs)
    if not group.is_kron:
        return attrs, ("query",), [[f"q{j}" for j in range(group.shape[0])]]
    kinds = group.label.split(",") if group.label else []
    kinds = kinds if len(kinds) == len(group.attrs) else ["custom"] * len(group.attrs)
    return attrs, attrs, axis_labels(domain, group.attrs, kinds, group.factors)


def axis_labels(domain, attrs, kinds, matrices) -> list:
    """Per axis of a tidy table, the labels of its query rows (:func:`query_labels`), or
    ``None`` for plain cells of an attribute with neither labels nor bins (shown as codes)."""
    labels = []
    for a, kind, W in zip(attrs, kinds, matrices):
        attr = domain.attributes[a]
        plain = kind == "identity" and attr.labels is None and getattr(attr, "bins", None) is None
        labels.append(None if plain else query_labels(attr, kind, W))
    return labels



def marginal_frame(domain, key: AttrSet, estimate: np.ndarray, variance: np.ndarray, level: float) -> pd.DataFrame:
    """Tidy table of a marginal: one row per cell (C order), labelled attribute columns,
    estimate, variance, std, and the bounds of the normal confidence interval at ``level``."""
    labels = cell_labels(domain, key)
    return _frame(domain.names_of(key), labels, estimate, variance, level)


def marginal_columns(domain, key: AttrSet, estimate: np.ndarray, variance: np.ndarray, level: float):
    """The columns of :func:`marginal_frame` as plain lists, without pandas: ``(columns, kinds,
    values)`` with ``kinds`` ``"int"`` (codes), ``"text"`` (labels, bins) or ``"float"``, as
    :func:`dpmatrix._table_text.to_string` prints them (the same text as the frame's)."""
    z = z_score(level)
    shape = estimate.shape
    grids = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=int)
    columns, kinds, values = [], [], []
    for axis, a in enumerate(key):
        attr = domain.attributes[a]
        codes = grids[axis]
        columns.append(domain.names_of((a,))[0])
        if attr.labels is not None or getattr(attr, "bins", None) is not None:
            shown = [attr.label(c) for c in range(attr.size)]
            kinds.append("text")
            values.append([shown[c] for c in codes.tolist()])
        else:
            kinds.append("int")
            values.append(codes.tolist())
    est = estimate.reshape(-1)
    var = np.broadcast_to(variance, shape).reshape(-1)
    std = np.sqrt(var)
    for name, col in zip(_STATS, (est, var, std, est - z * std, est + z * std)):
        columns.append(name)
        kinds.append("float")
        values.append(col.tolist())
    return tuple(columns), tuple(kinds), tuple(values)


def frame_columns(names, labels, estimate: np.ndarray, variance: np.ndarray, level: float):
    """The columns :func:`_frame` puts in a DataFrame, as plain lists (no pandas): ``(columns,
    kinds, values)`` for :mod:`dpmatrix._table_text`; an axis with labels is ``"text"``, one
    without is ``"int"`` codes, the statistics are ``"float"``."""
    z = z_score(level)
    shape = estimate.shape
    grids = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=int)
    columns, kinds, values = [], [], []
    for axis, name in enumerate(names):
        codes = grids[axis].tolist()
        lab = labels[axis]
        columns.append(name)
        if lab is None:
            kinds.append("int")
            values.append(codes)
        else:
            shown = [str(x) for x in lab]
            kinds.append("text")
            values.append([shown[c] for c in codes])
    est = estimate.reshape(-1)
    std = np.sqrt(var := np.broadcast_to(variance, shape).reshape(-1))
    for name, col in zip(_STATS, (est, var, std, est - z * std, est + z * std)):
        columns.append(name)
        kinds.append("float")
        values.append(col.tolist())
    return tuple(columns), tuple(kinds), tuple(values)


_GRIDS: dict[tuple[int, ...], np.ndarray] = {}


def _plain_frame(
    names: tuple[str, ...], shape: tuple[int, ...], F: np.ndarray, level: float, columns=None,
    own: bool = False,
) -> pd.DataFrame:
    """:func:`_frame` for unlabelled attributes from the stacked statistics ``F`` (5 × cells):
    the same table (int64 code columns, then the five float columns), built from its two
    blocks without the per-column work of the DataFrame constructor."""
    import pandas as pd

    cells = F.shape[1]
    k = len(shape)
    grids = _GRIDS.get(shape)
    fresh = grids is None
    if fresh:
        grids = np.indices(shape, dtype=np.int64).reshape(k, -1) if shape else None
        if len(_GRIDS) < 64 and cells <= 1 << 16:  # small shapes only
            _GRIDS[shape] = grids
            fresh = False
    # ``own``: F is not shared with another table, so the table may take it without a copy
    blocks = [(F if own else np.array(F, copy=True), np.arange(k, k + 5))]
    if k:
        blocks.insert(0, (grids if fresh else grids.copy(), np.arange(k)))
    if columns is None:
        columns = pd.Index(list(names) + list(_STATS))
    df = _blocks_constructor()(blocks, index=pd.RangeIndex(cells), columns=columns)
    df.attrs["marginal"] = tuple(names)
    df.attrs["confidence_level"] = level
    return df


def _frame(names, labels, estimate: np.ndarray, variance: np.ndarray, level: float) -> pd.DataFrame:
    import pandas as pd

    z = z_score(level)
    cols: dict[str, object] = {}
    shape = estimate.shape
    grids = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=int)
    for axis, name in enumerate(names):
        codes = grids[axis]
        lab = labels[axis]
        cols[name] = codes if lab is None else pd.Categorical.from_codes(codes, categories=list(lab))
    est = estimate.reshape(-1)
    var = np.broadcast_to(variance, shape).reshape(-1)
    std = np.sqrt(var)
    cols["estimate"] = est
    cols["variance"] = var
    cols["std"] = std
    cols["lower"] = est - z * std
    cols["upper"] = est + z * std
    df = pd.DataFrame(cols)
    df.attrs["marginal"] = tuple(names)
    df.attrs["confidence_level"] = level
    return df
