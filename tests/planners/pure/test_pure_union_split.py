"""Unions of p-Identity products with the budget split optimized against the joint GLS (sum and
max objectives).

Expected numbers come from explicit dense matrices built here with numpy (the stacked strategy,
``pinv`` of its GLS precision, the workload's query matrices written out with loops), finite
differences, exact rational sums for privacy (max column L1 norm of the budget-scaled strategy)
and simulation with the real sampler. Nothing expected is produced by the code under test."""

import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pure_oracle as po
import pytest
import union_oracle as uo

from dpmatrix._domain import Domain
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._solvers.union_split import kron_union_model, optimize_union_split
from dpmatrix._workload import Workload
from dpmatrix.errors import PlanError
from dpmatrix.planners._pure import plan_pure
from dpmatrix.planners._pure.pidentity_union import plan_pidentity_union
from oracle import prefix_matrix as prefixes
from oracle import range_matrix as ranges


def explicit_matrix(theta):
    n = theta.shape[1]
    a = np.vstack([np.eye(n), theta])
    return a / a.sum(axis=0)


def dense_query_variances(shape, strategies, etas, queries):
    """Continuous-model GLS variances of every query, from the stacked dense strategy."""
    blocks, noise = [], []
    for (attrs, facs), e in zip(strategies, etas):
        if e <= 0:
            continue
        blocks.append(po.kron_all(facs) @ po.marginal_matrix(shape, attrs))
        noise.append(2.0 / e**2)
    return [np.diag(po.gls_cov(blocks, noise, po.kron_all(qs) @ po.marginal_matrix(shape, attrs)))
            for attrs, qs in queries]


def test_diagonal_model_matches_dense_gls_and_gradients():
    """The simultaneously diagonal joint GLS (union of 4 products on 4 × 3 × 5 cells, 2-way
    marginals: a singular precision on the union) reproduces every query variance and the total
    of a dense pinv GLS; the analytic gradients match finite differences."""
    rng = np.random.default_rng(0)
    shape = (4, 3, 5)
    fac = {0: explicit_matrix(rng.random((2, 4))), 1: explicit_matrix(rng.random((1, 3))), 2: np.eye(5)}
    q = {0: prefixes(4), 1: rng.random((2, 3)), 2: np.eye(5)}
    sets = [(0, 1), (0, 2), (1, 2), (0,)]
    w = [1.0, 2.0, 0.5, 1.0]
    model = kron_union_model(shape, [{a: fac[a].T @ fac[a] for a in s} for s in sets],
                             [(wi, {a: q[a] for a in s}) for wi, s in zip(w, sets)])
    eta = np.array([0.3, 0.2, 0.4, 0.1])
    dense = dense_query_variances(shape, [(s, [fac[a] for a in s]) for s in sets], eta,
                                  [(s, [q[a] for a in s]) for s in sets])
    for got, want in zip(model.query_variances(eta), dense):
        np.testing.assert_allclose(got, want, rtol=1e-9)
    assert model.total(eta) == pytest.approx(sum(wi * d.sum() for wi, d in zip(w, dense)), rel=1e-10)
    assert model.max_variance(eta) == pytest.approx(max(d.max() for d in dense), rel=1e-10)
    h = 1e-6
    for k in range(4):
        e = np.eye(4)[k] * h
        fd = (model.total(eta + e) - model.total(eta - e)) / (2 * h)
        assert model.total_grad(eta)[k] == pytest.approx(fd, rel=1e-6)
        fd = (model.pnorm(eta + e, 8.0)[0] - model.pnorm(eta - e, 8.0)[0]) / (2 * h)
        assert model.pnorm(eta, 8.0)[1][k] == pytest.approx(fd, rel=1e-6, abs=1e-9)


def _two_marginals_by_hand(e1):
    """The cells of a 10-cell and of a 6-cell attribute, each measured alone (budgets ε_1 and
    1 - ε_1, σ_j² = 2/ε_j²). Both measurements carry the grand total, so the GLS of the first
    marginal sees ``x_a`` with covariance ``σ_1² I`` and ``1ᵀx_a`` with variance ``6σ_2²``:
    Sherman–Morrison gives ``Cov = σ_1²(I - σ_1² 11ᵀ/(6σ_2² + 10σ_1²))``. Returns (total, max)."""
    s1, s2 = 2 / e1**2, 2 / (1 - e1) ** 2
    d = 6 * s2 + 10 * s1
    c1, c2 = s1 * (1 - s1 / d), s2 * (1 - s2 / d)
    return 10 * c1 + 6 * c2, max(c1, c2)


def test_split_search_reaches_the_hand_optimum_of_two_marginals():
    """Two one-attribute marginals: the model's total and max equal the hand formula, and the
    search from a bad start reaches the minimum of a brute-force grid over ε_1 (the cube-root rule
    of the direct recovery, ε ∝ (20, 12)^{1/3}, is not optimal: the total is shared)."""
    model = kron_union_model((10, 6), [{0: np.eye(10)}, {1: np.eye(6)}],
                             [(1.0, {0: np.eye(10)}), (1.0, {1: np.eye(6)})])
    for e1 in (0.3, 0.55, 0.8):
        tot, top = _two_marginals_by_hand(e1)
        assert model.total(np.array([e1, 1 - e1])) == pytest.approx(tot, rel=1e-12)
        assert model.max_variance(np.array([e1, 1 - e1])) == pytest.approx(top, rel=1e-12)
    grid = np.linspace(0.01, 0.99, 98001)
    by_hand = np.array([_two_marginals_by_hand(e) for e in grid])
    cube = np.array([20.0, 12.0]) ** (1 / 3)
    for k, objective in enumerate(("sum", "max")):
        res = optimize_union_split(model, np.array([0.9, 0.1]), 1.0, objective)
        assert res.objective <= by_hand[:, k].min() * (1 + 1e-9)
        assert res.objective == pytest.approx(_two_marginals_by_hand(res.eta[0])[k], rel=1e-12)
        assert res.eta.sum() == pytest.approx(1.0, rel=1e-15)
    assert res.objective < _two_marginals_by_hand(cube[0] / cube.sum())[1]


WORKLOADS = {
    "range-prefix-cells": (Domain({"a": 6, "b": 4, "c": 3}), [("a", "b"), ("a", "c"), ("b", "c")],
                           {"a": "range", "b": "prefix"}),
    "prefix-x-cells": (Domain({"a": 5, "b": 4}), [("a",), ("a", "b")], {"a": "prefix"}),
}


def gls_variances(rows, noise, q):
    """Diagonal of ``Q (SᵀΣ⁻¹S)⁺ Qᵀ`` by an eigendecomposition that drops the precision's null
    space explicitly (eigenvalues below 1e-10 of the largest: a union of 2-way marginals is
    singular on the union's cells, and a default ``pinv`` cut-off keeps round-off there)."""
    s = np.vstack(rows)
    g = s.T @ (s / np.asarray(noise)[:, None])
    w, v = np.linalg.eigh(g)
    keep = w > 1e-10 * w.max()
    qv = q @ v[:, keep]
    return np.einsum("ij,j,ij->i", qv, 1.0 / w[keep], qv)


def discrete_laplace_variance(eps):
    """``Var = 2e^{-ε}/(1 - e^{-ε})²`` (the pmf ``∝ e^{-ε|y|}`` summed in closed form; the truncated
    sum of :func:`pure_oracle.dlap_var` is checked against it where it converges)."""
    return 2 * np.exp(-eps) / (-np.expm1(-eps)) ** 2


def _explicit_checks(p, dom, sets, types, eps, model):
    s, budgets = uo.stacked(p)
    union = tuple(sorted(set().union(*map(set, [dom.resolve(x) for x in sets]))))
    shape = tuple(dom.sizes[a] for a in union)
    # privacy: the max column L1 norm of the budget-scaled stacked strategy, in exact rationals
    assert uo.exact_epsilon(s, budgets) == p.privacy_epsilon() <= Fraction(eps)
    assert po.privacy([s[r:r + 1] for r in range(s.shape[0])], [float(b) for b in budgets]) <= eps * (1 + 1e-15)
    e = np.array([float(b) for b in budgets])
    if model == "discrete":  # the closed form against the pmf summed directly, where it converges
        big = e > 0.05
        np.testing.assert_allclose(discrete_laplace_variance(e[big][:5]), [po.dlap_var(x) for x in e[big][:5]],
                                   rtol=1e-9)
    mats = {"range": ranges, "prefix": prefixes, "identity": np.eye}
    total, top = 0.0, 0.0
    for j, st in enumerate(sets):
        attrs = dom.resolve(st)
        qq = po.kron_all([mats[types.get(dom.names[a], "identity")](dom.sizes[a]) for a in attrs])
        qq = qq @ po.marginal_matrix(shape, tuple(union.index(a) for a in attrs))
        var = uo.estimator_variances(s, budgets, qq, model)
        np.testing.assert_allclose(p.entry_variance(j).ravel(), var, rtol=1e-7)
        if model == "continuous":  # the estimator is the GLS of the continuous model
            np.testing.assert_allclose(var, gls_variances([s.astype(float)], 2.0 / e**2, qq), rtol=1e-7)
        total += var.sum()
        top = max(top, var.max())
    assert p.total_variance() == pytest.approx(total, rel=1e-9)
    assert p.max_variance() == pytest.approx(top, rel=1e-9)
    return total, top


@pytest.mark.parametrize("objective", ["sum", "max"])
@pytest.mark.parametrize("model", ["discrete", "continuous"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_joint_split_privacy_and_variances_explicit(name, model, objective):
    """Every new split: exact privacy, all query variances and the exact max against a dense
    brute-force GLS; the joint split is no worse than its start in the continuous model (the
    search's model), by the brute-force numbers."""
    dom, sets, types = WORKLOADS[name]
    wl = Workload(dom, sets, query_types=types)
    p = plan_pidentity_union(wl, 0.9, variance_model=model, objective=objective)
    total, top = _explicit_checks(p, dom, sets, types, 0.9, model)
    if model == "continuous":
        start = plan_pidentity_union(wl, 0.9, variance_model=model, objective=objective, joint=False)
        t0, m0 = _explicit_checks(start, dom, sets, types, 0.9, model)
        k = 0 if objective == "sum" else 1
        assert (total, top)[k] <= (t0, m0)[k] * (1 + 1e-12)
        # (prefix-x-cells, max: the start is optimal — both marginals' maxima cross there)
        if (name, objective) != ("prefix-x-cells", "max"):
            assert p.comparison[-1]["split"] == "joint" and (total, top)[k] < (t0, m0)[k] * (1 - 1e-3)


def test_gains_on_three_range_attributes():
    """All 2-way marginals of 3 range attributes (6, 10, 4): the joint split lowers the total
    below the cube-root split and the max below the equalized split (dense brute-force numbers).
    With equal sizes (8, 8, 8) the workload is symmetric under permuting the attributes, the
    equal split is stationary, and the search keeps it."""
    sets = [("a", "b"), ("a", "c"), ("b", "c")]
    types = {"a": "range", "b": "range", "c": "range"}
    for sizes in ((6, 10, 4), (8, 8, 8)):
        dom = Domain(dict(zip("abc", sizes)))
        wl = Workload(dom, sets, query_types=types)
        for objective, pick in (("sum", 0), ("max", 1)):
            p = plan_pidentity_union(wl, 1.0, variance_model="continuous", objective=objective)
            joint = _explicit_checks(p, dom, sets, types, 1.0, "continuous")
            start = _explicit_checks(plan_pidentity_union(wl, 1.0, variance_model="continuous",
                                                          objective=objective, joint=False),
                                     dom, sets, types, 1.0, "continuous")
            if sizes == (8, 8, 8):
                np.testing.assert_allclose([r["epsilon"] for r in p.comparison[:-1]], 1 / 3, rtol=1e-12)
            else:
                assert joint[pick] < start[pick] * (1 - (1e-4 if objective == "sum" else 0.1))


def test_max_objective_through_plan_pure_and_auto():
    """strategy='pidentity' plans a union for objective='max' (it was refused), and auto compares
    the union candidate by its exact max."""
    dom, sets, types = WORKLOADS["range-prefix-cells"]
    wl = Workload(dom, sets, query_types=types)
    p = plan_pure(wl, 1.0, strategy="pidentity", objective="max", variance_model="continuous")
    assert p.strategy == "pidentity-union" and p.objective == "max"
    auto = plan_pure(wl, 1.0, objective="max", variance_model="continuous")
    rows = [r for r in auto.comparison if "max_variance" in r]
    union_rows = [r for r in rows if r["strategy"] == "pidentity-union"]
    assert union_rows and union_rows[0]["max_variance"] == pytest.approx(p.max_variance(), rel=1e-12)
    assert auto.max_variance() == pytest.approx(min(r["max_variance"] for r in rows), rel=1e-12)


@pytest.mark.parametrize("n", [12, 24])
def test_two_query_types_on_one_attribute(n):
    """Ranges of a in one marginal, prefixes of a in another: two factors on one attribute have no
    common congruence, so the per-type plan keeps its start split; a second candidate shares ONE
    factor (optimized for both types) and is split jointly. The better by the exact objective is
    kept (n = 12: the shared factor, n = 24: the per-type factors); either way privacy is exact,
    the variances are the brute-force GLS ones and the result is no worse than the start plan."""
    dom = Domain({"a": n, "b": 3})
    sets = [{"attributes": ("a",), "query_types": {"a": "range"}}, ("a", "b")]
    wl = Workload(dom, sets, query_types={"a": "prefix"})
    for objective in ("sum", "max"):
        p = plan_pidentity_union(wl, 1.0, variance_model="continuous", objective=objective)
        start = plan_pidentity_union(wl, 1.0, variance_model="continuous", objective=objective, joint=False)
        s, budgets = uo.stacked(p)
        assert uo.exact_epsilon(s, budgets) == p.privacy_epsilon() <= 1
        e = np.array([float(b) for b in budgets])
        rows = [s[r:r + 1].astype(float) for r in np.flatnonzero(e > 0)]
        noise = 2.0 / e[e > 0] ** 2
        q0 = ranges(n) @ po.marginal_matrix((n, 3), (0,))
        q1 = np.kron(prefixes(n), np.eye(3))
        v0, v1 = gls_variances(rows, noise, q0), gls_variances(rows, noise, q1)
        np.testing.assert_allclose(p.entry_variance(0).ravel(), v0, rtol=1e-7)
        np.testing.assert_allclose(p.entry_variance(1).ravel(), v1, rtol=1e-7)
        value = (v0.sum() + v1.sum()) if objective == "sum" else max(v0.max(), v1.max())
        base = start.total_variance() if objective == "sum" else start.max_variance()
        last = p.comparison[-1]
        if n == 12:
            assert last["factors"].startswith("one per attribute") and value < base * 0.999
            assert last["per_type_factors"] == pytest.approx(base, rel=1e-12)
        else:
            assert "skipped" in last["joint"] and value == pytest.approx(base, rel=1e-12)
            assert last["shared_factors"] > value


def test_monte_carlo_joint_split_real_sampler():
    """Unbiased answers with the plan's exact discrete variances (seeded real sampler)."""
    dom = Domain({"a": 5, "b": 3})
    wl = Workload(dom, [("a",), ("a", "b")], query_types={"a": "prefix"})
    p = plan_pidentity_union(wl, 0.7)
    assert p.comparison[-1]["split"] == "joint"
    gen = np.random.default_rng(5)
    rec = np.stack([gen.integers(0, 5, 200), gen.integers(0, 3, 200)], axis=1)
    table = np.zeros((5, 3))
    np.add.at(table, (rec[:, 0], rec[:, 1]), 1)
    truth = {("a",): np.cumsum(table.sum(axis=1)), ("a", "b"): np.cumsum(table, axis=0).ravel()}
    errs = {k: [] for k in truth}
    with pytest.warns(InsecureRandomnessWarning):
        for _ in range(1200):
            meas = p.measure(rec, rng=gen)
            for k in truth:
                errs[k].append(meas.answer(k)["estimate"].to_numpy() - truth[k])
    po.assert_mean_and_variance(np.array(errs[("a",)]), p.entry_variance(0))
    po.assert_mean_and_variance(np.array(errs[("a", "b")]), p.entry_variance(1).ravel())


def test_union_plan_is_deterministic_after_other_plans():
    """Same inputs, same plan: in a fresh process and after planning other things first."""
    code = textwrap.dedent("""
        import sys, hashlib, json
        from dpmatrix._domain import Domain
        from dpmatrix._workload import Workload
        from dpmatrix.planners._pure import plan_pure
        from dpmatrix.planners._pure.pidentity_union import plan_pidentity_union
        wl = Workload(Domain({"a": 12, "b": 6, "c": 4}), [("a", "b"), ("a", "c"), ("b", "c")],
                      query_types={"a": "range", "b": "prefix"})
        if sys.argv[1] == "after":
            plan_pure(Workload(Domain({"a": 30}), [("a",)], query_types={"a": "prefix"}), 1.0, strategy="pidentity")
            plan_pidentity_union(Workload(Domain({"a": 7, "b": 5}), [("a",), ("a", "b")],
                                          query_types={"a": "range"}), 0.5, objective="max")
        for obj in ("sum", "max"):
            p = plan_pidentity_union(wl, 1.0, objective=obj)
            d = p.to_dict()
            print(hashlib.sha256(json.dumps([d["factors"], d["products"], d["scales"]]).encode()).hexdigest())
    """)
    out = [subprocess.run([sys.executable, "-c", code, m], capture_output=True, text=True, check=True).stdout
           for m in ("fresh", "after")]
    assert out[0] == out[1] and out[0]


def test_typed_errors():
    m = kron_union_model((3,), [{0: np.eye(3)}, {}], [(1.0, {0: np.eye(3)})])
    with pytest.raises(PlanError, match="one positive budget per product"):
        optimize_union_split(m, np.array([1.0]), 1.0)
    with pytest.raises(PlanError, match="objective"):
        optimize_union_split(m, np.array([0.5, 0.5]), 1.0, "mean")
    wl = Workload(Domain({"a": 4, "b": 3}), [("a",), ("a", "b")], query_types={"a": "prefix"})
    with pytest.raises(PlanError, match="objective"):
        plan_pidentity_union(wl, 1.0, objective="median")


def test_factor_gradient_matches_finite_differences():
    """∂ total / ∂Θ_i through the shared factor Gram (gram_gradient, then theta_gradient) equals
    central differences of the total recomputed from scratch (new congruences each time)."""
    from dpmatrix._solvers.union_factors import normalized_gram, theta_gradient

    rng = np.random.default_rng(2)
    shape = (5, 4, 3)
    thetas = {0: rng.random((2, 5)), 1: rng.random((1, 4)), 2: np.zeros((0, 3))}
    q = {0: ranges(5), 1: prefixes(4), 2: np.eye(3)}
    sets = [(0, 1), (0, 2), (1, 2)]
    eta = np.array([0.5, 0.2, 0.3])

    def total(th):
        g = {k: normalized_gram(v) for k, v in th.items()}
        return kron_union_model(shape, [{a: g[a] for a in s} for s in sets],
                                [(1.0, {a: q[a] for a in s}) for s in sets])

    # the normalized Gram is the explicit ÃᵀÃ
    np.testing.assert_allclose(normalized_gram(thetas[0]), explicit_matrix(thetas[0]).T @ explicit_matrix(thetas[0]))
    for ax in (0, 1):
        grad = theta_gradient(thetas[ax], total(thetas).gram_gradient(eta, ax))
        h = 1e-6
        for idx in np.ndindex(thetas[ax].shape):
            up, dn = dict(thetas), dict(thetas)
            up[ax], dn[ax] = thetas[ax].copy(), thetas[ax].copy()
            up[ax][idx] += h
            dn[ax][idx] -= h
            fd = (total(up).total(eta) - total(dn).total(eta)) / (2 * h)
            assert grad[idx] == pytest.approx(fd, rel=1e-5)


def test_factor_rounds_lower_the_total_of_a_mixed_union():
    """range(16) × prefix(10) and prefix(10) × cells(4) with the 1-way marginals of a and c: the
    factor rounds change the factors (kept only when the exact joint total drops), and the plan's
    brute-force total is the one the search reports (up to the integer rows' quantization) and
    below the cube-root plan's."""
    dom = Domain({"a": 16, "b": 10, "c": 4})
    sets = [("a", "b"), ("b", "c"), ("a",), ("c",)]
    types = {"a": "range", "b": "prefix"}
    wl = Workload(dom, sets, query_types=types)
    p = plan_pidentity_union(wl, 1.0, variance_model="continuous")
    summary = p.comparison[-1]
    assert summary["factors"] == "joint" and "->" in summary["factor_rounds"]
    total, _ = _explicit_checks(p, dom, sets, types, 1.0, "continuous")
    assert total == pytest.approx(summary["joint_objective"], rel=1e-4)
    start = plan_pidentity_union(wl, 1.0, variance_model="continuous", joint=False)
    assert total < start.total_variance() * 0.95
