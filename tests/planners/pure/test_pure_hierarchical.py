"""Hierarchical (tree) and Haar strategies for prefix/range queries under pure ε-DP, against
explicit full-domain matrices built here (tree levels and Haar wavelets written out by hand, not
by the code under test): privacy (max column L1 norm of the budget-scaled strategy, and of the
maps actually released), exact GLS variances, the estimator's covariance under the discrete
noise, reconstruction through the one measurement path, and the real sampler."""

import itertools
import math

import numpy as np
import pandas as pd
import pure_oracle as po
import pytest

import dpmatrix as dm
from dpmatrix._domain import Domain
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._workload import Workload
from dpmatrix.errors import NotMeasuredError, PlanError
from dpmatrix.planners._dispatch import plan_from_dict
from dpmatrix.planners._pure import HierarchicalPlan, plan_hierarchical, plan_pure
from dpmatrix.planners._pure.levels import best_levels, haar_levels, tree_levels

SIZES = (16, 3, 5)


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
    """Full-domain blocks (one per level tuple, budgets' order), their budgets and the query
    matrix of workload marginal j, all built here."""
    s = plan.workload.sets[j]
    lv = [(po.levels_by_hand(plan.per_attribute[j][s.index(i)]) if i in s else [np.ones((1, n))])
          for i, n in enumerate(SIZES)]
    blocks = [po.kron_all([lv[i][k] for i, k in enumerate(lev)])
              for lev in itertools.product(*[range(len(x)) for x in lv])]
    qmats = {0: _prefix(16), 2: _ranges(5)}
    q = po.kron_all([(qmats.get(i, np.eye(n)) if i in s else np.ones((1, n))) for i, n in enumerate(SIZES)])
    return blocks, [float(b) for b in plan.budgets[j]], q


def _pinv(g):
    # the full-domain Gram is singular (it only sees the marginal) and optimized shares can be
    # small on some levels: cut the numerical null space explicitly (numpy's default rcond keeps
    # round-off eigenvalues of ~1e-16 here and returns a wrong pseudo-inverse)
    return np.linalg.pinv(g, rcond=1e-10)


def test_tree_levels_by_hand():
    for n, b in [(8, 2), (5, 2), (10, 3), (7, 7), (9, 4)]:
        ours = tree_levels(n, b)
        hand = po.tree_levels_by_hand(n, b)
        assert len(ours) == len(hand)
        for h1, h2 in zip(ours, hand):
            np.testing.assert_array_equal(h1, h2)
            assert (h1.sum(axis=0) == 1).all()  # a partition: column L1 norm 1


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 12, 16])
def test_haar_levels_by_hand(n):
    ours, hand = haar_levels(n), po.haar_levels_by_hand(n)
    assert len(ours) == len(hand)
    for h1, h2 in zip(ours, hand):
        assert h1.dtype.kind == "i"  # integer ±1 rows: exact discrete Laplace, no rescaling
        np.testing.assert_array_equal(h1, h2)
        assert np.abs(h1).sum(axis=0).max() == 1  # column L1 norm ≤ 1 on every level
    stack = np.vstack(ours)
    assert stack.shape == (n, n) and np.linalg.matrix_rank(stack) == n  # the Haar basis
    # the deepest cell has a ±1 on every level at once, so per-level budgets add up exactly
    assert np.abs(stack).sum(axis=0).max() == len(ours)
    # the same rows as the Gaussian strategy of dm.evaluate (linalg.strategies.haar), any order
    from dpmatrix._linalg.strategies import haar

    assert sorted(map(tuple, haar(n))) == sorted(map(tuple, stack.astype(float)))


def test_prefix_tree_beats_cells_and_haar_is_a_candidate():
    # identity on 16 cells answers prefix c with c+1 noisy cells: Σ_c (c+1) = 136 (unit budget
    # and noise); the optimized tree must do better
    t = best_levels(_prefix(16), kinds=("cells", "tree"))
    assert t.kind == "tree" and t.factor < 136.0 and sum(t.shares) == pytest.approx(1.0)
    h = best_levels(_prefix(16), kinds=("haar",))
    assert h.kind == "haar" and sum(h.shares) == pytest.approx(1.0)
    # optimized shares are never worse than equal shares (the optimizer starts there)
    hu = best_levels(_prefix(16), kinds=("haar",), shares="uniform")
    assert h.factor <= hu.factor * (1 + 1e-12)
    # the factor is tr(Q G⁻¹ Qᵀ)(Ση)² with G = Σ η² HᵀH, recomputed here from the hand levels
    for a in (t, h, hu):
        g = sum(e * e * (m.T @ m) for m, e in zip(po.levels_by_hand(a), a.shares))
        assert a.factor == pytest.approx(np.trace(_prefix(16) @ np.linalg.inv(g) @ _prefix(16).T), rel=1e-9)


def test_max_factor_is_the_largest_query_variance():
    r = _ranges(12)
    for kind in ("tree", "haar"):
        a = best_levels(r, kinds=(kind,), objective="max")
        g = sum(e * e * (m.T @ m) for m, e in zip(po.levels_by_hand(a), a.shares))
        assert a.factor == pytest.approx(np.diag(r @ np.linalg.inv(g) @ r.T).max(), rel=1e-9)
        # and minimizing the max does better on the max than the sum-optimal shares
        s = best_levels(r, kinds=(kind,), branchings=None if kind == "haar" else [a.branching])
        gs = sum(e * e * (m.T @ m) for m, e in zip(po.levels_by_hand(s), s.shares))
        assert a.factor <= np.diag(r @ np.linalg.inv(gs) @ r.T).max() * (1 + 1e-6)


STRATEGIES = ["hierarchical", "haar", "marginals", "auto"]


def _plan(wl, strategy, **kw):
    p = plan_hierarchical(wl, 0.9, strategy=strategy, **kw)
    assert isinstance(p, HierarchicalPlan)
    kinds = {t.kind for ts in p.per_attribute for t in ts}
    if strategy == "hierarchical":
        assert kinds == {"tree", "cells"}
    elif strategy == "haar":
        assert kinds == {"haar", "cells"}
    elif strategy == "marginals":
        assert kinds == {"cells"}
    return p


# "auto" plans the uniform variants itself (in its comparison): optimal budgets only
@pytest.mark.parametrize("strategy,budgeting", [(s, b) for s in STRATEGIES for b in ("optimal", "uniform")
                                                if (s, b) != ("auto", "uniform")])
@pytest.mark.parametrize("objective", ["sum", "max"])
def test_privacy_explicit(wl, strategy, budgeting, objective):
    eps = 0.9
    p = _plan(wl, strategy, budgeting=budgeting, objective=objective)
    blocks, budgets = [], []
    for j in range(len(wl.sets)):
        b, e, _ = _explicit(p, j)
        blocks += b
        budgets += e
    priv = po.privacy(blocks, budgets)
    assert priv <= eps + 1e-12
    assert priv == pytest.approx(float(p.privacy_epsilon()), rel=1e-12)
    assert p.pure_epsilon <= eps and p.rho == pytest.approx(p.pure_epsilon**2 / 2)
    if budgeting == "uniform":
        live = [e for e in budgets if e > 0]
        assert live == pytest.approx([eps / len(live)] * len(live), rel=1e-5)


@pytest.mark.parametrize("strategy", ["hierarchical", "haar"])
def test_privacy_of_the_released_maps(wl, strategy):
    """The mechanisms measured: run each map on a one-record table for every cell of the domain;
    the loss max_c Σ_j ε_j ‖L_j(e_c)‖₁ must be the plan's ε (integer outputs only)."""
    p = _plan(wl, strategy)
    _, mechs = p.mechanisms()
    worst = 0.0
    for cell in itertools.product(*(range(n) for n in SIZES)):
        loss = 0.0
        for m in mechs:
            assert m.family == "discrete_laplace"
            table = np.zeros(tuple(SIZES[a] for a in m.attrs), dtype=np.int64)
            table[tuple(cell[a] for a in m.attrs)] = 1
            out = m.signal(table)
            assert out.dtype.kind == "i"
            loss += float(m.scale) * float(np.abs(out).sum())
        worst = max(worst, loss)
    assert worst == pytest.approx(p.pure_epsilon, rel=1e-12) and worst <= 0.9
    with pytest.raises(PlanError, match="discrete Laplace"):
        p.mechanisms(noise="discrete_gaussian")


def _explicit_joint(plan, model="discrete"):
    """Every measured group of every marginal on the full domain: the stacked strategy ``S``, the
    linear estimator ``E = (Sᵀ W S)⁺ Sᵀ W`` with the continuous-model precision ``W = ε_g²`` of
    each group's budget, and the estimator's exact covariance ``E diag(v) Eᵀ`` (``v``: the
    discrete Laplace variance by pmf summation, or 2/ε_g²)."""
    blocks, om, var, keys = [], [], [], []
    for j in range(len(plan.workload.sets)):
        bl, e, _ = _explicit(plan, j)
        for lev, b, x in zip(plan.level_tuples(j), bl, e):
            if x > 0:
                blocks.append(b)
                keys.append((j, lev))
                om.append(np.full(b.shape[0], x**2))
                var.append(np.full(b.shape[0], 2 / x**2 if model == "continuous" else po.dlap_var(x)))
    s, om, var = np.vstack(blocks), np.concatenate(om), np.concatenate(var)
    est = _pinv(s.T @ (om[:, None] * s)) @ s.T * om
    return blocks, keys, est, est @ np.diag(var) @ est.T, om


@pytest.mark.parametrize("strategy", ["hierarchical", "haar", "auto"])
@pytest.mark.parametrize("model", ["continuous", "discrete"])
def test_variances_against_explicit(wl, strategy, model):
    """Every workload query's variance is that of the joint estimator over all the groups of all
    the marginals; in the continuous model (2/ε²) that estimator is the GLS, so its covariance is
    also 2 Q (Sᵀ diag(ε_g²) S)⁺ Qᵀ."""
    p = _plan(wl, strategy, variance_model=model)
    blocks, _, _, cov_x, om = _explicit_joint(p, model)
    s = np.vstack(blocks)
    for j in range(len(wl.sets)):
        _, _, q = _explicit(p, j)
        ours = p.entry_variance(j).reshape(-1)
        np.testing.assert_allclose(ours, np.diag(q @ cov_x @ q.T), rtol=1e-5)
        if model == "continuous":
            np.testing.assert_allclose(ours, np.diag(q @ _pinv(s.T @ (om[:, None] / 2 * s)) @ q.T), rtol=1e-5)
    # totals as defined: Σ_A w_A Σ_q Var, the largest query variance, the query RMSE
    ev = [p.entry_variance(j) for j in range(len(wl.sets))]
    assert p.total_variance() == pytest.approx(sum(w * v.sum() for w, v in zip(wl.weights, ev)))
    assert p.max_variance() == pytest.approx(max(v.max() for v in ev))
    assert p.rmse() == pytest.approx(math.sqrt(sum(v.sum() for v in ev) / sum(v.size for v in ev)))


def test_cell_and_query_variances_and_covariance(wl):
    p = _plan(wl, "hierarchical")
    _, _, _, cov_x, _ = _explicit_joint(p)
    for key in (("a0", "a1"), ("a1",), ("a1", "a2"), ()):
        qk = po.marginal_matrix(SIZES, p.domain.resolve(key))
        np.testing.assert_allclose(p.covariance(key), qk @ cov_x @ qk.T, rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(p.variance(key).reshape(-1), np.diag(qk @ cov_x @ qk.T), rtol=1e-5)
    assert p.query_variance("a0").shape == (16,)
    assert p.query_variance(("a1", "a2")).shape == (3, 15)
    # a2 alone: only inside (a1, a2); a marginal inside no measured one is refused
    assert p.variance("a2").shape == (5,)
    with pytest.raises(NotMeasuredError, match="not inside a measured marginal"):
        p.variance(("a0", "a2"))


@pytest.mark.parametrize("strategy", ["hierarchical", "haar"])
def test_reconstruction_against_explicit(wl, strategy):
    """Through dm.measure: the estimator's answers equal the explicit joint weighted least squares
    on the noisy outputs the measurement released, and are consistent across marginals."""
    p = _plan(wl, strategy)
    rng = np.random.default_rng(3)
    rec = np.column_stack([rng.integers(0, n, 300) for n in SIZES])
    with pytest.warns(InsecureRandomnessWarning):
        meas = p.measure(rec, rng=rng)
    assert meas.noise == "discrete_laplace" and meas.randomness == "seeded_insecure"
    x = np.zeros(SIZES)
    np.add.at(x, tuple(rec.T), 1)
    blocks, keys, est, cov_x, _ = _explicit_joint(p)
    assert set(keys) == set(meas.noisy)
    y = np.concatenate([np.asarray(meas.noisy[k], float).reshape(-1) for k in keys])
    assert all(np.asarray(meas.noisy[k]).dtype.kind == "i" for k in meas.noisy)
    # the released numbers are the exact level counts plus integer noise
    exact = np.vstack(blocks) @ x.reshape(-1)
    assert np.all(np.abs(y - exact) == np.round(np.abs(y - exact)))
    xhat = est @ y
    for j in range(len(wl.sets)):
        _, _, q = _explicit(p, j)
        ans = meas.answer(wl.names(j))
        np.testing.assert_allclose(ans["estimate"].to_numpy(), q @ xhat, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ans["variance"].to_numpy(), p.entry_variance(j).reshape(-1))
    # any linear query on a marginal's cells
    qv = np.arange(16.0)
    a = meas.query_vector("a0", qv)
    row = qv @ po.marginal_matrix(SIZES, (0,))
    assert a.variance == pytest.approx(float(row @ cov_x @ row), rel=1e-5)
    assert a.estimate == pytest.approx(float(row @ xhat), rel=1e-6, abs=1e-6)
    # consistent: a0 from (a0,) equals (a0, a1) summed over a1; a1 from both 2-way marginals
    np.testing.assert_allclose(meas.estimate("a0"), meas.estimate(("a0", "a1")).sum(axis=1), atol=1e-9)
    np.testing.assert_allclose(meas.estimate(("a0", "a1")).sum(axis=0), meas.estimate(("a1", "a2")).sum(axis=1),
                               atol=1e-9)
    np.testing.assert_allclose(meas.estimate("a1"), meas.estimate(("a1", "a2")).sum(axis=1), atol=1e-9)


@pytest.mark.parametrize("strategy", ["hierarchical", "haar"])
def test_monte_carlo_real_sampler(strategy):
    """Unbiased answers with the plan's exact variances, by simulation with the real discrete
    Laplace sampler (seeded byte source) through plan.measure; truth counted by numpy."""
    dom = Domain.from_sizes([8])
    wl = Workload(dom, [("a0",)], query_types={"a0": "prefix"})
    p = plan_hierarchical(wl, 0.5, strategy=strategy)
    gen = np.random.default_rng(11)
    rec = gen.integers(0, 8, (200, 1))
    truth = np.cumsum(np.bincount(rec[:, 0], minlength=8))
    reps = 1500
    with pytest.warns(InsecureRandomnessWarning):
        errs = np.array([p.measure(rec, rng=gen).answer("a0")["estimate"].to_numpy() - truth for _ in range(reps)])
    po.assert_mean_and_variance(errs, p.entry_variance(0))


def test_auto_keeps_the_best_and_reports_the_comparison(wl):
    for objective, key in (("sum", "total_variance"), ("max", "max_variance")):
        p = plan_pure(wl, 1.0, objective=objective)
        rows = {(r["strategy"], r["budgeting"]): r for r in p.comparison}
        assert {("marginals", "optimal"), ("hierarchical", "optimal"), ("haar", "optimal"),
                ("hierarchical", "uniform"), ("haar", "uniform"), ("per-attribute best", "optimal"),
                ("fourier", "optimal"), ("clustering", "optimal"), ("optimized", "optimized")} <= set(rows)
        best = min(r[key] for r in rows.values())
        got = p.total_variance() if key == "total_variance" else p.max_variance()
        assert got == pytest.approx(best, rel=1e-12)
        for name in ("hierarchical", "haar", "marginals"):  # each planned alone: the same numbers
            alone = plan_pure(wl, 1.0, strategy=name, objective=objective)
            assert rows[(name, "optimal")][key] == pytest.approx(getattr(alone, key)(), rel=1e-12)
            assert got <= getattr(alone, key)() * (1 + 1e-9)


def test_one_attribute_prefix_numbers():
    """Prefixes on 16 cells, ε = 1, continuous model (the sum objective): the per-attribute
    factor gives the total in closed form, 2 F / ε² (one marginal of weight 1), checked against
    the explicit GLS, and the tree beats plain cells (2 · 136)."""
    wl = Workload(Domain.from_sizes([16]), [("a0",)], query_types={"a0": "prefix"})
    for strategy in ("hierarchical", "haar"):
        p = plan_pure(wl, 1.0, strategy=strategy, objective="sum", variance_model="continuous")
        t = p.per_attribute[0][0]
        assert p.total_variance() == pytest.approx(2 * t.factor, rel=1e-5)
        blocks = po.levels_by_hand(t)
        prec = np.concatenate([np.full(b.shape[0], float(e) ** 2 / 2) for b, e in zip(blocks, p.budgets[0])])
        s = np.vstack(blocks)
        assert p.total_variance() == pytest.approx(np.trace(_prefix(16) @ np.linalg.pinv(s.T @ (prec[:, None] * s))
                                                            @ _prefix(16).T), rel=1e-5)
    assert plan_pure(wl, 1.0, strategy="hierarchical", objective="sum",
                     variance_model="continuous").total_variance() < 2 * 136


def test_round_trip_and_errors(wl, tmp_path):
    p = plan_pure(wl, 1.0, strategy="haar")
    q = HierarchicalPlan.from_dict(p.to_dict())
    assert q.budgets == p.budgets and q.per_attribute == p.per_attribute
    assert q.total_variance() == pytest.approx(p.total_variance())
    assert isinstance(plan_from_dict(p.to_dict()), HierarchicalPlan)
    bad = p.to_dict()
    bad["epsilon"] = 0.5
    with pytest.raises(PlanError, match="more than its epsilon"):
        HierarchicalPlan.from_dict(bad)
    with pytest.raises(PlanError, match="unknown strategy"):
        plan_pure(wl, 1.0, strategy="wavelet")
    plain = Workload(Domain.from_sizes([3, 3]), [("a0",), ("a0", "a1")])
    for name in ("hierarchical", "haar"):
        with pytest.raises(PlanError, match="prefix/range"):
            plan_pure(plain, 1.0, strategy=name)
    with pytest.raises(PlanError, match="branching"):
        plan_hierarchical(wl, 1.0, strategy="haar", branching=2)
    # a zero-weight marginal is not measured: asking for its variances is a typed error
    z = Workload(wl.domain, [("a0",), ("a1", "a2")], weights=[1.0, 0.0], query_types={"a0": "prefix", "a2": "range"})
    pz = plan_pure(z, 1.0, strategy="hierarchical")
    assert not pz.measured(1) and all(b == 0 for b in pz.budgets[1])
    with pytest.raises(NotMeasuredError):
        pz.query_variance(("a1", "a2"))


def test_release_round_trip(tmp_path):
    dom = dm.Domain.from_dict({"age": {"bins": [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]},
                               "sex": {"labels": ["F", "M"]}})
    wk = dm.Workload(dom, [("age", "sex"), ("age",)], query_types={"age": "prefix"})
    p = dm.plan(wk, epsilon=1.0, delta=0, strategy="haar")
    g = np.random.default_rng(0)
    df = pd.DataFrame({"age": g.integers(0, 100, 300), "sex": g.choice(["F", "M"], 300)})
    meas = p.measure(df)  # OS CSPRNG by default
    assert meas.randomness == "os_csprng"
    out = dm.write_release(meas, tmp_path / "rel")
    rel = dm.load_release(out)
    assert isinstance(rel.plan, HierarchicalPlan) and rel.plan.budgets == p.budgets
    assert rel.privacy["pure_epsilon"] == pytest.approx(p.pure_epsilon) and rel.privacy["delta"] == 0.0
    for names in (("age", "sex"), ("age",)):
        np.testing.assert_allclose(rel.marginal(names)["estimate"], meas.answer(names)["estimate"], atol=1e-9)
        np.testing.assert_allclose(rel.table(names)["estimate"], meas.answer(names)["estimate"], atol=1e-9)
    assert list(rel.table("age")["age"])[:2] == ["< 10", "< 20"]
    assert "pure ε-DP" in rel.report(tmp_path / "r.html").read_text()


@pytest.mark.parametrize("kind", ["prefix", "range", None])  # None: a general (non-interval) matrix
@pytest.mark.parametrize("objective,p", [("sum", None), ("max", 16.0), ("max", None)])
def test_factor_and_gradient(kind, objective, p):
    """The factor (sum / max / p-norm of the query variances, times (Ση)²) against dense numpy on
    the hand-built levels, and its analytic gradient against finite differences."""
    from dpmatrix.planners._pure.levels import _Factor

    n = 9  # levels of the ternary tree: total, thirds, cells
    q = _prefix(n) if kind == "prefix" else _ranges(n) if kind == "range" else \
        np.random.default_rng(1).integers(-1, 2, (7, n)).astype(float) + np.eye(7, n)
    levels = po.tree_levels_by_hand(n, 3)
    fac = _Factor(q, [h.T @ h for h in levels], objective)
    assert (fac.intervals is None) == (kind is None)
    eta = np.array([0.2, 0.5, 0.9])
    g = sum(e * e * h.T @ h for h, e in zip(levels, eta))
    d = np.diag(q @ np.linalg.inv(g) @ q.T)
    want = d.sum() if objective == "sum" else d.max() if p is None else (d**p).sum() ** (1 / p)
    v, grad = fac.value_grad(eta, p)
    assert v == pytest.approx(want * eta.sum() ** 2, rel=1e-10)
    if objective == "sum" or p is not None:
        h = 1e-6
        num = [(fac.value(eta + h * e, p) - fac.value(eta - h * e, p)) / (2 * h) for e in np.eye(3)]
        np.testing.assert_allclose(grad, num, rtol=1e-5)


def test_quadratic_diagonal_of_intervals():
    """diag(Q M Qᵀ) from prefix sums for rows that are intervals in any order (cells, totals,
    prefixes, ranges) equals the dense product; other rows are recognised as not intervals."""
    from dpmatrix.planners._pure.levels import interval_rows, quadratic_diagonal

    gen = np.random.default_rng(7)
    n = 11
    q = np.vstack([_ranges(n), np.eye(n), np.ones((1, n))])[gen.permutation(n * (n + 1) // 2 + n + 1)]
    a = gen.normal(size=(n, n))
    m = a @ a.T
    assert interval_rows(q) is not None
    np.testing.assert_allclose(quadratic_diagonal(q, m), np.diag(q @ m @ q.T), rtol=1e-10)
    for bad in (np.array([[1.0, 0.0, 1.0]]), np.array([[2.0, 2.0, 0.0]]), np.array([[0.0, 0.0, 0.0]])):
        assert interval_rows(bad) is None
