"""Non-negative, consistent tables and synthetic records from a release (private-pgm / ``mbi``).

dpmatrix's reconstruction (:mod:`dpmatrix._reconstruct`) is unbiased with exact variances, but its
cells can be negative. This module post-processes the *noisy residual measurements themselves*
(no data, no budget: post-processing costs no privacy) into a data distribution estimated by
private-pgm (McKenna, Sheldon, Miklau, *Graphical-model based estimation and inference for
differential privacy*, ICML 2019), from which every marginal is non-negative and all marginals
are mutually consistent, and records can be sampled.

The likelihood is the true one
------------------------------
Each residual mechanism of a plan (:mod:`dpmatrix.residual`) releases, for the marginal ``v_A``
of the data on its attribute set ``A``::

    ω_A = (⊗_{i∈A} Sub_i) v_A + σ_A (⊗_{i∈A} Γ_i) z,     z ~ N(0, I),

a linear measurement of ``v_A`` only (never of the full domain) whose noise covariance
``σ²_A ⊗ Γ_iΓ_iᵀ`` is *not* a multiple of the identity (for ResidualPlanner's plain marginals
``Γ_i = Sub_i = [1 | −I]``, so ``Γ_iΓ_iᵀ = I + 11ᵀ``: the noisy numbers of one block are
correlated). Private-pgm's Gaussian log-likelihood ``½ Σ ‖(Q μ − y)/σ‖²`` assumes i.i.d. noise,
so each block is whitened per attribute, with ``P_i = (Γ_iΓ_iᵀ)^{-1/2}`` (symmetric inverse
square root, ``r_i × r_i``)::

    y_A = (⊗ P_i) ω_A = (⊗ P_i Sub_i) v_A + σ_A z',     z' = (⊗ P_iΓ_i) z ~ N(0, I)

because ``(⊗ P_iΓ_i)(⊗ P_iΓ_i)ᵀ = ⊗ P_i Γ_iΓ_iᵀ P_i = I``. ``y_A`` is handed to ``mbi`` as a
``LinearMeasurement`` on the clique ``A`` with query ``Q_A = ⊗ P_i Sub_i`` (applied factor by
factor to the model's marginal on ``A``, :class:`KronQuery`) and ``stddev = σ_A``. The whitening
is invertible, so ``½‖(Q_A μ_A − y_A)/σ_A‖²`` is exactly the negative log-likelihood of ``ω_A``
(up to a constant), and the sum over blocks is the full negative log-likelihood because the
blocks' noises are independent. (For plain marginals ``Q_Aᵀ Q_A = ⊗ (I − 11ᵀ/n_i)``: the
whitened query is an orthonormal map onto the residual space.) The total's block (``A = ∅``)
fixes the model's total at its unbiased estimate (at least 1).

Estimators
----------
* ``method="graphical_model"``: the maximum-likelihood (generalized least squares)
  non-negative, consistent marginals, found over the marginal polytope by mirror descent
  (``mbi.estimation.MirrorDescent``, Algorithm 1 of the paper; default) or L-BFGS on the
  potentials (``estimator="lbfgs"``, better when the noise scales differ by orders of
  magnitude), represented by a graphical model whose junction tree must fit in memory. If it does not (e.g. all 2-way marginals on Adult make the
  measurement graph complete, so the junction tree is the whole domain), a
  :class:`~dpmatrix.errors.PlanError` says how many cells it would need.
* ``method="mixture"``: a mixture of product distributions fitted to the same likelihood by
  gradient descent (``mbi.extensions.mixture_of_products``, after RAP^softmax). It scales to any
  number of attributes; the fit is a local optimum of a non-convex problem, not the MLE.
* ``method="auto"`` (default): the graphical model when its junction tree holds at most
  ``max_model_cells`` cells, else the mixture.

Either way the result is one distribution over the domain scaled to the estimated total: every
marginal is non-negative, sums to the total, and is the sum of any larger marginal over the
attributes it lacks. The estimates are biased (they trade variance for bias near zero and
inherit the model's assumptions); they come with no exact variances and no intervals.

Synthetic records are drawn i.i.d. from the fitted distribution with an explicit
``np.random.Generator`` (ancestral sampling along the junction tree; component, then attributes,
for the mixture). Attributes that no measurement touches are drawn uniformly (the model's
maximum-entropy answer).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ._bytesize import format_bytes
from ._linalg.kron import kron_apply
from ._reconstruct.measurements import marginal_frame
from .errors import PlanError, ReleaseError, WorkloadError
from .protocols import HasClosure
from .release import dump_json, is_release, load_release

__all__ = [
    "KronQuery",
    "PostProcessed",
    "junction_tree_cells",
    "linear_measurements",
    "fit_report",
    "postprocess",
    "postprocess_release",
    "synthetic",
    "write_postprocessed_folder",
    "whitener",
]

#: Largest junction tree (sum of its maximal cliques' cells) fitted by the graphical model under
#: ``method="auto"`` (and allowed under ``method="graphical_model"``): 10 million float64 cells
#: = 80 MB per copy; mirror descent keeps several copies (potentials, marginals, gradient).
MAX_MODEL_CELLS = 10_000_000

_METHODS = ("auto", "graphical_model", "mixture")


def _mbi():
    """Import ``mbi`` with JAX in float64 (counts of tens of thousands stall in float32)."""
    try:
        import jax

        if not jax.config.jax_enable_x64:
            jax.config.update("jax_enable_x64", True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # mbi's advice about JAX settings, at import
            import mbi
            import mbi.extensions.mixture_of_products  # noqa: F401
    except ImportError:  # pragma: no cover - dependency missing
        raise PlanError(
            "post-processing needs private-pgm: pip install 'dpmatrix[postprocess]' (or pip install 'mbi>=2')"
        ) from None
    return mbi


# -- measurements ---------------------------------------------------------------------------------
def whitener(Gamma: np.ndarray) -> np.ndarray:
    """``(Γ Γᵀ)^{-1/2}``, the symmetric inverse square root of one attribute's noise factor.

    Parameters
    ----------
    Gamma : ``r × k`` noise factor of an attribute basis (full row rank).

    Returns
    -------
    ``r × r`` matrix ``P`` with ``P Γ Γᵀ P = I``.

    Examples
    --------
    >>> G = np.array([[1.0, -1.0, 0.0], [1.0, 0.0, -1.0]])   # ResidualPlanner's Γ for n = 3
    >>> P = whitener(G)
    >>> np.allclose(P @ G @ G.T @ P, np.eye(2))
    True
    """
    C = np.asarray(Gamma, dtype=float) @ np.asarray(Gamma, dtype=float).T
    lam, V = np.linalg.eigh(C)
    if lam.size and lam.min() <= 1e-12 * max(1.0, float(lam.max())):
        raise PlanError(
            "a residual noise factor is singular (Γ Γᵀ not invertible); its measurements cannot "
            "be whitened for post-processing"
        )
    return (V / np.sqrt(lam)) @ V.T


@dataclass(frozen=True, eq=False)
class KronQuery:
    """The query ``⊗_i mats[i]`` applied to an ``mbi`` factor on a clique, axis by axis.

    ``mbi`` treats a measurement's query as static (hashed for JIT): hashing and equality are by
    identity, as for ``mbi.WeightedQuery``. ``op_norm_sq`` (``Π ‖mats[i]‖₂²``) lets ``mbi`` bound
    the Lipschitz constant of its loss without power iteration.
    """

    mats: tuple[np.ndarray, ...]

    def __call__(self, factor):
        import jax.numpy as jnp

        values = factor.datavector(flatten=False)
        for axis, m in enumerate(self.mats):
            values = jnp.moveaxis(jnp.tensordot(jnp.asarray(m), values, axes=([1], [axis])), 0, axis)
        return values.reshape(-1)

    def op_norm_sq(self) -> float:
        return float(math.prod(np.linalg.norm(m, 2) ** 2 for m in self.mats))

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


def linear_measurements(meas) -> tuple[list, float]:
    """The whitened residual measurements of ``meas`` as ``mbi.LinearMeasurement`` objects.

    Parameters
    ----------
    meas : :class:`~dpmatrix._reconstruct.measurements.Measurements`.

    Returns
    -------
    ``(measurements, total)``: one measurement per measured non-empty residual set (query
    ``⊗ P_i Sub_i``, noisy answer ``(⊗ P_i) ω_A``, ``stddev = σ_A``; see the module docstring)
    and the unbiased estimate of the total count.
    """
    mbi = _mbi()

    plan = meas.plan
    names = plan.domain.names
    per_attr: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    out = []
    for mech in plan.residual_mechanisms():
        if not mech.attrs:
            continue
        whit, query = [], []
        for a, b in zip(mech.attrs, mech.bases):
            if a not in per_attr:
                P = whitener(b.Gamma)
                per_attr[a] = (P, P @ b.Sub)
            whit.append(per_attr[a][0])
            query.append(per_attr[a][1])
        y = kron_apply(tuple(whit), np.asarray(meas.noisy[mech.attrs], dtype=float)).reshape(-1)
        out.append(
            mbi.LinearMeasurement(
                y, tuple(names[a] for a in mech.attrs), stddev=math.sqrt(mech.sigma2),
                query=KronQuery(tuple(query)),
            )
        )
    total = float(np.asarray(meas.estimate(())).reshape(()))
    return out, total


def _mbi_domain(plan, measurements):
    mbi = _mbi()
    used = sorted({a for m in measurements for a in m.clique}, key=plan.domain.names.index)
    return mbi.Domain(used, [plan.domain[a].size for a in used])


# -- the result -----------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PostProcessed:
    """A fitted distribution: non-negative, mutually consistent marginals and synthetic records.

    Attributes
    ----------
    domain : the release's :class:`~dpmatrix._domain.Domain`.
    model : the ``mbi`` model (``MarkovRandomField`` or ``MixtureOfProducts``).
    method : ``"graphical_model"`` or ``"mixture"``.
    total : the estimated total count the model is scaled to.
    closure : attribute sets (positions) the release measured.
    model_cells : junction tree cells (graphical model) or mixture parameters.
    iterations : optimizer iterations run.
    """

    domain: object
    model: object = field(repr=False)
    method: str
    total: float
    closure: frozenset = field(repr=False)
    model_cells: int
    iterations: int
    _jtree: tuple | None = field(default=None, repr=False)

    @property
    def modelled(self) -> tuple[str, ...]:
        """Names of the attributes the model covers (those some measurement touches)."""
        return tuple(self.model.domain.attributes)

    def estimate(self, attrs: Iterable[str | int] | str) -> np.ndarray:
        """Post-processed marginal on ``attrs``, shaped like the table (axes in domain order).

        Any attribute set of the modelled attributes is accepted; outside the release's closure
        it is the model's extrapolation (no measurement pins it down)."""
        key = self.domain.resolve(attrs)
        names = self.domain.names_of(key)
        missing = [n for n in names if n not in self.modelled]
        if missing:
            raise WorkloadError(
                f"{missing} not covered by the post-processed model: no released marginal "
                "involves them"
            )
        if not key:
            return np.array(self.total)
        if self.method == "mixture":
            return _mixture_marginal(self.model, names)
        return np.clip(np.asarray(self.model.project(names).datavector(flatten=False), dtype=float), 0.0, None)

    def marginal(self, attrs: Iterable[str | int] | str) -> pd.DataFrame:
        """Tidy table: attribute columns (labels, as in :meth:`Measurements.marginal`) and a
        non-negative ``estimate`` column. No variance or interval: the estimates are biased."""

        key = self.domain.resolve(attrs)
        est = self.estimate(key)
        df = marginal_frame(self.domain, key, est, np.zeros(est.shape), 0.95)
        df = df.drop(columns=["variance", "std", "lower", "upper"])
        df.attrs = {"marginal": self.domain.names_of(key), "postprocessed": self.method}
        return df

    def synthetic(self, rows: int | None = None, *, rng: np.random.Generator) -> pd.DataFrame:
        """``rows`` records (default: the rounded total) drawn i.i.d. from the fitted
        distribution, one column per domain attribute, in the domain's labels.

        Parameters
        ----------
        rows : number of records (≥ 1).
        rng : explicit ``np.random.Generator``.

        Returns
        -------
        DataFrame of categoricals (labelled or binned attributes) or integer codes.
        """
        if not isinstance(rng, np.random.Generator):
            raise WorkloadError("synthetic() needs rng=np.random.Generator (e.g. np.random.default_rng())")
        n = max(1, int(round(self.total))) if rows is None else int(rows)
        if n < 1:
            raise WorkloadError(f"rows must be at least 1, got {rows!r}")
        if self.method == "mixture":
            codes = _sample_mixture(self.model, n, rng)
        else:
            codes = _sample_tree(self.model, self._jtree, n, rng)
        cols = {}
        for attr in self.domain.attributes:
            c = codes.get(attr.name)
            if c is None:  # no measurement involves it: uniform
                c = rng.integers(0, attr.size, size=n)
            shown = attr.labels is not None or attr.bins is not None
            cols[attr.name] = (
                pd.Categorical.from_codes(c, categories=[attr.label(v) for v in range(attr.size)])
                if shown else np.asarray(c, dtype=np.int64)
            )
        return pd.DataFrame(cols)


def _draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws: ``cdf`` (rows × n, increasing) against uniforms ``u`` (rows)."""
    out = (u[:, None] >= cdf).sum(axis=1)
    return np.minimum(out, cdf.shape[1] - 1)


def _mixture_products(model) -> dict[str, np.ndarray]:
    """Per-component categorical probabilities of a ``MixtureOfProducts`` (softmax of its logits),
    in NumPy: ``model.products`` would compile one JAX program per attribute size."""
    from scipy.special import softmax

    logits = getattr(model, "_logits", None)
    if logits is None:  # pragma: no cover - another mbi layout
        return {a: np.asarray(p, dtype=float) for a, p in model.products.items()}
    return {a: softmax(np.asarray(v, dtype=float), axis=1) for a, v in logits.items()}


def _mixture_marginal(model, names: Sequence[str]) -> np.ndarray:
    """``total / K · Σ_k ⊗_{a∈names} p_{k,a}``: the mixture's marginal (as ``model.project``)."""
    products = _mixture_products(model)
    letters = "bcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(names)]
    formula = ",".join(f"a{c}" for c in letters) + "->" + letters
    out = np.einsum(formula, *[products[a] for a in names]) * (float(model.total) / model.num_components)
    return np.clip(out, 0.0, None)


def _sample_mixture(model, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Component uniformly, then each attribute from the component's categorical."""
    products = _mixture_products(model)
    k = rng.integers(0, model.num_components, size=n)
    out = {}
    for a, p in products.items():
        cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
        out[a] = np.empty(n, dtype=np.int64)
        for start in range(0, n, 200_000):
            kk = k[start : start + 200_000]
            out[a][start : start + len(kk)] = _draw(cdf[kk], rng.random(len(kk)))
    return out


def _sample_tree(model, jtree, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Ancestral sampling: attributes in reverse elimination order, each from its conditional
    given the already drawn attributes it shares a junction-tree clique with."""
    tree, order = jtree
    cliques = [set(c) for c in tree.nodes]
    out: dict[str, np.ndarray] = {}
    for col in reversed(order):
        parents = tuple(p for p in out if any(col in c and p in c for c in cliques))
        table = np.clip(np.asarray(model.project(parents + (col,)).datavector(flatten=False), dtype=float), 0, None)
        size = table.shape[-1]
        table = table.reshape(-1, size)
        mass = table.sum(axis=1, keepdims=True)
        cond = np.divide(table, mass, out=np.full_like(table, 1.0 / size), where=mass > 0)
        cdf = np.cumsum(cond, axis=1)
        idx = np.ravel_multi_index(tuple(out[p] for p in parents), _table_shape(model, parents)) if parents else np.zeros(n, dtype=np.int64)
        drawn = np.empty(n, dtype=np.int64)
        for start in range(0, n, 200_000):
            ii = idx[start : start + 200_000]
            drawn[start : start + len(ii)] = _draw(cdf[ii], rng.random(len(ii)))
        out[col] = drawn
    return out


def _table_shape(model, attrs: Sequence[str]) -> tuple[int, ...]:
    return tuple(model.domain[a] for a in attrs)


# -- fitting --------------------------------------------------------------------------------------
def postprocess(
    meas,
    *,
    method: str = "auto",
    iters: int | None = None,
    max_model_cells: int = MAX_MODEL_CELLS,
    estimator: str = "mirror_descent",
    components: int = 100,
    seed: int = 0,
    progress: bool = False,
) -> PostProcessed:
    """Fit a distribution to a release's residual measurements (no data, no privacy cost).

    Parameters
    ----------
    meas : :class:`~dpmatrix._reconstruct.measurements.Measurements` (e.g. ``load_release(dir)
        .measurements``).
    method : ``"auto"`` (default), ``"graphical_model"`` or ``"mixture"`` (module docstring).
    iters : optimizer iterations (default 1000 for the graphical model, 2000 for the mixture;
        the graphical model stops early once the loss stalls).
    estimator : the graphical model's optimizer: ``"mirror_descent"`` (default;
        ``mbi.estimation.MirrorDescent``, the paper's Algorithm 1, mbi's recommendation) or
        ``"lbfgs"`` (``mbi.estimation.LBFGS`` on the potentials). Both minimize the same convex
        loss over the marginal polytope. Measured: on Adult (5 attributes, all ≤2-way, ρ = 0.01)
        mirror descent reaches a loss of 617 in 1,000 iterations where L-BFGS is at 1,171; but
        when the noise scales differ a lot (one residual 100× noisier than the others, a 2 × 3
        table) mirror descent is still far from the optimum after 3,000 iterations while L-BFGS
        reaches it in 500 (``tests/postprocess``).
    max_model_cells : junction-tree size limit of the graphical model, in cells.
    components : mixture components (``method="mixture"``). Measured on Adult, all ≤2-way,
        ρ = 1 (``benchmarks/bench_postprocess.py``): 100 components / 2,000 iterations give a
        cell MAE of 8.1 (the unbiased tables: 4.6), 400 / 4,000 give 4.3; at ρ = 0.01 both
        give about 16 (unbiased: 46). The default (100 / 2,000) keeps Adult within about a
        minute (80 s on 2 loaded cores, where 400 / 4,000 took 263 s); ask for
        ``components=400, iters=4000`` when the budget is large.
    seed : seed of the mixture's initial parameters (the fit is deterministic given it).
    progress : show a progress bar over the iterations.

    Returns
    -------
    :class:`PostProcessed`.

    Raises
    ------
    PlanError
        ``method="graphical_model"`` with a junction tree beyond ``max_model_cells`` (the
        message gives the size it would need), or an unknown method.

    Examples
    --------
    >>> pp = postprocess(meas)                        # doctest: +SKIP
    >>> pp.marginal(("age", "sex"))                   # doctest: +SKIP
    >>> pp.synthetic(1000, rng=np.random.default_rng(0))   # doctest: +SKIP
    """
    if method not in _METHODS:
        raise PlanError(f"method must be one of {_METHODS}, got {method!r}")
    if estimator not in ("lbfgs", "mirror_descent"):
        raise PlanError(f"estimator must be 'lbfgs' or 'mirror_descent', got {estimator!r}")
    mbi = _mbi()
    from tqdm.auto import tqdm

    plan = meas.plan
    measurements, total = linear_measurements(meas)
    total = max(1.0, total)
    domain = _mbi_domain(plan, measurements)
    closure = frozenset(s for s, m in zip(plan.closure.sets, plan.measured) if m)
    cliques = list({m.clique for m in measurements})
    jt_cells = None
    if method in ("auto", "graphical_model"):
        jt_cells = junction_tree_cells(domain, cliques)
        if jt_cells > max_model_cells:
            if method == "graphical_model":
                raise PlanError(
                    f"the graphical model of these measurements needs a junction tree of "
                    f"{_fmt_cells(jt_cells)} cells ({format_bytes(8 * jt_cells)} per float64 copy), "
                    f"beyond max_model_cells={max_model_cells:,}; use method='mixture' (or "
                    "'auto'), raise max_model_cells, or post-process fewer marginals"
                )
            method = "mixture"
        else:
            method = "graphical_model"
    n_iter = int(iters) if iters is not None else (1000 if method == "graphical_model" else 2000)
    if n_iter < 1:
        raise PlanError(f"iters must be at least 1, got {iters!r}")
    bar = tqdm(total=n_iter, desc=f"post-processing ({method})", unit="it", disable=not progress)
    step = mbi.estimation.CALLBACK_EVERY
    done = [0]

    def tick(_):
        done[0] += step
        bar.update(min(step, n_iter - bar.n))

    try:
        if method == "graphical_model":
            est = mbi.estimation.LBFGS() if estimator == "lbfgs" else mbi.estimation.MirrorDescent()
            model = est.estimate(domain, measurements, known_total=total, iters=n_iter,
                                 callback_fn=tick, tol=1e-9, patience=3)
            jtree = mbi.junction_tree.make_junction_tree(domain, list(model.cliques)) if len(domain) else ((), [])
            size = int(jt_cells or 0)
        else:
            import optax

            est = mbi.extensions.mixture_of_products.MixtureOfProductsEstimator(
                optimizer=optax.adam(0.05), num_components=int(components), seed=int(seed)
            )
            model = est.estimate(domain, measurements, known_total=total, iters=n_iter, callback_fn=tick)
            jtree = None
            size = int(components) * int(sum(domain.shape))
        import jax

        model = jax.block_until_ready(model)  # JAX dispatches asynchronously: finish the fit here
    finally:
        bar.close()
    return PostProcessed(
        domain=plan.domain, model=model, method=method, total=total, closure=closure,
        model_cells=size, iterations=min(done[0], n_iter), _jtree=jtree,
    )


def junction_tree_cells(domain, cliques: Sequence[tuple[str, ...]]) -> float:
    """Cells of the junction tree ``mbi`` would build for ``cliques`` over an ``mbi`` domain (sum
    over its maximal cliques): the size of the graphical model, as a float (a dense measurement
    graph makes it the whole domain, beyond any integer type)."""
    mbi = _mbi()
    if not cliques:
        return 0.0
    tree, _ = mbi.junction_tree.make_junction_tree(domain, list(cliques))
    return float(sum(math.prod(float(s) for s in domain.project(cl).shape)
                     for cl in mbi.junction_tree.maximal_cliques(tree)))


def _fmt_cells(c: float) -> str:
    return f"{c:,.0f}" if c < 1e15 else f"{c:.3g}"


def synthetic(meas, *, rows: int | None = None, rng: np.random.Generator, **options) -> pd.DataFrame:
    """Synthetic records from a release: :func:`postprocess` then :meth:`PostProcessed.synthetic`.

    Parameters
    ----------
    meas : Measurements.
    rows : number of records (default: the estimated total).
    rng : explicit ``np.random.Generator``.
    **options : passed to :func:`postprocess`.

    Returns
    -------
    DataFrame of records in the domain's labels.
    """
    return postprocess(meas, **options).synthetic(rows, rng=rng)


# -- writing beside a release ---------------------------------------------------------------------
#: Folder of a release that holds the post-processed tables.
POSTPROCESSED_DIR = "postprocessed"

POSTPROCESSED_NOTE = (
    "Post-processed tables (private-pgm fit to the release's noisy measurements; no data read, no "
    "extra privacy cost, the privacy ledger untouched): non-negative and mutually consistent (each "
    "table is the sum of any larger one), summing to the estimated total, but BIASED, with no exact "
    "variances and no confidence intervals. For unbiased estimates with exact variances and "
    "intervals use the source release's tables (or dpmatrix query on it). 'fit' compares the model "
    "with the measurements in noise units: chi2 = sum of squared whitened residuals; the truth "
    "itself would give about 'noisy_values' (a chi-square with that many degrees of freedom), and "
    "the fit should give no more."
)
#: the post-processed folder's format
POSTPROCESSED_FORMAT = "dpmatrix.postprocessed/1"
#: probability under which the fit's chi2 is called poor (above this quantile of χ²_n)
POOR_FIT_QUANTILE = 0.999


def fit_chi2(pp: PostProcessed, meas) -> tuple[float, int]:
    """``Σ_A ‖(Q_A μ_A − y_A)/σ_A‖²`` (twice mbi's loss) of the fitted marginals against the
    whitened measurements, and the number of noisy values it sums over. A fit that keeps every
    measurement has chi2 = 0; unbiased noise alone gives chi2 ≈ the number of values around the
    truth."""
    ms, _ = linear_measurements(meas)
    if not ms:
        return 0.0, 0
    chi2 = 0.0
    for m in ms:
        mu = pp.model.project(m.clique)
        r = (np.asarray(m.query(mu)) - np.asarray(m.noisy_measurement)) / m.stddev
        chi2 += float(r @ r)
    return chi2, int(sum(np.size(m.noisy_measurement) for m in ms))


def fit_report(chi2: float, n: int) -> dict:
    """The fit's χ² against what the truth would give. The true distribution is a feasible
    point of the fit (non-negative and consistent), and its χ² over ``n`` independent whitened
    noisy values is χ²_n (mean ``n``); the maximum-likelihood fit can only do better, so a χ²
    above the 99.9 % quantile of χ²_n means the optimizer stopped early or the model (a mixture,
    a truncated junction tree) cannot represent the data: the tables are then further from the
    measurements than the noise explains."""
    from scipy.stats import chi2 as chi2_dist

    bound = float(chi2_dist.ppf(POOR_FIT_QUANTILE, n)) if n else 0.0
    poor = bool(n and chi2 > bound)
    out = {"chi2": chi2, "noisy_values": n, "expected_at_truth": n, "poor_above": bound,
           "ratio_to_expected": chi2 / n if n else None, "poor": poor}
    if poor:
        out["warning"] = (
            f"poor fit: chi2 = {chi2:.4g} is {chi2 / n:.2f} times its expectation at the truth ({n}) and "
            f"above its {POOR_FIT_QUANTILE:.1%} quantile ({bound:.4g}); the post-processed tables are "
            "further from the measurements than the noise explains (try more iterations, "
            "--method graphical_model, or more mixture components)"
        )
    return out


def _dataset(pp: PostProcessed, meas, folder: Path, progress: bool) -> tuple[list, str, dict]:
    """Write every workload marginal's post-processed table into one Parquet dataset
    ``folder/tables/part-00000.parquet`` laid out as a release's (``marginal`` key column, one
    column per domain attribute, null where the marginal lacks it; here one ``estimate``
    column), one row group per marginal. Returns the manifest entries, the key style and the
    column types."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ._release_tables import CODE, key_style, marginal_key, residual_label_columns

    plan = meas.plan
    dom = plan.domain
    style = key_style(dom.names)
    types = residual_label_columns(plan)
    schema = pa.schema([("marginal", pa.string())]
                       + [(n, pa.int64() if types[n] == CODE else pa.string()) for n in dom.names]
                       + [("estimate", pa.float64())])
    (folder / "tables").mkdir(parents=True, exist_ok=True)
    path = folder / "tables" / "part-00000.parquet"
    wk = plan.workload
    entries = []
    with pq.ParquetWriter(str(path), schema) as writer:
        for i in tqdm(range(len(wk)), desc="writing post-processed tables", unit="marginal", disable=not progress):
            names = wk.names(i)
            df = pp.marginal(names)
            rows = len(df)
            key = marginal_key(names, style)
            cols = {"marginal": pa.array([key] * rows, pa.string())}
            for n in dom.names:
                if n in names:
                    v = df[n]
                    cols[n] = (pa.array(np.asarray(v, dtype=np.int64)) if types[n] == CODE
                               else pa.array([str(x) for x in v], pa.string()))
                else:
                    cols[n] = pa.nulls(rows, schema.field(n).type)
            cols["estimate"] = pa.array(df["estimate"].to_numpy(dtype=float))
            writer.write_table(pa.table(cols, schema=schema))
            entries.append({"attributes": list(names), "key": key, "cells": rows,
                            "table": {"part": "tables/part-00000.parquet", "row_group": i}})
    return entries, style, types


def write_postprocessed_folder(pp: PostProcessed, meas, folder, *, source: dict | None = None,
                               privacy: dict | None = None, progress: bool = False) -> dict:
    """Write the post-processed tables and their manifest into ``folder`` (created): one Parquet
    dataset like a release's (:func:`_dataset`), ``manifest.json`` labelled post-processed and
    biased, with the fit's χ² against its expectation (:func:`fit_report`), and ``README.txt``.
    Returns the manifest."""
    from .release import sha256_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    entries, style, types = _dataset(pp, meas, folder, progress)
    chi2, n_values = fit_chi2(pp, meas)
    manifest = {
        "format": POSTPROCESSED_FORMAT,
        "postprocessed": True,
        "biased": True,
        "note": POSTPROCESSED_NOTE,
        "source": source or {},
        "privacy": privacy or {},
        "privacy_note": "post-processing of released numbers only: the same guarantee as the "
                        "source release, no additional privacy cost",
        "method": pp.method,
        "library": "private-pgm (mbi)",
        "estimated_total": pp.total,
        "iterations": pp.iterations,
        "model_cells": pp.model_cells,
        "fit": fit_report(chi2, n_values),
        "tables": {"dataset": "tables/", "key": style, "label_columns": types,
                   "columns": ["marginal", *meas.plan.domain.names, "estimate"]},
        "marginals": entries,
    }
    readme = (
        "dpmatrix post-processed tables\n\n" + POSTPROCESSED_NOTE + "\n\n"
        "tables/*.parquet is one table: column 'marginal' names the marginal (attribute names joined "
        "by ','), one column per attribute (null when the marginal lacks it), and 'estimate'. Read one "
        "marginal with e.g. pandas.read_parquet(DIR + '/tables', filters=[('marginal', '==', 'age,sex')]).\n"
    )
    (folder / "README.txt").write_text(readme)
    manifest["files"] = {rel: sha256_file(folder / rel) for rel in ("tables/part-00000.parquet", "README.txt")}
    json.loads(dump_json(manifest))  # valid JSON before writing
    (folder / "manifest.json").write_text(dump_json(manifest) + "\n")
    return manifest


def write_postprocessed(
    pp: PostProcessed,
    release_dir,
    *,
    meas=None,
    formats: Sequence[str] = ("parquet",),
    progress: bool = False,
):
    """Write ``release_dir/postprocessed/`` (see :func:`write_postprocessed_folder`): the
    post-processed tables of an existing release, beside it.

    Returns
    -------
    Path of the folder written.
    """
    base = Path(release_dir)
    if not is_release(base):
        raise ReleaseError(f"{str(base)!r} is not a dpmatrix release folder")
    rel = load_release(base)
    if meas is None:
        meas = rel.measurements
    out = base / POSTPROCESSED_DIR
    write_postprocessed_folder(pp, meas, out, source={"path": "..", "manifest_sha256": sha256_of(base)},
                               privacy=rel.privacy, progress=progress)
    return out


def sha256_of(release_dir) -> str | None:
    """SHA-256 of a release's manifest (identifies the release post-processed)."""
    from .release import MANIFEST, sha256_file

    p = Path(release_dir) / MANIFEST
    return sha256_file(p) if p.exists() else None


def postprocess_release(release_dir, out_dir, *, overwrite: bool = False, verify: bool = True,
                        progress: bool = False, **options) -> dict:
    """Non-negative, consistent tables of an existing release, written to a new folder.

    Reads the release's saved measurements only: no data, no new noise, no privacy cost (the
    ledger is not touched). The folder holds one Parquet dataset laid out like the release's,
    ``manifest.json`` (labelled post-processed and biased; the fit's χ² against its expectation,
    with a warning when the fit is poor) and ``README.txt``. It is written beside ``out_dir``
    and moved into place when complete.

    Parameters
    ----------
    release_dir : path of a release folder.
    out_dir : folder to create (must be missing or empty, or an earlier post-processed folder
        with ``overwrite=True``).
    overwrite : replace an earlier post-processed folder.
    verify : check the release's digests.
    progress : progress bars.
    **options : passed to :func:`postprocess` (``method``, ``iters``, ...).

    Returns
    -------
    dict
        The manifest written (``manifest["fit"]["warning"]`` when the fit is poor).
    """
    import os
    import shutil

    out = Path(out_dir)
    src = Path(release_dir)
    if out.exists():
        if not out.is_dir():
            raise ReleaseError(f"output {str(out)!r} exists and is not a folder")
        if any(out.iterdir()):
            if not overwrite:
                raise ReleaseError(f"output folder {str(out)!r} is not empty; choose another folder or pass --overwrite")
            if not _is_postprocessed(out):
                raise ReleaseError(f"output folder {str(out)!r} is not a post-processed folder; refusing to replace it")
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise ReleaseError("write the post-processed tables outside the release folder (--out elsewhere)")
    rel = load_release(src, verify=verify)
    if not isinstance(rel.plan, HasClosure):
        raise PlanError("post-processing fits the residual measurements of a ResidualPlanner release; "
                        "this release's plan lists other mechanisms")
    pp = postprocess(rel.measurements, progress=progress, **options)
    stage = out.with_name(out.name + ".partial")
    if stage.exists():
        shutil.rmtree(stage)
    manifest = write_postprocessed_folder(
        pp, rel.measurements, stage, privacy=rel.privacy, progress=progress,
        source={"path": str(src.resolve()), "manifest_sha256": sha256_of(src),
                "created": rel.manifest.get("created")})
    if out.exists():
        shutil.rmtree(out)
    os.replace(stage, out)
    return manifest


def _is_postprocessed(folder: Path) -> bool:
    try:
        return json.loads((folder / "manifest.json").read_text()).get("format") == POSTPROCESSED_FORMAT
    except (OSError, ValueError, AttributeError):
        return False
