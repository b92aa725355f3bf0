"""Measurement: the only phase that touches data, and only through marginal counts.

For every residual mechanism of the plan (Algorithm 1 / 5) we need the true marginal on its
attribute set. Marginals are counted only for the *maximal* sets of the closure (the workload
marginals not contained in another one); every subset's marginal is obtained by summing axes of
the maximal table, and measured right away, so at most one maximal table is alive at a time.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import numpy as np
from tqdm.auto import tqdm

from ..engines import Closable, engine_for, maximal_sets, project
from ..errors import BudgetError, DataError
from ..mechanisms.residual import apply_sub
from ..privacy import accounting_of
from ..protocols import HasClosure, HasSecureNoise, HasSubMechanisms, ListsMechanisms, RemembersBudget
from ..reconstruct.measurements import Measurements
from ..reconstruct.stacked import StackedAnswers
from ..reconstruct.store import MeasurementStore
from ..workload import AttrSet
from .counting import count_batches
from .discrete import discrete_measure_many, discrete_randomness, round_plan
from .linear_route import measure_linear
from .secure import NOISES, measure_lattice, resolve_noise, warn_seeded_float
from .unit_records import bounded_records

__all__ = ["measure"]


def _subsets_to_measure(plan, maximal: AttrSet, done: set[AttrSet]) -> Iterator[AttrSet]:
    closure = plan.closure
    for r in range(len(maximal), -1, -1):
        for sub in itertools.combinations(maximal, r):
            if sub in done:
                continue
            done.add(sub)
            if plan.measured[closure.index(sub)]:
                yield sub


def _lists_mechanisms(plan) -> bool:
    """A plan that lists its mechanisms and estimates from their outputs (every planner but the
    ResidualPlanner family, whose residual mechanisms are measured by the batched path here)."""
    return isinstance(plan, ListsMechanisms)


def _is_residual_plan(plan) -> bool:
    """A plan of the ResidualPlanner family: its residual mechanisms, one per closure set."""
    return isinstance(plan, HasClosure)


def used_attributes(plan) -> tuple[int, ...] | None:
    """Positions of the attributes a plan measures (the only columns read from the data), or
    ``None`` when the plan does not say."""
    if _is_residual_plan(plan):
        sets = [s for s, m in zip(plan.closure.sets, plan.measured) if m]
    else:  # every mechanism measures a subset of the workload's attributes
        sets = getattr(getattr(plan, "workload", None), "sets", None)
        if sets is None:
            return None
    used = sorted({a for s in sets for a in s})
    return tuple(used) if used else None


def check_budget_holds(plan, noise: str | None, rng=None) -> None:
    """Refuse (:class:`~dpmatrix.errors.BudgetError`) a measurement whose noise would state an ε
    above the asked one: the plan's (ε, δ) budget was converted with the continuous Gaussian's
    analytic curve (``Budget.approx(ε, δ, noise="gaussian")``), but the noise drawn is discrete
    or lattice noise, whose (ε, δ) is stated through zCDP (Canonne, Kamath, Steinke 2020,
    Corollary 13) — a larger ε at the same σ. The continuous Gaussian is drawn for
    ``noise="gaussian_float"``/``"gaussian"`` and for the default noise with a generator ``rng``
    (:func:`~dpmatrix.measure.secure.resolve_noise`).

    Parameters
    ----------
    plan : Plan
    noise : str or None
        The ``noise=`` of :func:`measure`.
    rng : numpy.random.Generator, optional

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload(dm.Domain({"a": 2}), [("a",)])
    >>> plan = dm.plan(wk, budget=dm.Budget.approx(1.0, 1e-9, noise="gaussian"))
    >>> check_budget_holds(plan, "gaussian_float")  # continuous noise: the asked epsilon holds
    >>> check_budget_holds(plan, None)
    Traceback (most recent call last):
    ...
    dpmatrix.errors.BudgetError: this plan's budget epsilon = 1 at delta = 1e-09 was converted with the continuous Gaussian's analytic curve (Budget.approx(..., noise="gaussian")), but the default noise is discrete, stated through zCDP: epsilon = 1.05393 > 1 asked. Measure it with noise="gaussian_float" (continuous noise), or plan with Budget.approx(1, 1e-09) (converted for the secure default noise)
    """
    budget = plan.planned_budget if isinstance(plan, RemembersBudget) else None
    if budget is None or budget.accounting is None:
        return
    drawn = "gaussian" if noise in (None, "auto") and rng is not None else ("auto" if noise is None else noise)
    try:
        accounting_of(drawn)
    except BudgetError:
        return  # an unknown noise name: the measurement path refuses it with its own message
    if budget.holds_for(drawn):
        return
    eps, delta = budget.asked or (float("nan"), float("nan"))
    what = "the default noise is discrete" if drawn == "auto" else f"noise={drawn!r} is discrete"
    from ..privacy import DISCRETE_ZCDP, stated_epsilon

    stated = stated_epsilon(budget.pcost, delta, DISCRETE_ZCDP)
    raise BudgetError(
        f"this plan's budget epsilon = {eps:g} at delta = {delta:g} was converted with the continuous "
        f"Gaussian's analytic curve (Budget.approx(..., noise=\"gaussian\")), but {what}, stated through "
        f"zCDP: epsilon = {stated:.6g} > {eps:g} asked. Measure it with noise=\"gaussian_float\" "
        f"(continuous noise), or plan with Budget.approx({eps:g}, {delta:g}) (converted for the secure "
        "default noise)"
    )


def measure(
    plan,
    data,
    *,
    rng: np.random.Generator | None = None,
    progress: bool = False,
    engine=None,
    noise: str | None = None,
    rel_var_tol: float = 1e-4,
    store=None,
    encoding: str = "auto",
    on_unknown="error",
    na_values=(),
    privacy_unit=None,
):
    """Noisy answers of every mechanism of ``plan`` on ``data``: the one measurement path.

    Each mechanism reads only one marginal table (Algorithm 1 / 5: ``ω = H₁ v_A + σ_A H₂ z``);
    the engine counts the maximal sets, smaller tables are sums. ResidualPlanner plans go through
    the batched residual path below; every other plan lists its mechanisms
    (:class:`~dpmatrix.mechanisms.linear.LinearMechanism`: attribute set, linear map, noise family
    and scale) and is measured by :func:`~dpmatrix.measure.linear_route.measure_linear`. Both
    return the same :class:`~dpmatrix.reconstruct.measurements.Measurements`.

    Parameters
    ----------
    plan : PlanBase
        A plan from :func:`dpmatrix.plan` (ResidualPlanner / RP+, QuerySmasher / WFF, pure ε-DP).
    data : pandas.DataFrame, numpy.ndarray, str, pathlib.Path or engine
        The records: a DataFrame (or a 2-D integer array of codes in domain column order), a
        path to a CSV/Parquet file (counted inside DuckDB), a Spark DataFrame (counted in
        Spark), or a data engine.
    rng : numpy.random.Generator, optional
        The generator the Gaussian noise is drawn from; ``None`` draws a fresh generator seeded
        by the operating system (never numpy's global state).
    progress : bool, default False
        Show a progress bar.
    engine : engine or {"numpy", "duckdb", "spark"}, optional
        Count with this engine instead of the one chosen for ``data`` (``"spark"``: a
        Parquet/CSV path, glob or table name counted in Spark).
    noise : {None, "auto", "discrete_gaussian", "lattice_gaussian", "gaussian_float", "gaussian", "discrete_laplace"}
        ``None`` (default): the plan's own secure noise — for pure ε-DP plans the exact discrete
        Laplace; for Gaussian plans ``"auto"``: chosen by :func:`dpmatrix.measure.secure.resolve_noise` —
        ``"discrete_gaussian"`` for integer factors, ``"lattice_gaussian"`` for real-valued
        strategies, the floating-point Gaussian only when a generator ``rng`` is given.
        ``"discrete_gaussian"``: exact integer noise from the OS CSPRNG (Algorithm 3, see
        :mod:`dpmatrix.measure.discrete`); ``"lattice_gaussian"``: the real-valued query snapped
        to a fine lattice plus exact discrete noise (:mod:`dpmatrix.mechanisms.lattice`). Both
        round every σ up to a rational (variance increase at most ``rel_var_tol``) and return the
        re-scored plan; ``rng`` is then used only if given, as a reproducible but insecure byte
        source for tests. ``"gaussian_float"`` (alias ``"gaussian"``): floating-point Gaussian
        draws from ``rng`` (or an OS-seeded PCG64): not a cryptographic source.
    rel_var_tol : float, default 1e-4
        Largest relative variance increase from rounding σ for discrete noise.
    store : str, pathlib.Path or bool, optional
        Keep the noisy answers on disk instead of in memory (for plans whose measurements do not
        fit in RAM, e.g. 7.7 GB at d = 200): a folder path (kept; must not hold a store yet), or
        ``True`` for a temporary folder removed with the measurements. See
        :mod:`dpmatrix.reconstruct.store`.

    encoding : {"auto", "raw", "codes"}, default "auto"
        What the data hold: ``"raw"`` values (labels matched as text, numbers put into the
        domain's bins — as ``dpmatrix release`` reads them), ``"codes"`` ``0..size-1``, or
        ``"auto"``: the reading the data fit, refused when both fit and disagree (see
        :mod:`dpmatrix.engines.data_source`).
    on_unknown : {"error", "clip", "other"} or mapping, default "error"
        Raw values the domain does not cover: an error naming them, or clipped to the first/last
        bin, or mapped to the label ``"other"``; per column as ``{column: policy}``.
    na_values : sequence of str, optional
        Text markers that mean "missing" besides empty cells, None, NaN and NULL; what happens
        to a missing value is each attribute's ``missing`` policy (see :mod:`dpmatrix.values`).
        Only the attributes the plan measures are read and validated.
    privacy_unit : Unit or False, optional
        Protect a person, not a record (:class:`~dpmatrix.unit.Unit`): the data (a DataFrame or
        a CSV/Parquet path with the identifier column) are bounded to ``k`` records per
        identifier before counting, in memory (:mod:`dpmatrix.measure.unit_records`). ``None``
        (default): the plan's own unit (``dm.plan(..., privacy_unit=...)``), if any; ``False``:
        none (the records were bounded by the caller).

    Returns
    -------
    Measurements
        Frozen; ``marginal()``, ``answer()``, ``query()`` give tidy tables with variances.

    Examples
    --------
    >>> import numpy as np, pandas as pd, dpmatrix as dm
    >>> dom = dm.Domain({"a": 2, "b": 3})
    >>> plan = dm.plan(dm.Workload(dom, [("a", "b")]), rho=1.0)
    >>> df = pd.DataFrame({"a": [0, 1, 1], "b": [2, 0, 2]})
    >>> meas = dm.measure(plan, df, rng=np.random.default_rng(0))
    >>> meas.marginal(("a", "b")).shape[0]
    6
    """
    check_budget_holds(plan, noise, rng)  # before any data are read or noise drawn
    unit = plan.privacy_unit if privacy_unit is None else (privacy_unit or None)
    if unit is not None:
        if engine is not None and not isinstance(engine, str):
            raise DataError("a privacy unit bounds the records before counting: give the records (a DataFrame or "
                            "a file path), not an engine")  # fmt: skip
        names = [plan.domain.names[i] for i in (used_attributes(plan) or range(len(plan.domain)))]
        meas = measure(plan, bounded_records(data, names, unit, na_values=na_values), rng=rng, progress=progress,
                       noise=noise,
                       rel_var_tol=rel_var_tol, store=store, encoding=encoding, on_unknown=on_unknown,
                       na_values=na_values, privacy_unit=False)  # counted in memory
        meas.plan.with_privacy_unit(unit)  # the measured plan (σ rounded up for discrete noise) protects it too
        return meas
    _check_arguments(plan, rng, store)  # before an engine (e.g. a Spark session) is started
    owned = engine is None or isinstance(engine, str)  # an engine made here is closed here
    if owned:
        engine = engine_for(
            data, plan.domain, engine=engine, encoding=encoding, on_unknown=on_unknown,
            na_values=na_values, attributes=used_attributes(plan),
        )  # fmt: skip
    # everything after the engine exists runs under this try: a session it started (Spark) is
    # stopped whatever fails (inline, not a helper: the warnings' stacklevel counts frames)
    try:
        if not _is_residual_plan(plan):
            if _lists_mechanisms(plan):
                if isinstance(plan, HasSubMechanisms) and (noise is None or noise in NOISES):
                    # QuerySmasher: secure by default — exact discrete Gaussian where every
                    # space has integer factors, the lattice sampler otherwise; float only on request
                    noise = resolve_noise(plan, "auto" if noise is None else noise, rng)
                elif noise in (None, "auto") and isinstance(plan, HasSecureNoise):
                    # a plan naming its secure sampler (explicit strategies): float only with a generator
                    noise = "gaussian" if rng is not None else plan.secure_noise
                    if rng is not None:
                        warn_seeded_float()
                return measure_linear(plan, data, rng=rng, noise=noise, rel_var_tol=rel_var_tol, engine=engine)
            raise DataError(f"measure() needs a plan from dpmatrix.plan(), got {type(plan).__name__}")
        if noise is None:
            noise = "auto"
        noise = resolve_noise(plan, noise, rng)  # secure by default
        if noise == "lattice_gaussian":
            return measure_lattice(plan, data, rng=rng, progress=progress, engine=engine,
                                   rel_var_tol=rel_var_tol, store=store)
        sigma_bar = None
        if noise == "discrete_gaussian":
            plan, sigma_bar = round_plan(plan, rel_var_tol)
            randomness = discrete_randomness(rng)
        else:
            # a user's generator is reproducible by whoever has the seed
            randomness = "numpy_generator" if rng is None else "seeded_insecure"
            if rng is None:
                rng = np.random.default_rng()
        eng = engine_for(data, plan.domain, engine=engine)
        top = maximal_sets(s for s, m in zip(plan.closure.sets, plan.measured) if m)
        if store is None or store is False:
            # a dict whose vectors lie back to back: reconstruction reads them without a copy
            noisy: dict[AttrSet, np.ndarray] | MeasurementStore = StackedAnswers(plan.closure)
        else:
            noisy = MeasurementStore(plan, store)
        done: set[AttrSet] = set()
        bar = tqdm(total=len(top), desc="measuring", unit="marginal", disable=not progress)
        for batch, tables in count_batches(plan.domain, top, eng):
            if sigma_bar is None:
                _measure_batch(plan, batch, tables, done, rng, noisy)
            else:  # the batch's residuals at once: one exact sampler call per noise scale and shape
                items = [(sub, m) for m in batch for sub in _subsets_to_measure(plan, m, done)]
                outs = discrete_measure_many(
                    [plan.mechanism(sub) for sub, _ in items], [project(tables[m], m, sub) for sub, m in items],
                    [sigma_bar[plan.closure.index(sub)] for sub, _ in items], rng,
                )  # fmt: skip
                for (sub, _), w in zip(items, outs):
                    noisy[sub] = w
            bar.update(len(batch))
        bar.close()
        if isinstance(noisy, MeasurementStore):
            noisy.seal({"noise": noise, "randomness": randomness})
        return Measurements(plan=plan, noisy=noisy, noise=noise, randomness=randomness)
    finally:
        if owned and isinstance(engine, Closable):  # e.g. a Spark session, on every path
            engine.close()


def _check_arguments(plan, rng, store) -> None:
    """The argument errors :func:`measure` can tell before reading any data."""
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise DataError(
            f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    if store is not None and not isinstance(store, (bool, str, os.PathLike)):
        raise DataError(f"store must be a folder path or True (a temporary folder), got {type(store).__name__}")
    if store is not None and store is not False and not _is_residual_plan(plan) and _lists_mechanisms(plan):
        raise DataError("store= (noisy answers on disk) is supported for ResidualPlanner plans only")


def _measure_batch(plan, batch, tables, done: set, rng: np.random.Generator, noisy) -> None:
    """Gaussian measurement of every not-yet-measured subset of the maximal sets ``batch``.

    Vectorized over residual sets of equal shape: the maximal tables with the same per-attribute
    factors are stacked, each subset pattern's marginals are one sum over the stacked axes, and
    ``H₁ v`` and ``H₂ z`` are applied to the whole stack (:func:`~dpmatrix.mechanisms.residual.kron_apply`
    takes leading batch axes). The standard normal draws are taken from ``rng`` in one call, in
    exactly the order of the one-mechanism-at-a-time algorithm (subsets of each maximal set from
    the largest down), so results are those of the per-set loop for the same generator.
    """
    closure = plan.closure
    measured = plan.measured
    bases = plan.bases
    sigma2 = plan.sigma2
    # 1. the sequential order: which (maximal set, column pattern) pairs are measured, and where
    #    their noise sits in the stream of standard normal draws
    items: list[tuple[int, tuple[int, ...], AttrSet, int]] = []  # (batch pos, cols, sub, closure i)
    sizes: list[int] = []
    for t, m in enumerate(batch):
        k = len(m)
        for r in range(k, -1, -1):
            for cols in itertools.combinations(range(k), r):
                sub = tuple(m[c] for c in cols)
                if sub in done:
                    continue
                done.add(sub)
                i = closure.index(sub)
                if measured[i]:
                    items.append((t, cols, sub, i))
                    n = 1
                    for a in sub:
                        n *= bases[a].n_noise
                    sizes.append(n)
    if not items:
        return
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    z_all = rng.standard_normal(int(offsets[-1]))
    # 2. group by (factors of the maximal set, column pattern) and measure each group at once
    groups: dict[tuple, list[int]] = {}
    for j, (t, cols, sub, i) in enumerate(items):
        sig = tuple(id(bases[a]) for a in batch[t])
        groups.setdefault((sig, cols), []).append(j)
    out: list[np.ndarray | None] = [None] * len(items)
    for (sig, cols), members in groups.items():
        first = items[members[0]]
        m0 = batch[first[0]]
        sub_bases = tuple(bases[m0[c]] for c in cols)
        stack = np.stack([tables[batch[items[j][0]]] for j in members])
        drop = tuple(1 + c for c in range(len(m0)) if c not in cols)
        v = stack.sum(axis=drop) if drop else stack
        v = np.asarray(v, dtype=float)
        noise_shape = tuple(b.n_noise for b in sub_bases)
        size = sizes[members[0]]
        at = offsets[np.asarray(members)]
        z = z_all[at[:, None] + np.arange(size)].reshape((len(members),) + noise_shape)
        signal = apply_sub(sub_bases, v, "Sub")
        noise = apply_sub(sub_bases, z, "Gamma")
        scale = np.sqrt(sigma2[[items[j][3] for j in members]]).reshape((-1,) + (1,) * len(cols))
        omega = signal + scale * noise
        for row, j in enumerate(members):
            out[j] = omega[row]
    order = range(len(items))  # a dict keeps the order of the one-set-at-a-time algorithm
    if isinstance(noisy, MeasurementStore):
        # by size and shape, then in the batch's order (the workload's, for the largest sets):
        # reconstruction reads the marginals of one shape in workload order, in long runs
        sizes = plan.domain.sizes
        order = sorted(order, key=lambda j: (-len(items[j][2]), tuple(sizes[a] for a in items[j][2]), j))
    for j in order:
        noisy[items[j][2]] = out[j]
