"""The (ε, δ) variant of the datacubes budgeting (Cormode et al. §3.1, Corollary 3.3): the
square-root rule for Gaussian noise per group, derived in
:mod:`dpmatrix.planners._pure.gaussian_variant`, checked against a brute-force convex solve with one
precision per row and one constraint per column on an explicit small domain; the GLS variances
against (SᵀΣ⁻¹S)⁺; and the user-facing decision: ResidualPlanner (what dm.plan uses with δ > 0) is
never worse than these strategies."""

import cvxpy as cp
import numpy as np
import pure_oracle as po
import pytest

import dpmatrix as dm
from dpmatrix.planners._pure import plan_datacube_gaussian
from dpmatrix.planners._pure import strategies as st

SIZES = (3, 2, 2)
SETS = [(0, 1), (1, 2), (2,)]
DOM = dm.Domain.from_sizes(SIZES)


def _blocks(strategy):
    return [po.marginal_matrix(SIZES, g.attrs) if g.kind == "marginal" else po.residual_matrix(SIZES, g.attrs)
            for g in strategy.groups]


@pytest.mark.parametrize("name", ["marginals", "fourier", "identity", "clustering"])
def test_square_root_rule_against_brute_force(name):
    """min Σ_r b_r/u_r s.t. Σ_r S_rc² u_r ≤ P for every column c (u_r = 1/σ_r², one per row):
    the solver's optimum equals (Σ_g √(s_g c_g))²/P and its precisions are the closed form's."""
    w = np.array([1.0, 2.0, 0.5])
    s = getattr(st, name)(SIZES, SETS, w)
    blocks = _blocks(s)
    pcost = 0.7
    b_rows = np.concatenate([np.full(b.shape[0], x / b.shape[0]) for b, x in zip(blocks, s.direct_weight)])
    S2 = np.vstack(blocks) ** 2
    u = cp.Variable(S2.shape[0], pos=True)
    prob = cp.Problem(cp.Minimize(b_rows @ cp.inv_pos(u)), [S2.T @ u <= pcost])
    prob.solve(solver="CLARABEL")
    c = np.array([(b**2).sum(axis=0).max() for b in blocks])  # column squared L2 norm, by hand
    closed = np.sqrt(s.direct_weight * c).sum() ** 2 / pcost
    assert prob.value == pytest.approx(closed, rel=1e-5)
    p = plan_datacube_gaussian(dm.Workload(DOM, [tuple(f"a{i}" for i in t) for t in SETS], weights=w),
                               pcost=pcost, strategy=name)
    assert p.direct_objective == pytest.approx(closed, rel=1e-12)
    per_row = np.concatenate([np.full(b.shape[0], 1 / v) for b, v in zip(_blocks(s), p.sigma2)]) \
        if len(p.groups) == len(s.groups) else None
    if per_row is not None:
        np.testing.assert_allclose(u.value, per_row, rtol=1e-3)
    # privacy: the largest diagonal of SᵀΣ⁻¹S is the privacy cost asked
    kept = [po.marginal_matrix(SIZES, g.attrs) if g.kind == "marginal" else po.residual_matrix(SIZES, g.attrs)
            for g in p.groups]
    prec = np.concatenate([np.full(b.shape[0], 1 / v) for b, v in zip(kept, p.sigma2)])
    sv = np.vstack(kept)
    assert np.diag(sv.T @ (prec[:, None] * sv)).max() == pytest.approx(pcost, rel=1e-12)
    assert p.spent_pcost == pytest.approx(pcost, rel=1e-12)
    # GLS variances: (SᵀΣ⁻¹S)⁺, cell by cell, never above the direct recovery's objective
    tot = 0.0
    for t, wt in zip(SETS, w):
        cov = po.gls_cov(kept, list(p.sigma2), po.marginal_matrix(SIZES, t))
        assert p.cell_variance([f"a{i}" for i in t]) == pytest.approx(np.diag(cov).mean(), rel=1e-9)
        tot += wt * np.trace(cov)
    assert p.total_variance() == pytest.approx(tot, rel=1e-9)
    assert p.total_variance() <= p.direct_objective * (1 + 1e-9)
    # and equal noise for every group is never better on the objective the rule minimizes
    uni = plan_datacube_gaussian(p.workload, pcost=pcost, strategy=name, budgeting="uniform")
    assert uni.direct_objective >= p.direct_objective * (1 - 1e-12)


def test_figure1_square_root_numbers():
    """Figure 1 (A, B, C binary; marginals A and AB; S = Q): s = (2, 4) (cells × weight), c = 1,
    so σ_A² ∝ 1/√2, σ_AB² ∝ 1/2 ... objective (√2 + 2)²/P, by hand."""
    wk = dm.Workload(dm.Domain({"A": 2, "B": 2, "C": 2}), [("A",), ("A", "B")])
    p = plan_datacube_gaussian(wk, pcost=2.0)
    assert p.direct_objective == pytest.approx((np.sqrt(2) + 2) ** 2 / 2)
    # u_g = P √(s_g/c_g) / Σ √(s c): u_A = 2√2/(√2+2), u_AB = 4/(√2+2)
    np.testing.assert_allclose(1 / p.sigma2, [2 * np.sqrt(2) / (np.sqrt(2) + 2), 4 / (np.sqrt(2) + 2)])


@pytest.mark.parametrize("name", ["identity", "marginals", "fourier", "clustering"])
def test_residual_planner_is_never_worse(name):
    """What dm.plan does with δ > 0: ResidualPlanner, optimal among Gaussian mechanisms for the sum
    of variances, so never above a datacubes strategy with optimal (square-root) budgets."""
    wk = dm.Workload(DOM, [("a0", "a1"), ("a1", "a2"), ("a2",)])
    pcost = dm.Budget.approx(1.0, 1e-9).pcost
    rp = dm.plan(wk, pcost=pcost, objective="sum_var")
    dc = plan_datacube_gaussian(wk, pcost=pcost, strategy=name)
    assert rp.total_variance() <= dc.total_variance() * (1 + 1e-9)
    with pytest.raises(dm.PlanError, match="plan_datacube_gaussian"):
        dm.plan(wk, epsilon=1.0, delta=1e-9, strategy=name)


def test_fourier_with_the_square_root_rule_is_residual_planner():
    """The pairwise-difference (Fourier) blocks have Gram n I - J on each residual subspace, like
    ResidualPlanner's residual mechanisms, and the square-root rule is ResidualPlanner's closed
    form for the sum of variances: the two totals coincide (an independent check of both)."""
    wk = dm.Workload(dm.Domain.from_sizes((3, 2, 4, 2)), [("a0", "a1"), ("a1", "a2"), ("a2", "a3"), ("a0",)],
                     weights=[1.0, 2.0, 0.5, 3.0])
    for pcost in (0.1, 2.0):
        rp = dm.plan(wk, pcost=pcost, objective="sum_var")
        dc = plan_datacube_gaussian(wk, pcost=pcost, strategy="fourier")
        weighted = sum(w * rp.variance(wk.names(i)).sum() for i, w in enumerate(wk.weights))
        assert dc.total_variance() == pytest.approx(weighted, rel=1e-9)
