"""Post-processing a release into non-negative, consistent marginals and synthetic records.

Expected values come from the definitions (marginal consistency, non-negativity, the total),
from the explicit dense mechanism of ``tests/oracle.py`` (the Gaussian likelihood
``(Bx − ω)ᵀ Σ⁻¹ (Bx − ω)`` with ``Σ`` block-diagonal ``σ²_A ⊗ Sub Subᵀ``), and from an
independent CVXPY solve of the constrained maximum-likelihood problem on a 2 × 3 domain.
"""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._postprocess import _mbi, _mbi_domain, linear_measurements, postprocess, whitener
from dpmatrix._reconstruct.measurements import Measurements
from dpmatrix.errors import PlanError
from dpmatrix.planners._residual.plan import Plan


def _data(dom, n, rng):
    # skewed values so that low-budget releases have negative cells
    cols = {}
    for name, size in zip(dom.names, dom.sizes):
        p = np.arange(size, 0, -1.0) ** 3
        cols[name] = rng.choice(size, size=n, p=p / p.sum())
    return pd.DataFrame(cols)


@pytest.fixture(scope="module")
def noisy_release():
    """Three small attributes, all ≤2-way marginals, a budget small enough for negative cells."""
    rng = np.random.default_rng(7)
    dom = dm.Domain({"a": 3, "b": 4, "c": 5})
    df = _data(dom, 300, rng)
    plan = dm.plan(dm.Workload.marginals(dom, 2, upto=True), rho=0.005)
    meas = plan.measure(df, rng=rng)
    return dom, df, meas


@pytest.fixture(scope="module")
def fitted(noisy_release):
    _, _, meas = noisy_release
    return postprocess(meas, iters=500)


def _closure_names(dom, meas):
    return [dom.names_of(s) for s in meas.plan.closure.sets]


def test_whitener_makes_the_noise_white():
    # ResidualPlanner's Γ = Sub_n (oracle): P (Sub Subᵀ) P = I, P symmetric
    for n in (2, 3, 7):
        S = oracle.sub_matrix(n)
        P = whitener(S)
        np.testing.assert_allclose(P @ S @ S.T @ P, np.eye(n - 1), atol=1e-12)
        np.testing.assert_allclose(P, P.T, atol=1e-12)
    with pytest.raises(PlanError, match="singular"):
        whitener(np.array([[1.0, 0.0], [1.0, 0.0]]))


def test_loss_is_the_gaussian_negative_log_likelihood():
    """mbi's loss at the true marginals equals ½ (Bx − ω)ᵀ Σ⁻¹ (Bx − ω) over the non-empty residual
    blocks, with B and Σ written out in full by the oracle (correlated noise within a block)."""
    rng = np.random.default_rng(3)
    dom = dm.Domain({"a": 2, "b": 3, "c": 3})
    sizes = list(dom.sizes)
    df = _data(dom, 50, rng)
    plan = dm.plan(dm.Workload(dom, [("a", "b"), ("b", "c")]), rho=0.1, objective="max_var")
    meas = plan.measure(df, rng=rng)
    mbi = _mbi()
    ms, total = linear_measurements(meas)
    domain = _mbi_domain(plan, ms)
    loss = mbi.marginal_loss.from_linear_measurements(ms, domain)
    data = mbi.Dataset({n: df[n].to_numpy() for n in dom.names}, domain)
    mu = mbi.CliqueVector.from_projectable(data, loss.cliques)
    sets = [s for s in plan.closure.sets if s]
    s2 = {s: float(plan.sigma2[plan.closure.index(s)]) for s in sets}
    B, Sigma = oracle.stack_mechanism(sizes, sets, s2)
    x = oracle.data_vector(sizes, df.to_numpy())
    omega = np.concatenate([np.asarray(meas.noisy[s]).ravel() for s in sets])
    r = B @ x - omega
    expected = 0.5 * r @ np.linalg.solve(Sigma, r)
    assert float(loss(mu)) == pytest.approx(expected, rel=1e-9)
    # the total the model is scaled to is the release's unbiased total
    assert total == pytest.approx(float(np.asarray(meas.noisy[()]).reshape(())), rel=1e-12)


def test_nonnegative_consistent_and_summing_to_the_total(noisy_release, fitted):
    dom, _, meas = noisy_release
    names = _closure_names(dom, meas)
    negatives = sum(int((meas.estimate(n) < 0).sum()) for n in names if n)
    assert negatives > 0  # the release does have negative cells to fix
    assert fitted.method == "graphical_model"
    total = float(meas.estimate(()))
    assert fitted.total == pytest.approx(total)
    for n in names:
        est = fitted.estimate(n)
        assert np.all(est >= 0)
        assert float(est.sum()) == pytest.approx(total, rel=1e-6)
    # every marginal is the sum of any larger one over the attributes it lacks
    for small, big in itertools.permutations(names, 2):
        if set(small) < set(big):
            axes = tuple(i for i, a in enumerate(big) if a not in small)
            np.testing.assert_allclose(fitted.estimate(big).sum(axis=axes), fitted.estimate(small),
                                       rtol=1e-6, atol=1e-6 * total)


def test_marginal_table_shape_matches_the_unbiased_table(noisy_release, fitted):
    dom, _, meas = noisy_release
    ours = fitted.marginal(("a", "c"))
    theirs = meas.marginal(("a", "c"))
    assert list(ours.columns) == ["a", "c", "estimate"]
    pd.testing.assert_frame_equal(ours[["a", "c"]], theirs[["a", "c"]])
    np.testing.assert_allclose(ours["estimate"].to_numpy(), fitted.estimate(("a", "c")).ravel())


def test_equals_the_unbiased_estimate_when_that_is_already_nonnegative():
    """Residual measurements are not redundant: when the unbiased marginals are non-negative
    (and, on a chain, realizable) they fit every measurement exactly, so they are the MLE."""
    rng = np.random.default_rng(1)
    dom = dm.Domain({"a": 3, "b": 4, "c": 2})
    df = pd.DataFrame({n: rng.integers(0, s, 3000) for n, s in zip(dom.names, dom.sizes)})
    meas = dm.plan(dm.Workload(dom, [("a", "b"), ("b", "c")]), rho=1.0).measure(df, rng=rng)
    assert all((meas.estimate(m) > 0).all() for m in [("a", "b"), ("b", "c")])
    pp = postprocess(meas, iters=500)
    for m in [("a", "b"), ("b", "c"), ("a",), ("c",)]:
        np.testing.assert_allclose(pp.estimate(m), meas.estimate(m), rtol=1e-4)


def _two_by_three(ratio: float) -> Measurements:
    """Exact residual answers for the table x below, except the (a, b) residual, whose noise is
    ``ratio`` times larger in standard deviation and which received the interaction d: the
    unbiased table is x + d = [[50, −40, 85], [30, 105, −25]], with the exact 1-way marginals."""
    x = np.array([[50.0, 5, 40], [30, 60, 20]])
    d = np.array([[0.0, -45, 45], [0, 45, -45]])
    dom = dm.Domain({"a": 2, "b": 3})
    base = dm.plan(dm.Workload(dom, [("a", "b")]), rho=1.0)
    sets = list(base.closure.sets)
    s2 = np.array([ratio**2 if s == (0, 1) else 1.0 for s in sets])
    plan = Plan(base.workload, s2, base.objective, base.strategies, base.construction)
    noisy = {}
    for s in sets:
        R = oracle.residual_matrix([2, 3], s)
        v = R @ (x + d).ravel() if s == (0, 1) else R @ x.ravel()
        noisy[s] = v.reshape(plan.mechanism(s).output_shape)
    return Measurements(plan=plan, noisy=noisy)


def _cvxpy_mle(meas: Measurements) -> np.ndarray:
    """min (Bx − ω)ᵀ Σ⁻¹ (Bx − ω) over x ≥ 0 with 1ᵀx = the unbiased total (oracle matrices)."""
    sets = list(meas.plan.closure.sets)
    s2 = {s: float(meas.plan.sigma2[i]) for i, s in enumerate(sets)}
    B, Sigma = oracle.stack_mechanism([2, 3], sets, s2)
    omega = np.concatenate([np.asarray(meas.noisy[s]).ravel() for s in sets])
    L = np.linalg.cholesky(np.linalg.inv(Sigma))
    x = cp.Variable(6)
    total = float(np.asarray(meas.noisy[()]).reshape(()))
    cp.Problem(cp.Minimize(cp.sum_squares(L.T @ (B @ x - omega))), [x >= 0, cp.sum(x) == total]).solve()
    return x.value.reshape(2, 3)


def test_estimate_follows_the_precise_measurements():
    """One residual 100× noisier (std) than the rest: the fit keeps the precise 1-way marginals
    ([95, 110], [80, 65, 60]) and removes the negative cells through the noisy interaction; with
    equal noise the same numbers give other 1-way marginals. L-BFGS reaches the constrained MLE
    solved independently by CVXPY on the explicit mechanism; the default mirror descent keeps the
    precise marginals too but is slow along the noisy direction (it does not reach the MLE in 3,000
    iterations here: the interaction cells stay away from the oracle's zeros)."""
    noisy100, noisy1 = _two_by_three(100.0), _two_by_three(1.0)
    precise = postprocess(noisy100, iters=500, estimator="lbfgs")
    np.testing.assert_allclose(precise.estimate("a"), [95, 110], atol=0.05)
    np.testing.assert_allclose(precise.estimate("b"), [80, 65, 60], atol=0.05)
    np.testing.assert_allclose(precise.estimate(("a", "b")), _cvxpy_mle(noisy100), atol=0.05)
    equal = postprocess(noisy1, iters=500, estimator="lbfgs")
    assert np.abs(equal.estimate("a") - [95, 110]).max() > 3
    np.testing.assert_allclose(equal.estimate(("a", "b")), _cvxpy_mle(noisy1), atol=0.05)
    md = postprocess(noisy100, iters=1000)
    assert md.method == "graphical_model"
    np.testing.assert_allclose(md.estimate("a"), [95, 110], atol=0.05)
    np.testing.assert_allclose(md.estimate("b"), [80, 65, 60], atol=0.05)
    assert np.all(md.estimate(("a", "b")) >= 0)


def test_synthetic_records_match_the_model(noisy_release, fitted):
    dom, _, _ = noisy_release
    rows = 20_000
    syn = fitted.synthetic(rows, rng=np.random.default_rng(11))
    assert list(syn.columns) == list(dom.names) and len(syn) == rows
    for m in [("a", "b"), ("b", "c"), ("a", "c")]:
        p = fitted.estimate(m) / fitted.total
        counts = pd.crosstab(syn[m[0]], syn[m[1]]).reindex(
            index=range(dom[m[0]].size), columns=range(dom[m[1]].size), fill_value=0).to_numpy()
        # multinomial: every cell within 5 standard deviations of rows × p
        sd = np.sqrt(rows * p * (1 - p)) + 1e-9
        assert np.all(np.abs(counts - rows * p) <= 5 * sd + 1)
    # same generator seed, same records
    pd.testing.assert_frame_equal(syn, fitted.synthetic(rows, rng=np.random.default_rng(11)))
    with pytest.raises(dm.DPMatrixError, match="rng"):
        fitted.synthetic(10, rng=None)


def test_synthetic_uses_labels():
    rng = np.random.default_rng(5)
    dom = dm.Domain.from_dict({"sex": {"labels": ["F", "M"]}, "race": {"labels": ["x", "y", "z"]}})
    df = pd.DataFrame({"sex": rng.integers(0, 2, 200), "race": rng.integers(0, 3, 200)})
    meas = dm.plan(dm.Workload(dom, [("sex", "race")]), rho=1.0).measure(df, rng=rng)
    syn = postprocess(meas, iters=200).synthetic(50, rng=rng)
    assert list(syn["sex"].cat.categories) == ["F", "M"]
    assert set(syn["race"].astype(str)) <= {"x", "y", "z"}


def test_mixture_is_consistent_and_nonnegative(noisy_release):
    dom, _, meas = noisy_release
    pp = postprocess(meas, method="mixture", iters=300, components=20)
    assert pp.method == "mixture"
    total = float(meas.estimate(()))
    big = pp.estimate(("a", "b", "c"))  # a 3-way marginal that was not measured
    assert np.all(big >= 0) and float(big.sum()) == pytest.approx(total, rel=1e-6)
    for m in [("a",), ("b",), ("a", "b"), ("b", "c")]:
        axes = tuple(i for i, a in enumerate(("a", "b", "c")) if a not in m)
        np.testing.assert_allclose(big.sum(axis=axes), pp.estimate(m), rtol=1e-6)
    syn = pp.synthetic(1000, rng=np.random.default_rng(0))
    assert len(syn) == 1000 and list(syn.columns) == ["a", "b", "c"]


def test_too_large_junction_tree_is_a_clear_error_not_a_hang():
    rng = np.random.default_rng(2)
    dom = dm.Domain.from_sizes([10] * 6)
    df = pd.DataFrame({n: rng.integers(0, 10, 100) for n in dom.names})
    meas = dm.plan(dm.Workload.marginals(dom, 2), rho=1.0).measure(df, rng=rng)
    # 10⁶ float64 cells are 8·10⁶ bytes: 8 MB in the SI units every size is printed in
    with pytest.raises(PlanError, match=r"1,000,000 cells \(8 MB per float64 copy\).*max_model_cells=1,000"):
        postprocess(meas, method="graphical_model", max_model_cells=1000)
    with pytest.raises(PlanError, match="method must be one of"):
        postprocess(meas, method="exact")
