"""Hierarchical (tree) strategies for prefix/range queries under pure ε-DP, against explicit
full-domain matrices built here (tree levels written out by hand, not by the code under test):
privacy (max column L1 norm of the budget-scaled strategy), exact GLS variances, the
estimator's covariance under the discrete noise, reconstruction, and the real sampler."""

import itertools
import math

import numpy as np
import pure_oracle as po
import pytest

from dpmatrix.domain import Domain
from dpmatrix.errors import PlanError
from dpmatrix.planners.pure import plan_pure
from dpmatrix.planners.pure.hierarchical import (
    best_tree,
    plan_hierarchical,
    tree_levels,
)
from dpmatrix.workload import Workload

SIZES = (16, 3, 5)


def _levels_by_hand(n, b):
    """Level ℓ: blocks of b^(L-ℓ) consecutive cells, L = ⌈log_b n⌉ (0 = total, L = cells)."""
    depth = math.ceil(math.log(n, b) - 1e-12) if n > 1 else 0
    out = []
    for lev in range(depth + 1):
        width = b ** (depth - lev)
        blocks = [list(range(s, min(s + width, n))) for s in range(0, n, width)]
        h = np.zeros((len(blocks), n))
        for r, blk in enumerate(blocks):
            h[r, blk] = 1
        out.append(h)
    return out


def _pinv(g):
    # the full-domain Gram is singular (it only sees the marginal) and optimized shares can be
    # ~1e-7 on some levels: cut the numerical null space explicitly (numpy's default rcond keeps
    # round-off eigenvalues of ~1e-16 here and returns a wrong pseudo-inverse)
    return np.linalg.pinv(g, rcond=1e-10)


def _prefix(n):
    return np.tril(np.ones((n, n)))


def _ranges(n):
    return np.array([[1.0 if a <= c <= b else 0.0 for c in range(n)]
                     for length in range(1, n + 1) for a in range(n - length + 1) for b in [a + length - 1]])


@pytest.fixture(scope="module")
def wl():
    dom = Domain.from_sizes(SIZES)
    return Workload(dom, [("a0",), ("a0", "a1"), ("a1", "a2")], weights=[1.0, 2.0, 0.5],
                    query_types={"a0": "prefix", "a2": "range"})


def _explicit(plan, j):
    """Full-domain blocks, their budgets and the query matrix of workload marginal j."""
    s = plan.workload.sets[j]
    lv = []
    for i, n in enumerate(SIZES):
        if i in s:
            t = plan.trees[j][s.index(i)]
            lv.append(_levels_by_hand(n, t.branching) if t.branching else [np.eye(n)])
        else:
            lv.append([np.ones((1, n))])
    blocks = [po.kron_all([lv[i][k] for i, k in enumerate(lev)])
              for lev in itertools.product(*[range(len(x)) for x in lv])]
    qmats = {"a0": _prefix(16), "a2": _ranges(5)}
    q = po.kron_all([(qmats.get(f"a{i}", np.eye(n)) if i in s else np.ones((1, n)))
                     for i, n in enumerate(SIZES)])
    return blocks, [float(b) for b in plan.budgets[j]], q


def test_tree_levels_by_hand():
    for n, b in [(8, 2), (5, 2), (10, 3), (7, 7), (9, 4)]:
        ours = tree_levels(n, b)
        hand = _levels_by_hand(n, b)
        assert len(ours) == len(hand)
        for h1, h2 in zip(ours, hand):
            np.testing.assert_array_equal(h1, h2)
            assert (h1.sum(axis=0) == 1).all()  # a partition: column L1 norm 1


def test_prefix_tree_beats_cells():
    # identity on 16 cells answers prefix c with c+1 noisy cells: Σ_c (c+1) = 136 (unit budget
    # and noise); the optimized tree must do better.
    t = best_tree(_prefix(16))
    assert t.branching >= 2
    assert t.factor < 136.0
    assert sum(t.shares) == pytest.approx(1.0)


def _plan(wl, eps, branching, **kw):
    if branching is None:
        p = plan_pure(wl, eps, **kw)  # auto: prefix on 16 cells picks a tree, ranges on 5 cells
        assert p.strategy == "hierarchical"
        assert p.trees[0][0].branching >= 2 and p.trees[2][1].branching == 0
        return p
    return plan_hierarchical(wl, eps, branching=branching, **kw)


@pytest.mark.parametrize("branching", [None, 2, 3])
@pytest.mark.parametrize("budgeting", ["optimal", "uniform"])
def test_privacy_explicit(wl, budgeting, branching):
    eps = 0.9
    p = _plan(wl, eps, branching, budgeting=budgeting)
    blocks, budgets = [], []
    for j in range(len(wl.sets)):
        b, e, _ = _explicit(p, j)
        blocks += b
        budgets += e
    priv = po.privacy(blocks, budgets)
    assert priv <= eps + 1e-12
    assert priv == pytest.approx(float(p.privacy_epsilon()), rel=1e-12)
    if budgeting == "uniform":
        # uniform: every group gets ε / Σ_A Π_i (L_i+1); the stack of one marginal has L1
        # sensitivity (levels product) × that budget
        n_groups = len(blocks)
        assert budgets == pytest.approx([eps / n_groups] * n_groups, rel=1e-5)
        if branching == 2:  # by hand: a0 (16 cells, binary) has 5 levels, a2 (5 cells) 4
            assert n_groups == 5 + 5 * 1 + 1 * 4


@pytest.mark.parametrize("branching", [None, 2, 3])
@pytest.mark.parametrize("model", ["continuous", "discrete"])
def test_variances_against_explicit(wl, model, branching):
    p = _plan(wl, 0.9, branching, variance_model=model)
    for j in range(len(wl.sets)):
        blocks, e, q = _explicit(p, j)
        ours = p.query_variance(j)
        if model == "continuous":
            # product-form budgets ⇒ our estimator is GLS: compare with the explicit GLS
            s = np.vstack(blocks)
            prec = np.concatenate([np.full(b.shape[0], x**2 / 2) for b, x in zip(blocks, e)])
            np.testing.assert_allclose(ours, np.diag(q @ _pinv(s.T @ (prec[:, None] * s)) @ q.T), rtol=1e-4)
        else:
            # estimator with weights ω ∝ ε_ℓ² (continuous precision), noise = exact discrete
            # Laplace variances (by pmf summation): explicit sandwich E diag(v) Eᵀ
            s = np.vstack(blocks)
            om = np.concatenate([np.full(b.shape[0], x**2) for b, x in zip(blocks, e)])
            v = np.concatenate([np.full(b.shape[0], po.dlap_var(x)) for b, x in zip(blocks, e)])
            est = _pinv(s.T @ (om[:, None] * s)) @ s.T * om
            cov = q @ est @ np.diag(v) @ est.T @ q.T
            np.testing.assert_allclose(ours, np.diag(cov), rtol=1e-4)


@pytest.mark.parametrize("branching", [None, 2])
def test_reconstruction_against_explicit(wl, branching):
    p = _plan(wl, 0.9, branching)
    rng = np.random.default_rng(3)
    rec = np.column_stack([rng.integers(0, n, 300) for n in SIZES])
    out = p.measure(rec, rng=rng)
    for j in range(len(wl.sets)):
        blocks, e, q = _explicit(p, j)
        s = np.vstack(blocks)
        om = np.concatenate([np.full(b.shape[0], x**2) for b, x in zip(blocks, e)])
        y = np.concatenate([np.asarray(t, float) for t in out[j]])
        expl = q @ _pinv(s.T @ (om[:, None] * s)) @ s.T @ (om * y)
        np.testing.assert_allclose(p.answer(out, j), expl, rtol=1e-6, atol=1e-6)


def test_monte_carlo_real_sampler():
    dom = Domain.from_sizes([8])
    wl = Workload(dom, [("a0",)], query_types={"a0": "prefix"})
    p = plan_hierarchical(wl, 0.5, branching=2)
    rng = np.random.default_rng(11)
    rec = rng.integers(0, 8, (200, 1))
    truth = np.cumsum(np.bincount(rec[:, 0], minlength=8))
    errs = np.array([p.answer(p.measure(rec, rng=rng), 0) - truth for _ in range(1500)])
    assert np.abs(errs.mean(axis=0)).max() < 4 * np.sqrt(p.query_variance(0).max() / 1500)
    ratio = (errs**2).mean(axis=0) / p.query_variance(0)
    assert ratio.mean() == pytest.approx(1.0, abs=0.08)


def test_bad_strategy_names(wl):
    with pytest.raises(PlanError, match="hierarchical"):
        plan_pure(wl, 1.0, strategy="marginals")
    plain = Workload(Domain.from_sizes([3, 3]), [("a0",), ("a0", "a1")])
    with pytest.raises(PlanError, match="prefix/range"):
        plan_pure(plain, 1.0, strategy="hierarchical")
