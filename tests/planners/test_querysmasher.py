"""QuerySmasher planner: brute force on small domains (explicit matrices), hand values,
ResidualPlanner / RP+ / WFF comparisons, optimality certificates, the paper's QS columns."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._queries import QueryWorkload, affine_queries
from dpmatrix._solvers.lowdim_optimal import optimize_subworkload
from dpmatrix.engines import NumpyEngine
from dpmatrix.planners._querysmasher.planner import plan_querysmasher
from dpmatrix.planners._querysmasher.submechanisms import DenseMech, FourierMech, KronMech


def explicit_strategy(mech):
    """Dense strategy matrix of a sub-mechanism (Fourier: from its noise levels)."""
    if isinstance(mech, FourierMech):
        from linalg.test_fourier import _explicit_fourier_strategy

        return _explicit_fourier_strategy(mech)
    if isinstance(mech, KronMech):
        return oracle.kron_all(mech.B) if mech.B else np.ones((1, 1))
    assert isinstance(mech, DenseMech)
    return np.asarray(mech.mech.B)


def stacked(plan, sizes):
    blocks, sig = [], []
    for S, r in plan.residuals.items():
        B = explicit_strategy(plan.solutions[r.structure])
        blocks.append(B @ oracle.marginal_query(sizes, S))
        sig += [r.sigma2] * B.shape[0]
    return np.vstack(blocks), np.diag(sig)


SIZES = [2, 3, 3]


def _est(meas, i):
    """Estimates of workload entry ``i`` (the tidy table's column, C order of its queries)."""
    return meas.workload_answer(i)["estimate"].to_numpy()


def small_workload():
    dom = dm.Domain.from_sizes(SIZES)
    rng = np.random.default_rng(7)
    return (QueryWorkload(dom)
            .add_kron((0, 1), ["prefix", "range"], weight=2.0)
            .add_explicit((1, 2), affine_queries(3, 3), weight=0.5)
            .add_explicit((0, 2), rng.integers(0, 2, size=(5, 6)), weight=rng.uniform(0.5, 2, size=5))
            .add_kron((2,), ["range"])
            .add_kron((0, 1, 2), ["identity", "prefix", "prefix"], weight=0.3))


@pytest.mark.parametrize("max_exact_cells", [2500, 1])
def test_bruteforce_pcost_variances_loss(max_exact_cells):
    wk = small_workload()
    p = plan_querysmasher(wk, pcost=1.0, max_exact_cells=max_exact_cells)
    B, Sigma = stacked(p, SIZES)
    true_pcost = oracle.pcost(B, Sigma)
    assert true_pcost <= p.pcost * (1 + 1e-9)
    assert p.pcost == pytest.approx(1.0)
    loss = 0.0
    for i, g in enumerate(wk.groups):
        Qf = g.dense() @ oracle.marginal_query(SIZES, g.attrs)
        var = np.diag(oracle.gls_covariance(Qf, B, Sigma))  # best linear unbiased, brute force
        np.testing.assert_allclose(p.group_variance(i).reshape(-1), var, rtol=1e-7)
        loss += float(np.sum(g.weight_array().reshape(-1) * var))
    assert p.weighted_loss() == pytest.approx(loss, rel=1e-7)
    n = wk.n_queries
    allvar = np.concatenate([p.group_variance(i).reshape(-1) for i in range(len(wk.groups))])
    assert p.rmse() == pytest.approx(math.sqrt(allvar.sum() / n), rel=1e-9)
    assert p.max_variance() == pytest.approx(allvar.max(), rel=1e-9)


def test_unbiased_linear_reconstruction_from_marginals():
    # Same noise (same seed) on two datasets: answer differences are the exact differences of
    # the true answers, so the estimator is linear and unbiased.  Counting goes through an engine.
    wk = small_workload()
    p = plan_querysmasher(wk)
    dom = wk.domain
    rng = np.random.default_rng(0)
    d1 = pd.DataFrame(rng.integers(0, [2, 3, 3], size=(200, 3)), columns=dom.names)
    d2 = pd.concat([d1, pd.DataFrame(rng.integers(0, [2, 3, 3], size=(50, 3)), columns=dom.names)])

    counted = []

    class Spy(NumpyEngine):
        def count(self, attr_sets, progress=False):
            counted.extend(attr_sets)
            return super().count(attr_sets, progress)

    m1 = p.measure(d1, rng=np.random.default_rng(42), engine=Spy(d1, dom))
    m2 = p.measure(d2, rng=np.random.default_rng(42))
    assert sorted(counted) == [(0, 1, 2)]  # only the maximal set is counted
    for i, g in enumerate(wk.groups):
        t1 = NumpyEngine(d1, dom).count([g.attrs])[g.attrs]
        t2 = NumpyEngine(d2, dom).count([g.attrs])[g.attrs]
        np.testing.assert_allclose(_est(m2, i) - _est(m1, i), (g.answer(t2) - g.answer(t1)).reshape(-1), atol=1e-8)


def test_empirical_variance_matches():
    dom = dm.Domain.from_sizes([3, 4])
    wk = QueryWorkload(dom).add_explicit((0, 1), affine_queries(3, 4)).add_kron((0,), ["prefix"])
    p = plan_querysmasher(wk)
    data = pd.DataFrame([[0, 1], [2, 3], [1, 1]], columns=dom.names)
    rng = np.random.default_rng(1)
    ans = np.array([_est(p.measure(data, rng=rng), 0) for _ in range(3000)])
    np.testing.assert_allclose(ans.var(axis=0), p.group_variance(0), rtol=0.12)
    truth = wk.groups[0].answer(NumpyEngine(data, dom).count([(0, 1)])[(0, 1)])
    assert np.all(np.abs(ans.mean(axis=0) - truth) < 4 * np.sqrt(p.group_variance(0) / 3000))


@pytest.mark.parametrize("n,expected", [(2, (3 + math.sqrt(5)) / 2), (3, (22 + 8 * math.sqrt(7)) / 9)])
def test_prefix_hand_values(n, expected):
    dom = dm.Domain.from_sizes([n])
    p = dm.plan(QueryWorkload.kway(dom, 1, "prefix"), pcost=1, planner="querysmasher")
    assert p.weighted_loss() == pytest.approx(expected, rel=1e-6)
    assert p.certificate()["lower_bound"] <= expected * (1 + 1e-12)


def test_figure2_pieces():
    dom = dm.Domain({"A1": 2, "A2": 3})
    wk = QueryWorkload(dom).add_explicit(("A1", "A2"), [[0, 1, 1, 0, 0, 1]])
    p = plan_querysmasher(wk)
    pieces = {S: P[0] for S, _, P in p._pieces[0]}
    np.testing.assert_allclose(pieces[()], [1 / 2])
    np.testing.assert_allclose(pieces[(0,)], [1 / 6, -1 / 6])
    np.testing.assert_allclose(pieces[(1,)], [-1 / 2, 0, 1 / 2])
    np.testing.assert_allclose(pieces[(0, 1)], [-1 / 6, 1 / 3, -1 / 6, 1 / 6, -1 / 3, 1 / 6], atol=1e-15)


def test_marginals_equal_residual_planner():
    dom = dm.Domain({"a": 3, "b": 5, "c": 4, "d": 2})
    wk = dm.Workload.marginals(dom, 2, upto=True)
    rp = dm.plan(wk, objective="sum_var", pcost=1)
    qs = dm.plan(wk, pcost=1, planner="querysmasher")
    assert qs.rmse() == pytest.approx(rp.rmse(), rel=1e-10)
    assert qs.max_variance() == pytest.approx(rp.max_variance(), rel=1e-9)
    for i in range(len(wk)):
        np.testing.assert_allclose(qs.group_variance(i), rp.query_variance(wk.sets[i]), rtol=1e-9)


@pytest.mark.parametrize("types", [
    {"a": "prefix", "b": "prefix"},
    {"a": "range", "c": "prefix"},
    {"a": "prefix", "b": "range", "c": "range"},
])
def test_dominates_rp_plus_and_wff(types):
    # QuerySmasher optimizes every residual space of the orthogonal (centred) decomposition, so
    # it is never worse than ResidualPlanner+ with the paper's Algorithm 4. (dpmatrix's split
    # construction leaves that family — its residual rows are not orthogonal to 1 — and can beat
    # QuerySmasher; see test_split_can_beat_orthogonal_decompositions.)
    dom = dm.Domain({"a": 5, "b": 4, "c": 3})
    wk = dm.Workload.marginals(dom, 2, upto=True, query_types=types)
    rpp = dm.plan(wk, objective="sum_var", pcost=1, construction="centred")
    qs = dm.plan(wk, pcost=1, planner="querysmasher")
    wff = dm.plan(wk, pcost=1, planner="wff")
    assert qs.rmse() <= rpp.rmse() * (1 + 1e-9)
    assert qs.rmse() <= wff.rmse() * (1 + 1e-9)


def test_split_can_beat_orthogonal_decompositions():
    dom = dm.Domain({"a": 5, "b": 4, "c": 3})
    wk = dm.Workload.marginals(dom, 2, upto=True, query_types={"a": "prefix", "b": "prefix"})
    qs = dm.plan(wk, pcost=1, planner="querysmasher")
    split = dm.plan(wk, objective="sum_var", pcost=1, construction="split")
    assert split.rmse() < qs.rmse() * 0.99


def test_dominates_wff_on_explicit_workloads():
    dom = dm.Domain.from_sizes([5, 5, 4])
    wk = QueryWorkload.pairs(dom, "abs") + QueryWorkload.kway(dom, 1, "circular") + QueryWorkload.random(
        dom, 2, np.random.default_rng(2), per_cell=1)
    qs = plan_querysmasher(wk)
    for solver in ("fourier", "rp", "kron-marginal"):
        assert qs.rmse() <= plan_querysmasher(wk, solver=solver).rmse() * (1 + 1e-9)


def test_kron_solution_matches_dense_optimum():
    # prefix ⊗ range residual (4 × 5 cells): the product of per-attribute optima vs eq. 4 on the
    # dense 20-cell sub-workload.
    dom = dm.Domain.from_sizes([4, 5])
    wk = QueryWorkload(dom).add_kron((0, 1), ["prefix", "range"])
    p = plan_querysmasher(wk)
    mech = p.solutions[p.residuals[(0, 1)].structure]
    assert isinstance(mech, KronMech)
    W = wk.groups[0].dense()
    Wc = W.reshape(-1, 4, 5)
    Wc = (Wc - Wc.mean(axis=1, keepdims=True))
    Wc = (Wc - Wc.mean(axis=2, keepdims=True)).reshape(-1, 20)
    dense = optimize_subworkload(Wc, sizes=(4, 5), cache=False)
    assert mech.lower_bound <= dense.loss * (1 + 1e-12)
    assert dense.lower_bound <= mech.loss * (1 + 1e-12)
    # explicit check of the Kron mechanism's loss and privacy cost
    B = explicit_strategy(mech)
    assert np.max(np.sum(B**2, axis=0)) == pytest.approx(1.0)
    loss = np.sum((Wc @ np.linalg.pinv(B)) ** 2)
    assert loss == pytest.approx(mech.loss, rel=1e-9)


def test_duality_gaps_and_reuse():
    dom = dm.Domain.from_sizes([6] * 5)
    wk = QueryWorkload.kway(dom, 1, "range") + QueryWorkload.pairs(dom, "affine") + QueryWorkload.kway(dom, 3, "prefix")
    p = plan_querysmasher(wk)
    for c in p.certificates():
        assert c["method"] in ("exact", "kron-optimal", "optimal")
        assert c["gap"] <= 1e-3
    # ∅, {i}, {i,j}, {i,j,k}: identical structure is solved once
    assert len(p.solutions) == 4
    assert len(p.residuals) == 1 + 5 + 10 + 10
    cert = p.certificate()
    assert cert["lower_bound"] <= cert["loss"] and cert["gap"] <= 1e-3


def test_api_surface():
    dom = dm.Domain({"a": 4, "b": 3})
    wk = dm.Workload.marginals(dom, 2, query_types={"a": "prefix"})
    p = dm.plan(wk, rho=0.5, planner="qs")
    assert p.pcost == pytest.approx(1.0) and p.rho == pytest.approx(0.5) and p.mu == pytest.approx(1.0)
    assert p.epsilon(1e-6) > 0
    d = p.to_dict()
    assert d["privacy"]["pcost"] == pytest.approx(1.0) and d["residuals"]
    assert len(p.table()) == len(p.residuals)
    with pytest.raises(dm.PlanError):
        dm.plan(wk, pcost=1, planner="nonsense")
    with pytest.raises(dm.PlanError):
        dm.plan(wk, pcost=1, planner="querysmasher", objective="max_var")
    # default planner unchanged
    assert type(dm.plan(wk, objective="sum_var", pcost=1)).__name__ == "Plan"


# -- paper numbers ---------------------------------------------------------------------------
def _hybrid(cat, num, k, upto=False):
    dom = dm.Domain.from_sizes(list(cat) + list(num))
    kinds = {f"a{i}": "prefix" for i in range(len(cat), len(cat) + len(num))}
    return QueryWorkload.kway(dom, k, kinds, upto=upto)


CPS = ([7, 4, 2], [50, 100])
ADULT = ([42, 16, 15, 9, 7, 6, 5, 2, 2], [100, 100, 100, 99, 85])
LOANS = ([51, 36, 15, 8, 6, 5, 4, 3], [101, 101, 101, 101])


def _check_paper(p, paper, digits=None):
    ours = p.rmse()
    cert = p.certificate()
    assert cert["gap"] <= 1e-3
    assert ours <= paper * 1.015
    if digits is not None:
        assert round(ours, digits) == pytest.approx(paper, abs=1e-9)
    return ours


@pytest.mark.parametrize("schema,k,upto,paper,digits", [
    (CPS, 1, False, 3.135, 3), (ADULT, 1, False, 5.047, 3), (LOANS, 1, False, 4.670, 3),
    (CPS, 2, False, 6.194, None), (CPS, 3, False, 7.903, None), (CPS, 3, True, 8.140, None),
    (ADULT, 2, False, 17.632, None), (ADULT, 3, False, 47.055, None), (ADULT, 3, True, 47.853, None),
    (LOANS, 2, False, 14.822, None), (LOANS, 3, False, 36.095, None), (LOANS, 3, True, 36.410, None),
])
def test_table2_qs(schema, k, upto, paper, digits):
    p = dm.plan(_hybrid(*schema, k, upto), pcost=1, planner="querysmasher")
    _check_paper(p, paper, digits)


@pytest.mark.parametrize("kind,paper", [("identity", 23.48), ("prefix", 33.70), ("range", 41.08),
                                        ("circular", 39.77), ("affine", 28.25), ("abs", 35.85)])
def test_table4_qs(kind, paper):
    dom = dm.Domain.from_sizes([10] * 40)
    if kind in ("affine", "abs"):
        wk = QueryWorkload.kway(dom, 1, "prefix") + QueryWorkload.pairs(dom, kind)
    else:
        wk = QueryWorkload.kway(dom, 1, kind) + QueryWorkload.kway(dom, 2, kind)
    p = plan_querysmasher(wk)
    digits = 2 if kind in ("identity", "circular", "range") else None
    _check_paper(p, paper, digits)


@pytest.mark.parametrize("d,paper", [(10, 20.41), (20, 51.63)])
def test_table5_qs(d, paper):
    dom = dm.Domain.from_sizes([10] * d)
    wk = QueryWorkload.kway(dom, 1, "range") + QueryWorkload.pairs(dom, "affine") + QueryWorkload.kway(dom, 3, "prefix")
    _check_paper(plan_querysmasher(wk), paper)


def test_zero_weight_queries_unanswerable_have_infinite_variance():
    dom = dm.Domain.from_sizes([3, 3])
    wk = QueryWorkload(dom).add_kron((0,), ["prefix"]).add_explicit((0, 1), affine_queries(3, 3), weight=0.0)
    p = plan_querysmasher(wk)
    assert np.all(np.isfinite(p.group_variance(0)))
    assert np.all(np.isinf(p.group_variance(1)))
    assert math.isinf(p.rmse())


def test_querysmasher_measure_dispatch_and_discrete_refusal():
    import numpy as np
    import pandas as pd

    import dpmatrix as dm

    dom = dm.Domain.from_sizes([3, 4])
    plan = dm.plan(dm.Workload.marginals(dom, 2, query_types={"a0": "prefix"}), pcost=1, planner="querysmasher")
    df = pd.DataFrame({"a0": [0, 1, 2, 2], "a1": [0, 3, 1, 2]})
    meas = dm.measure(plan, df, rng=np.random.default_rng(0))  # the module function dispatches
    assert np.all(np.isfinite(_est(meas, 0)))
    with pytest.raises(dm.PlanError, match="real-valued optimized strategy"):
        plan.measure(df, noise="discrete_gaussian")  # prefix queries: no integer form


def test_querysmasher_discrete_gaussian_on_marginal_spaces():
    """Plain-marginal residual spaces are ResidualPlanner's mechanism at σ²_RP = σ² Π κ_j:
    same privacy cost; measured exactly by Algorithm 3; privacy re-scored from the rational σ̄."""
    import math
    from fractions import Fraction

    import numpy as np
    import pandas as pd

    import dpmatrix as dm

    dom = dm.Domain.from_sizes([3, 4, 2])
    plan = dm.plan(dm.Workload.marginals(dom, 2, upto=True), pcost=0.8, planner="querysmasher")
    for S, res in plan.residuals.items():
        mech = plan.solutions[res.structure]
        kappa = mech.marginal_factors()
        assert kappa is not None
        rp_cost = math.prod((n - 1) / n for n in res.sizes) / (res.sigma2 * math.prod(kappa))
        assert mech.pcost / res.sigma2 == pytest.approx(rp_cost, rel=1e-9)
    rng = np.random.default_rng(3)
    df = pd.DataFrame({n: rng.integers(0, s, 600) for n, s in zip(dom.names, dom.sizes)})
    meas = plan.measure(df, noise="discrete_gaussian")
    assert (meas.noise, meas.randomness) == ("discrete_gaussian", "os_csprng")
    assert 0.8 / (1 + 1e-4) <= meas.plan.pcost <= 0.8
    # exact privacy of the integer mechanisms: Σ_S Π (n−1)/n / σ̄²_RP(S)
    exact = Fraction(0)
    for S, res in meas.plan.residuals.items():
        kappa = math.prod(meas.plan.solutions[res.structure].marginal_factors())
        sb2 = Fraction(res.sigma2) * Fraction(kappa)  # the float reported ≤ the rational used
        exact += Fraction(math.prod((n - 1) / n for n in res.sizes)) / sb2
    assert meas.plan.pcost == pytest.approx(float(exact), rel=1e-9)
    for i, g in enumerate(plan.workload.groups):
        if len(g.attrs) != 2:
            continue
        truth = df.groupby([dom.names[a] for a in g.attrs]).size().reindex(
            pd.MultiIndex.from_product([range(dom.sizes[a]) for a in g.attrs]), fill_value=0
        ).to_numpy()
        t = meas.workload_answer(i)
        est, std = t["estimate"].to_numpy(), t["std"].to_numpy()
        assert np.all(np.abs(est - truth) < 6 * std)
