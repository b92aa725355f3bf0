"""Every strategy + budget split of the pure planner against explicit matrices on small domains:
privacy (max column L1 norm of the budget-scaled strategy), GLS covariances, query variances,
reconstruction, exact discrete Laplace variances, and a Monte Carlo run of the real sampler."""

import numpy as np
import pure_oracle as po
import pytest

from dpmatrix._domain import Domain
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._workload import Workload
from dpmatrix.errors import BudgetError, DataError, NotMeasuredError, PlanError
from dpmatrix.planners._pure import PurePlan, plan_pure

SIZES = (2, 3, 2)
SETS = [("a0",), ("a1", "a2"), ("a0", "a1")]
CASES = [("identity", "optimal"), ("marginals", "uniform"), ("marginals", "optimal"),
         ("fourier", "uniform"), ("fourier", "optimal"), ("clustering", "uniform"),
         ("clustering", "optimal"), ("optimized", "optimal")]


def _blocks(plan):
    return [po.marginal_matrix(SIZES, g.attrs) if g.kind == "marginal"
            else po.residual_matrix(SIZES, g.attrs) for g in plan.groups]


@pytest.fixture(scope="module")
def wl():
    dom = Domain.from_sizes(SIZES)
    return Workload(dom, SETS, weights=[1.0, 2.0, 0.5])


@pytest.mark.parametrize("strategy,budgeting", CASES)
@pytest.mark.parametrize("model", ["discrete", "continuous"])
def test_privacy_and_gls_against_explicit(wl, strategy, budgeting, model):
    eps = 0.7
    p = plan_pure(wl, eps, strategy=strategy, budgeting=budgeting, variance_model=model)
    blocks = _blocks(p)
    e = [float(b) for b in p.budgets]
    priv = po.privacy(blocks, e)
    assert priv <= eps + 1e-12
    assert priv == pytest.approx(float(p.privacy_epsilon()), rel=1e-12)
    assert priv >= eps * (1 - 1e-5)  # the budget is spent (rounding loses < 2^-20)
    if model == "discrete":
        var = [po.dlap_var(x) for x in e]
        assert p.noise_variance == pytest.approx(var, rel=1e-9)
    else:
        var = [2 / x**2 for x in e]
    rng = np.random.default_rng(1)
    total = 0.0
    for w, names in zip(wl.weights, SETS):
        attrs = tuple(sorted(wl.domain.resolve(names)))
        q = po.marginal_matrix(SIZES, attrs)
        cov = po.gls_cov(blocks, var, q)
        assert p.covariance(names) == pytest.approx(cov, rel=1e-8, abs=1e-10)
        assert p.variance(names).reshape(-1) == pytest.approx(np.diag(cov), rel=1e-8)
        lin = rng.normal(size=(3, q.shape[0]))
        assert p.query_variance(names, lin) == pytest.approx(np.diag(lin @ cov @ lin.T), rel=1e-8)
        total += w * np.trace(cov)
    assert p.total_variance() == pytest.approx(total, rel=1e-9)
    # covariances across marginals (consistency makes them non-zero)
    for n1 in SETS:
        for n2 in SETS + [("a2",)]:
            a1 = tuple(sorted(wl.domain.resolve(n1)))
            a2 = tuple(sorted(wl.domain.resolve(n2)))
            q = np.vstack([po.marginal_matrix(SIZES, a1), po.marginal_matrix(SIZES, a2)])
            full = po.gls_cov(blocks, var, q)
            k = po.marginal_matrix(SIZES, a1).shape[0]
            assert p.covariance(n1, n2) == pytest.approx(full[:k, k:], rel=1e-8, abs=1e-10)
    # reconstruction: the library's per-subspace GLS equals explicit GLS on arbitrary outputs
    ys = [rng.normal(size=b.shape[0]) * 5 for b in blocks]
    est = p.reconstruct(ys)
    for names in SETS + [("a1",), ()]:
        attrs = tuple(sorted(wl.domain.resolve(names)))
        q = po.marginal_matrix(SIZES, attrs)
        assert est.marginal(names).reshape(-1) == pytest.approx(po.gls_estimate(blocks, var, ys, q), abs=1e-8)


def test_group_rows_match_oracle(wl):
    p = plan_pure(wl, 1.0, strategy="fourier")
    x = np.random.default_rng(0).integers(0, 5, size=12)
    table = x.reshape(SIZES)
    for g, b in zip(p.groups, _blocks(p)):
        drop = tuple(i for i in range(3) if i not in g.attrs)
        assert g.answer(table.sum(axis=drop)) == pytest.approx(b @ x)
        assert np.abs(b).sum(axis=0).max() == g.sensitivity == np.abs(b).sum(axis=0).min()


def test_monte_carlo_with_real_sampler(wl):
    """Unbiasedness and variances of the released marginals, real discrete Laplace draws."""
    p = plan_pure(wl, 1.0, strategy="marginals")
    rng = np.random.default_rng(7)
    records = np.column_stack([rng.integers(0, n, size=200) for n in SIZES])
    truth = {n: np.histogramdd(records[:, sorted(wl.domain.resolve(n))],
                               bins=[SIZES[i] for i in sorted(wl.domain.resolve(n))],
                               range=[(0, SIZES[i]) for i in sorted(wl.domain.resolve(n))])[0]
             for n in SETS}
    reps = 3000
    errs = {n: [] for n in SETS}
    for _ in range(reps):
        with pytest.warns(InsecureRandomnessWarning):  # seeded: reproducible, not private
            meas = p.measure(records, rng=rng)
        for n in SETS:
            errs[n].append((meas.estimate(n) - truth[n]).reshape(-1))
    for n in SETS:
        e = np.array(errs[n])
        v = p.variance(n).reshape(-1)
        # mean error within 5 standard errors of 0; sample variance within 5 of its standard
        # errors, sd(s²) ≈ √((m4 - s⁴)/reps) (heavy-tailed noise: no fixed relative tolerance)
        assert np.all(np.abs(e.mean(axis=0)) < 5 * np.sqrt(v / reps))
        s2 = e.var(axis=0)
        m4 = ((e - e.mean(axis=0)) ** 4).mean(axis=0)
        assert np.all(np.abs(s2 - v) < 5 * np.sqrt((m4 - s2**2) / reps))
        assert np.all(np.abs(s2 - v) < 0.2 * v)


def test_roundtrip_dict(wl):
    p = plan_pure(wl, 0.5)
    q = PurePlan.from_dict(p.to_dict())
    assert q.budgets == p.budgets and q.groups == p.groups
    assert q.total_variance() == pytest.approx(p.total_variance())


def test_table(wl):
    p = plan_pure(wl, 1.0, strategy="fourier")
    t = p.table()
    assert t["share"].sum() == pytest.approx(1.0, abs=1e-5)
    assert set(t["kind"]) == {"residual"}


@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf"), "x", True])
def test_bad_epsilon(wl, eps):
    with pytest.raises(BudgetError):
        plan_pure(wl, eps)


def test_bad_options(wl):
    with pytest.raises(PlanError, match="unknown strategy"):
        plan_pure(wl, 1.0, strategy="wavelet")
    with pytest.raises(PlanError, match="max_identity_cells"):
        plan_pure(wl, 1.0, strategy="identity", max_identity_cells=4)
    with pytest.raises(PlanError, match="unknown strategy"):
        dom = Domain.from_sizes(SIZES)
        plan_pure(Workload(dom, [("a0",)], query_types={"a0": "prefix"}), 1.0,
                  strategy="wavelet")  # prefix: test_pure_hierarchical, test_pure_generalized
    p = plan_pure(wl, 1.0, strategy="marginals")
    with pytest.raises(DataError):
        p.measure(np.array([[0, 5, 0]]))
    with pytest.raises(NotMeasuredError):
        p.variance(("a0", "a1", "a2"))  # the full table is not identified by these marginals
