"""The joint GLS of the tree / Haar (level-strategy) pure ε-DP plans, against brute force.

On small explicit domains (sizes 3, 4, 5 with uneven binary trees — blocks 2+1, 4+1, 2+2+1 — and
Haar wavelets with uneven halves, plus an attribute outside the workload) everything is rebuilt
here from the definitions: the level rows by hand, the full-domain strategy of every measured
group, the estimator ``x̂ = (Sᵀ W S)⁺ Sᵀ W y`` with the continuous-model precision
``W = ε_g²`` of each group's budget, its exact covariance ``E diag(v) Eᵀ`` under the discrete
Laplace variances ``v`` (pmf summation), and the privacy as the max column L1 norm of the
budget-scaled strategy. Checked: the same estimates for the same noisy outputs, the exact
variances / covariances of cells, workload queries and arbitrary query vectors, consistency of
the common sub-marginals of overlapping workload marginals, privacy, a simulation with the real
sampler, and that in the continuous model no query is worse than from its own marginal's groups.
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pure_oracle as po
import pytest

from dpmatrix._domain import Domain
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._workload import Workload
from dpmatrix.errors import NotMeasuredError, PlanError
from dpmatrix.planners._pure import HierarchicalPlan, plan_hierarchical

SIZES = (3, 4, 5, 2)  # a3 is in no marginal


def _prefix(n):
    return np.tril(np.ones((n, n)))


def _ranges(n):
    return np.array([[1.0 if a <= c <= b else 0.0 for c in range(n)] for a in range(n) for b in range(a, n)])


QUERIES = {"identity": np.eye, "prefix": _prefix, "range": _ranges}


def _workloads():
    dom = Domain.from_sizes(SIZES)
    return {
        "two overlapping": Workload(dom, [("a0", "a1"), ("a1", "a2")], query_types={"a0": "prefix", "a2": "range"}),
        "three overlapping": Workload(dom, [("a0", "a1"), ("a1", "a2"), ("a0", "a2")], weights=[1.0, 2.0, 0.5],
                                      query_types={"a0": "range", "a1": "prefix", "a2": "prefix"}),
        "nested and 1-way": Workload(dom, [("a0",), ("a0", "a1"), ("a2",), ("a1", "a2")], weights=[3.0, 1.0, 1.0, 0.5],
                                     query_types={"a0": "prefix", "a1": "range", "a2": "prefix"}),
    }


PLANS = [("hierarchical", {"branching": 2, "budgeting": "uniform"}), ("hierarchical", {}),
         ("haar", {"budgeting": "uniform"}), ("haar", {})]


def _explicit(plan, model="discrete"):
    """Full-domain blocks of every measured group, the estimator, its covariance, the budgets.

    Weights: the estimator's declared continuous-model precisions ``ε_A² Π_i η_{i,ℓ_i}²``
    (``ε_A`` the budget the marginal's groups spend, ``η`` the level shares); they equal the
    groups' ``ε_g²`` up to the rounding of the budgets to dyadic rationals (≥ 20 bits)."""
    wl, sizes = plan.workload, plan.domain.sizes
    blocks, keys, budgets, om, var = [], [], [], [], []
    for j, s in enumerate(wl.sets):
        ts = plan.per_attribute[j]
        hand = {a: po.levels_by_hand(t) for a, t in zip(s, ts)}
        eps_a = float(sum(plan.budgets[j]))
        for lev, b in zip(plan.level_tuples(j), plan.budgets[j]):
            if b == 0:
                continue
            e = float(b)
            mats = [hand[i][lev[s.index(i)]] if i in s else np.ones((1, n)) for i, n in enumerate(sizes)]
            blk = po.kron_all(mats)
            blocks.append(blk)
            keys.append((j, lev))
            budgets.append(e)
            w = eps_a**2 * math.prod(t.shares[k] ** 2 for t, k in zip(ts, lev))
            assert w == pytest.approx(e**2, rel=1e-5)
            om.append(np.full(blk.shape[0], w))
            var.append(np.full(blk.shape[0], 2 / e**2 if model == "continuous" else po.dlap_var(e)))
    s, om, var = np.vstack(blocks), np.concatenate(om), np.concatenate(var)
    est = np.linalg.pinv(s.T @ (om[:, None] * s), rcond=1e-10) @ s.T * om
    return blocks, keys, budgets, est, est @ np.diag(var) @ est.T


def _query(plan, j):
    wl = plan.workload
    s = wl.sets[j]
    return po.kron_all([np.asarray(wl.query_matrix(i, wl.types(j)[s.index(i)]), float) if i in s
                        else np.ones((1, n)) for i, n in enumerate(plan.domain.sizes)])


def _cases():
    for wname in _workloads():
        for strategy, kw in PLANS:
            yield pytest.param((wname, strategy, kw), id=f"{wname}-{strategy}-{kw.get('budgeting', 'optimal')}")


@pytest.fixture(scope="module", params=list(_cases()))
def case(request):
    wname, strategy, kw = request.param
    plan = plan_hierarchical(_workloads()[wname], 0.8, strategy=strategy, **kw)
    return plan, _explicit(plan)


@pytest.mark.parametrize("wname", list(_workloads()))
def test_instances_are_uneven_and_multi_level(wname):
    """Not vacuous: the uniform binary trees and the Haar plans measure ≥ 2 levels of an attribute
    of 3 or 5 cells (uneven blocks / halves); the optimized trees of such small attributes keep
    the cells only (a pruned level with share 0: the zero-budget path)."""
    for strategy, kw in PLANS:
        plan = plan_hierarchical(_workloads()[wname], 0.8, strategy=strategy, **kw)
        levels = [t for ts in plan.per_attribute for t in ts if t.n in (3, 5)]
        if strategy == "haar" or kw:
            assert any(sum(x > 0 for x in t.shares) >= 2 for t in levels)
        else:
            assert any(0.0 in t.shares for t in levels)


def test_privacy_unchanged(case):
    plan, (blocks, _, budgets, _, _) = case
    priv = po.privacy(blocks, budgets)
    assert priv == pytest.approx(float(plan.privacy_epsilon()), rel=1e-12) and priv <= 0.8 + 1e-12


def test_estimates_for_the_same_outputs(case):
    plan, (blocks, keys, _, est, _) = case
    rng = np.random.default_rng(5)
    ys = [rng.normal(scale=20, size=b.shape[0]) for b in blocks]
    xhat = est @ np.concatenate(ys)
    e = plan.estimator(dict(zip(keys, ys)))
    for k in range(len(SIZES)):
        for key in itertools.combinations(range(3), k):
            if not plan.answerable(key):
                continue
            np.testing.assert_allclose(e.estimate(key).reshape(-1), po.marginal_matrix(SIZES, key) @ xhat,
                                       rtol=1e-6, atol=1e-6)
    for j in range(len(plan.workload)):
        np.testing.assert_allclose(e.entry(j).estimate.reshape(-1), _query(plan, j) @ xhat, rtol=1e-6, atol=1e-6)
    # a vector query on a 2-way table
    key = plan.workload.sets[-1]
    q = rng.normal(size=tuple(SIZES[i] for i in key))
    row = q.reshape(-1) @ po.marginal_matrix(SIZES, key)
    assert e.query_vector(key, q)[0] == pytest.approx(float(row @ xhat), rel=1e-6, abs=1e-6)


def test_exact_variances_and_covariances(case):
    plan, (_, _, _, _, cov) = case
    for j in range(len(plan.workload)):
        q = _query(plan, j)
        np.testing.assert_allclose(plan.entry_variance(j).reshape(-1), np.diag(q @ cov @ q.T), rtol=1e-5)
    rng = np.random.default_rng(1)
    for k in range(3):
        for key in itertools.combinations(range(3), k):
            if not plan.answerable(key):
                with pytest.raises(NotMeasuredError):
                    plan.variance(key)
                continue
            m = po.marginal_matrix(SIZES, key)
            np.testing.assert_allclose(plan.covariance(key), m @ cov @ m.T, rtol=1e-5, atol=1e-9)
            np.testing.assert_allclose(plan.variance(key).reshape(-1), np.diag(m @ cov @ m.T), rtol=1e-5)
            q = rng.normal(size=m.shape[0])
            assert plan.lifted_variance(key, q.reshape(tuple(SIZES[i] for i in key))) == pytest.approx(
                float(q @ m @ cov @ m.T @ q), rel=1e-5)


def test_consistent_across_marginals(case):
    """The common sub-marginal of every two workload marginals is the same from both (and is the
    estimate of that sub-marginal), for any noisy outputs."""
    plan, (blocks, keys, _, _, _) = case
    rng = np.random.default_rng(9)
    e = plan.estimator({k: rng.integers(-30, 30, b.shape[0]) for k, b in zip(keys, blocks)})
    sets = plan.workload.sets
    checked = 0
    for a, b in itertools.combinations(sets, 2):
        common = tuple(i for i in a if i in b)
        from_a = e.estimate(a).sum(axis=tuple(x for x, i in enumerate(a) if i not in common))
        from_b = e.estimate(b).sum(axis=tuple(x for x, i in enumerate(b) if i not in common))
        np.testing.assert_allclose(from_a, from_b, atol=1e-9)
        np.testing.assert_allclose(from_a, e.estimate(common), atol=1e-9)
        checked += bool(common)
    assert checked >= 1


@pytest.mark.parametrize("wname", list(_workloads()))
@pytest.mark.parametrize("strategy", ["hierarchical", "haar"])
@pytest.mark.parametrize("budgeting,objective", [("uniform", "sum"), ("optimal", "max")])
def test_never_worse_than_own_groups_in_the_continuous_model(wname, strategy, budgeting, objective):
    """The joint GLS uses more data: with 2/ε² noise and the same budgets no workload query's
    variance exceeds the GLS from its own marginal's groups alone (the previous estimator),
    computed explicitly here. (Budgets every marginal keeps: uniform, or the closed form of the
    max objective; the sum objective may move a marginal's budget to the others.)"""
    plan = plan_hierarchical(_workloads()[wname], 0.8, strategy=strategy, variance_model="continuous",
                             budgeting=budgeting, objective=objective)
    assert all(plan.measured(j) for j in range(len(plan.workload)))
    blocks, keys, budgets, _, _ = _explicit(plan, "continuous")
    improved = False
    for j in range(len(plan.workload)):
        own = [k for k, key in enumerate(keys) if key[0] == j]
        s = np.vstack([blocks[k] for k in own])
        prec = np.concatenate([np.full(blocks[k].shape[0], budgets[k] ** 2 / 2) for k in own])
        q = _query(plan, j)
        alone = np.diag(q @ np.linalg.pinv(s.T @ (prec[:, None] * s), rcond=1e-10) @ q.T)
        joint = plan.entry_variance(j).reshape(-1)
        assert np.all(joint <= alone * (1 + 1e-9))
        improved |= bool(np.any(joint < alone * (1 - 1e-3)))
    assert improved


def _closed_form_plan(plan):
    """The same level strategies with the per-marginal closed-form budgets, built here: the
    cube-root rule (Corollary 3.3, unit sensitivities) ε_A ∝ (w_A Π_i F_i)^{1/3}, level budgets
    ε_A Π η, rounded down to 30 bits."""
    wl = plan.workload
    s = np.array([w * math.prod(t.factor for t in ts) for w, ts in zip(wl.weights, plan.per_attribute)])
    eps_a = plan.epsilon * np.cbrt(s) / np.cbrt(s).sum()
    budgets = tuple(tuple(Fraction(math.floor(e * math.prod(t.shares[k] for t, k in zip(ts, lev)) * 2**30), 2**30)
                          for lev in itertools.product(*[range(len(t.shares)) for t in ts]))
                    for e, ts in zip(eps_a, plan.per_attribute))
    return HierarchicalPlan(domain=plan.domain, workload=wl, epsilon=plan.epsilon, per_attribute=plan.per_attribute,
                            budgets=budgets, variance_model=plan.variance_model)


@pytest.mark.parametrize("wname", list(_workloads()))
@pytest.mark.parametrize("strategy", ["hierarchical", "haar"])
@pytest.mark.parametrize("model", ["continuous", "discrete"])
def test_joint_budget_split(wname, strategy, model):
    """objective="sum": the marginals' budgets are re-split for the joint GLS when that lowers the
    exact weighted total variance; never worse than the closed-form split (both evaluated here by
    the explicit estimator), privacy still exact, and on the nested workload the 1-way marginal
    inside a 2-way one gives its budget away and is still answered."""
    wl = _workloads()[wname]
    plan = plan_hierarchical(wl, 0.8, strategy=strategy, variance_model=model)
    ref = _closed_form_plan(plan)
    totals = []
    for p in (plan, ref):
        blocks, _, budgets, _, cov = _explicit(p, model)
        assert po.privacy(blocks, budgets) <= 0.8 + 1e-12
        totals.append(sum(w * np.trace(_query(p, j) @ cov @ _query(p, j).T) for j, w in enumerate(wl.weights)))
    assert plan.total_variance() == pytest.approx(totals[0], rel=1e-6)
    assert totals[0] <= totals[1] * (1 + 1e-9)
    if wname == "nested and 1-way":
        assert not plan.measured(0) and plan.answerable((0,)) and totals[0] < 0.9 * totals[1]
        assert plan.entry_variance(0).shape == (3,)


def test_joint_sum_objective_is_the_continuous_total():
    """The budget-split objective F(ε) = f(ε)(Σε)² (:mod:`joint_budgets`) at any split equals the
    explicit GLS total Σ_K w_K tr(Q_K 2(SᵀΣ⁻¹S)⁺ Q_Kᵀ) (Σε)² with product-form level budgets."""
    from dpmatrix.planners._pure.joint_budgets import JointSumObjective
    from dpmatrix.planners._pure.joint_levels import AttributeBasis

    wl = _workloads()["nested and 1-way"]
    plan = plan_hierarchical(wl, 1.0, strategy="haar", budgeting="uniform")
    bases = {i: AttributeBasis.of(t) for ts, s in zip(plan.per_attribute, wl.sets) for i, t in zip(s, ts)}
    rows = [[np.asarray(wl.query_matrix(i, k), float) for i, k in zip(s, wl.types(j))] for j, s in enumerate(wl.sets)]
    obj = JointSumObjective(wl.sets, wl.weights, rows, bases, [True] * len(wl.sets))
    for eps_a in ([0.1, 0.2, 0.3, 0.4], [0.0, 0.5, 0.2, 0.3], [0.4, 0.3, 0.2, 0.1]):
        blocks, prec = [], []
        for j, (s, ts) in enumerate(zip(wl.sets, plan.per_attribute)):
            hand = {a: po.levels_by_hand(t) for a, t in zip(s, ts)}
            for lev in itertools.product(*[range(len(t.shares)) for t in ts]):
                e = eps_a[j] * math.prod(t.shares[k] for t, k in zip(ts, lev))
                if e > 0:
                    blocks.append(po.kron_all([hand[i][lev[s.index(i)]] if i in s else np.ones((1, n))
                                               for i, n in enumerate(SIZES)]))
                    prec.append(np.full(blocks[-1].shape[0], e * e / 2))
        st, pr = np.vstack(blocks), np.concatenate(prec)
        cov = np.linalg.pinv(st.T @ (pr[:, None] * st), rcond=1e-10)
        want = sum(w * np.trace(_query(plan, j) @ cov @ _query(plan, j).T) for j, w in enumerate(wl.weights))
        assert obj.value(np.array(eps_a)) == pytest.approx(want * sum(eps_a) ** 2, rel=1e-9)
        # the analytic gradient against central differences
        x = np.array(eps_a) + 0.05
        g = obj.value_grad(x)[1]
        h = 1e-6
        num = [(obj.value(x + h * e) - obj.value(x - h * e)) / (2 * h) for e in np.eye(4)]
        np.testing.assert_allclose(g, num, rtol=1e-5)


def test_monte_carlo_real_sampler():
    """Unbiased answers with the plan's exact variances, by simulation with the real discrete
    Laplace sampler (seeded byte source) through plan.measure; truth counted by numpy."""
    dom = Domain.from_sizes([5, 3])
    wl = Workload(dom, [("a0",), ("a0", "a1")], query_types={"a0": "prefix"})
    p = plan_hierarchical(wl, 1.0, strategy="hierarchical", branching=2, budgeting="uniform")
    gen = np.random.default_rng(17)
    rec = np.column_stack([gen.integers(0, 5, 150), gen.integers(0, 3, 150)])
    x = np.zeros((5, 3))
    np.add.at(x, tuple(rec.T), 1)
    truth = np.cumsum(x.sum(axis=1))
    reps = 1500
    with pytest.warns(InsecureRandomnessWarning):
        errs = np.array([p.measure(rec, rng=gen).answer("a0")["estimate"].to_numpy() - truth for _ in range(reps)])
    po.assert_mean_and_variance(errs, p.entry_variance(0))


def test_one_strategy_per_attribute_with_per_marginal_query_types():
    """a0 is asked as prefixes in one marginal and as cells in the other (per-marginal override):
    it gets one level strategy (the joint estimate's decomposition needs one Gram per attribute),
    each marginal keeps the factor tr(Q G⁻¹ Qᵀ)(Ση)² of its own queries, and the answers are the
    explicit joint estimator's."""
    dom = Domain.from_sizes([32, 3, 4])  # on 32 cells a tree wins for prefixes and cells together
    wl = Workload(dom, [{"attributes": ("a0", "a1"), "query_types": {"a0": "prefix"}}, ("a0", "a2")],
                  query_types={"a2": "range"})
    p = plan_hierarchical(wl, 0.8, strategy="hierarchical")
    t0, t1 = p.per_attribute[0][0], p.per_attribute[1][0]
    assert (t0.kind, t0.branching, t0.shares) == (t1.kind, t1.branching, t1.shares) and t0.kind == "tree"
    assert 32 % t0.branching != 0 and sum(x > 0 for x in t0.shares) >= 2  # uneven blocks, ≥ 2 levels
    g = sum(e * e * h.T @ h for h, e in zip(po.levels_by_hand(t0), t0.shares))
    for t, q in ((t0, _prefix(32)), (t1, np.eye(32))):
        assert t.factor == pytest.approx(np.trace(q @ np.linalg.inv(g) @ q.T) * sum(t.shares) ** 2, rel=1e-9)
    _, _, _, _, cov = _explicit(p)
    for j in range(2):
        q = _query(p, j)
        np.testing.assert_allclose(p.entry_variance(j).reshape(-1), np.diag(q @ cov @ q.T), rtol=1e-5)
    # a stored plan measuring one attribute with two strategies is refused by name
    d = p.to_dict()
    d["per_attribute"][1][0] = {**d["per_attribute"][1][0], "shares": d["per_attribute"][1][0]["shares"][::-1]}
    with pytest.raises(PlanError, match="two different level strategies"):
        HierarchicalPlan.from_dict(d)
