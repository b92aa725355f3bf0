"""Measurement: the only phase that touches data, and only through marginal counts.

Every plan is measured the same way: the plan sizes its noise and lists its mechanism records
(``plan.mechanisms(noise=..., rel_var_tol=...)`` → the plan actually measured and its records),
and the one executor (:func:`~dpmatrix._measure.executor.execute`) counts each needed marginal
once per engine pass, applies every record's query, draws the noise through the noise-family
objects and collects the noisy answers; :class:`~dpmatrix._reconstruct.measurements.Measurements`
then estimates through the measured plan's estimator. The steps of :func:`measure` are the small
functions below: check the budget, bound a privacy unit, choose the noise, open the engine,
size the noise and list the records, execute, wrap.
"""

from __future__ import annotations

import os

import numpy as np

from .._privacy import accounting_of
from .._reconstruct.measurements import Measurements
from .._reconstruct.stacked import StackedAnswers
from .._reconstruct.store import MeasurementStore
from ..engines import Closable, engine_for
from ..errors import BudgetError, DataError
from ..protocols import HasClosure, HasMechanisms, HasSecureNoise, HasSubMechanisms, RemembersBudget
from .discrete import discrete_randomness
from .executor import check_records, execute, noise_name
from .secure import NOISES, resolve_noise, warn_seeded_float
from .unit_records import bounded_records

__all__ = ["measure"]


def used_attributes(plan) -> tuple[int, ...] | None:
    """Positions of the attributes a plan measures (the only columns read from the data), or
    ``None`` when it measures none: the plan's own fact (:meth:`dpmatrix.Plan.used_attributes`)."""
    return plan.used_attributes()


def check_budget_holds(plan, noise: str | None, rng=None) -> None:
    """Refuse (:class:`~dpmatrix.errors.BudgetError`) a measurement whose noise would state an ε
    above the asked one: the plan's (ε, δ) budget was converted with the continuous Gaussian's
    analytic curve (``Budget.approx(ε, δ, noise="gaussian")``), but the noise drawn is discrete
    or lattice noise, whose (ε, δ) is stated through zCDP (Canonne, Kamath, Steinke 2020,
    Corollary 13) — a larger ε at the same σ. The continuous Gaussian is drawn for
    ``noise="gaussian_float"``/``"gaussian"`` and for the default noise with a generator ``rng``
    (:func:`~dpmatrix._measure.secure.resolve_noise`).

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
    from .._privacy import DISCRETE_ZCDP, stated_epsilon

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
    the engine counts the maximal sets, smaller tables are sums. Every plan lists its mechanism
    records for the chosen sampler (``plan.mechanisms(noise=...)``: residual mechanisms, whose
    kind applies the batched Kronecker arithmetic, or
    :class:`~dpmatrix._mechanisms.linear.LinearMechanism`: attribute set, linear map, noise family
    and scale) and the one executor (:func:`~dpmatrix._measure.executor.execute`) measures them;
    the result is :class:`~dpmatrix._reconstruct.measurements.Measurements` over the plan measured.

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
        Laplace; for Gaussian plans ``"auto"``: chosen by :func:`dpmatrix._measure.secure.resolve_noise` —
        ``"discrete_gaussian"`` for integer factors, ``"lattice_gaussian"`` for real-valued
        strategies, the floating-point Gaussian only when a generator ``rng`` is given.
        ``"discrete_gaussian"``: exact integer noise from the OS CSPRNG (Algorithm 3, see
        :mod:`dpmatrix._measure.discrete`); ``"lattice_gaussian"``: the real-valued query snapped
        to a fine lattice plus exact discrete noise (:mod:`dpmatrix._mechanisms.lattice`). Both
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
        :mod:`dpmatrix._reconstruct.store`.

    encoding : {"auto", "raw", "codes"}, default "auto"
        What the data hold: ``"raw"`` values (labels matched as text, numbers put into the
        domain's bins — as ``dpmatrix release`` reads them), ``"codes"`` ``0..size-1``, or
        ``"auto"``: the reading the data fit, refused when both fit and disagree (see
        :mod:`dpmatrix.engines._data_source`).
    on_unknown : {"error", "clip", "other"} or mapping, default "error"
        Raw values the domain does not cover: an error naming them, or clipped to the first/last
        bin, or mapped to the label ``"other"``; per column as ``{column: policy}``.
    na_values : sequence of str, optional
        Text markers that mean "missing" besides empty cells, None, NaN and NULL; what happens
        to a missing value is each attribute's ``missing`` policy (see :mod:`dpmatrix._values`).
        Only the attributes the plan measures are read and validated.
    privacy_unit : Unit or False, optional
        Protect a person, not a record (:class:`~dpmatrix._unit.Unit`): the data (a DataFrame or
        a CSV/Parquet path with the identifier column) are bounded to ``k`` records per
        identifier before counting, in memory (:mod:`dpmatrix._measure.unit_records`). ``None``
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
        return _measure_bounded(plan, data, unit, rng=rng, progress=progress, engine=engine, noise=noise,
                                rel_var_tol=rel_var_tol, store=store, encoding=encoding, on_unknown=on_unknown,
                                na_values=na_values)  # fmt: skip
    _check_request(plan, rng, store)
    noise = _noise_for(plan, noise, rng)
    owned = engine is None or isinstance(engine, str)  # an engine made here is closed here
    if owned:
        engine = engine_for(
            data, plan.domain, engine=engine, encoding=encoding, on_unknown=on_unknown,
            na_values=na_values, attributes=used_attributes(plan),
        )  # fmt: skip
    try:
        return _measure_records(plan, engine, noise=noise, rng=rng, rel_var_tol=rel_var_tol, store=store,
                                progress=progress)
    finally:
        if owned and isinstance(engine, Closable):  # an engine made here (e.g. a Spark session), on every path
            engine.close()


def _measure_bounded(plan, data, unit, *, engine, **options) -> Measurements:
    """Measure with at most ``unit.k`` records per person: the records are bounded in memory
    (:mod:`dpmatrix._measure.unit_records`) and counted as plain records."""
    if engine is not None and not isinstance(engine, str):
        raise DataError("a privacy unit bounds the records before counting: give the records (a DataFrame or "
                        "a file path), not an engine")  # fmt: skip
    names = [plan.domain.names[i] for i in (used_attributes(plan) or range(len(plan.domain)))]
    records = bounded_records(data, names, unit, na_values=options.get("na_values"))
    meas = measure(plan, records, privacy_unit=False, **options)  # counted in memory
    meas.plan.with_privacy_unit(unit)  # the measured plan (σ rounded up for discrete noise) protects it too
    return meas


def _check_request(plan, rng, store) -> None:
    """Refuse what no measurement of ``plan`` can do: not a plan, a non-Generator ``rng``, or a
    disk store for a plan without a closure."""
    if not isinstance(plan, HasMechanisms):
        raise DataError(f"measure() needs a plan from dpmatrix.plan(), got {type(plan).__name__}")
    if store is not None and not isinstance(store, (bool, str, os.PathLike)):
        raise DataError(f"store must be a folder path or True (a temporary folder), got {type(store).__name__}")
    if store is not None and store is not False and not isinstance(plan, HasClosure):
        raise DataError("store= (noisy answers on disk) is supported for ResidualPlanner plans only")
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise DataError(
            f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )


def _noise_for(plan, noise: str | None, rng) -> str | None:
    """The sampler asked of the plan: secure by default (:func:`~dpmatrix._measure.secure.resolve_noise`)
    for residual and QuerySmasher plans, a plan's named secure sampler (float only with a
    generator), else what the caller asked (the plan refuses what it cannot run)."""
    if isinstance(plan, HasClosure) or (isinstance(plan, HasSubMechanisms) and (noise is None or noise in NOISES)):
        # exact discrete Gaussian where every factor is integer, the lattice sampler otherwise
        return resolve_noise(plan, "auto" if noise is None else noise, rng)
    if noise in (None, "auto") and isinstance(plan, HasSecureNoise):
        if rng is not None:
            warn_seeded_float()
        return "gaussian" if rng is not None else plan.secure_noise
    return noise


def _randomness(families, rng) -> str:
    """Where the noise comes from: the OS CSPRNG for exact families (a user's generator is
    warned about), numpy's Generator for the float Gaussian; a user's generator is recorded as
    ``seeded_insecure`` (reproducible by whoever has the seed)."""
    if any(f.exact for f in families.values()):
        return discrete_randomness(rng)
    return "numpy_generator" if rng is None else "seeded_insecure"


def _answer_sink(measured, noise: str | None, store):
    """Where the noisy answers go: a disk store (residual plans, ``store=``), the residual plans'
    back-to-back vectors for the Gaussian and discrete samplers, else a dict."""
    if store is not None and store is not False:
        return MeasurementStore(measured, store)
    if isinstance(measured, HasClosure) and noise != "lattice_gaussian":
        return StackedAnswers(measured.closure)  # reconstruction reads them without a copy
    return {}


def _measure_records(plan, engine, *, noise, rng, rel_var_tol: float, store, progress: bool) -> Measurements:
    """Size the noise and list the records (the plan), execute them, wrap the answers."""
    measured, records = plan.mechanisms(noise=noise, rel_var_tol=rel_var_tol)
    records = list(records)
    families = check_records(records)
    name = noise_name(families, noise)
    randomness = _randomness(families, rng)
    if rng is None and not any(f.exact for f in families.values()):
        rng = np.random.default_rng()  # OS-seeded: the float Gaussian's generator
    sink = _answer_sink(measured, name, store)
    execute(measured.domain, records, engine, rng, sink=sink, progress=progress)
    if isinstance(sink, MeasurementStore):
        sink.seal({"noise": name, "randomness": randomness})
    return Measurements(plan=measured, noisy=sink, noise=name, randomness=randomness)
