"""User strategy matrices (explicit) and the optimized weighted-marginals strategy."""

import numpy as np
import pure_oracle as po
import pytest
import scipy.optimize

import dpmatrix as dm
from dpmatrix._domain import Domain
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._workload import Workload
from dpmatrix.errors import PlanError, WorkloadError
from dpmatrix.planners._pure import MatrixPurePlan, plan_pure
from dpmatrix.planners._pure.matrix_strategy import integer_rows, plan_pure_matrix
from dpmatrix.planners._pure.optimize import _system, optimize_marginal_budgets

SIZES = (2, 2, 2)


@pytest.fixture
def fig1():
    return Workload(Domain({"A": 2, "B": 2, "C": 2}), [("A",), ("A", "B")])


def test_user_matrix_q_reproduces_figure1(fig1):
    q = np.vstack([po.marginal_matrix(SIZES, (0,)), po.marginal_matrix(SIZES, (0, 1))])
    p = plan_pure_matrix(fig1, 1.0, q, budgeting="uniform")
    assert [float(b) for b in p.budgets] == [0.5] * 6
    assert po.privacy([q], [float(b) for b in p.budgets]) == pytest.approx(1.0)
    var = [po.dlap_var(0.5)] * 6
    assert p.total_variance() == pytest.approx(np.trace(po.gls_cov([q], var, q)), rel=1e-9)
    # optimal per-row budgets (convex program with R = Q S⁺): GLS never worse than uniform
    p2 = plan_pure_matrix(fig1, 1.0, q)
    assert p2.privacy_epsilon() <= 1
    assert po.privacy([q], [float(b) for b in p2.budgets]) <= 1 + 1e-12
    assert p2.total_variance() <= p.total_variance() * (1 + 1e-9)


def test_user_matrix_reconstruction_and_rowspace(fig1):
    """Through dm.plan(strategy=<matrix>) and the one measurement path: the released outputs are
    the integer rows' answers plus integer noise, and the estimates are the explicit GLS."""
    s = np.vstack([po.hadamard_row(3, a) for a in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)]])
    p = dm.plan(fig1, epsilon=1.0, delta=0, strategy=s)
    assert isinstance(p, MatrixPurePlan) and p.attrs == (0, 1, 2)  # 8 columns: the whole domain
    recs = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 1], [0, 1, 1], [1, 1, 0]])
    with pytest.warns(InsecureRandomnessWarning):
        meas = p.measure(recs, rng=np.random.default_rng(0))
    x = np.zeros(8)
    np.add.at(x, [a * 4 + b * 2 + c for a, b, c in recs], 1)
    y = np.zeros(4)
    for g, (_, rows) in enumerate(p.groups):
        y[list(rows)] = meas.noisy[g]
        assert np.asarray(meas.noisy[g]).dtype.kind == "i"
    assert np.all(y - s @ x == np.round(y - s @ x))  # integer noise on integer answers
    blocks = [row[None, :] for row in s]
    est = po.gls_estimate(blocks, list(p.noise_variance), [np.array([v]) for v in y], po.marginal_matrix(SIZES, (0, 1)))
    assert meas.estimate(("A", "B")).reshape(-1) == pytest.approx(est)
    cov = po.gls_cov(blocks, list(p.noise_variance), po.marginal_matrix(SIZES, (0, 1)))
    assert p.variance(("A", "B")).reshape(-1) == pytest.approx(np.diag(cov))
    with pytest.raises(WorkloadError, match="row space"):
        dm.plan(fig1, epsilon=1.0, delta=0, strategy=s[:2])  # ∅ and A coefficients cannot give AB
    with pytest.raises(PlanError, match="integer"):
        dm.plan(fig1, epsilon=1.0, delta=0, strategy=np.vstack([s, [1, np.sqrt(2), 0, 0, 0, 0, 0, 0]]))
    with pytest.raises(PlanError, match="columns"):
        plan_pure_matrix(fig1, 1.0, s[:, :3])


def test_integer_rows_rescales_exactly():
    assert integer_rows(np.array([[0.25, -0.5, 0.0]])).tolist() == [[1, -2, 0]]
    with pytest.raises(PlanError):
        integer_rows(np.array([[1.0, np.pi]]))


def test_optimizer_gradient_matches_finite_differences():
    sizes = (3, 2, 4)
    sets = [(0, 1), (1, 2), (2,)]
    w = np.array([1.0, 2.0, 0.5])
    from dpmatrix.planners._pure.subspaces import downward_closure

    cands = downward_closure(sets)
    t, m = _system(sizes, sets, w, cands)

    def f(th):
        lb = m @ (th * th)
        return th.sum() ** 2 * (t / lb).sum()

    th0 = np.random.default_rng(0).uniform(0.5, 1.5, len(cands))
    # the optimizer's objective (continuous model, ε = 1) equals 2 f(θ)/ε² for θ normalized
    r = optimize_marginal_budgets(sizes, sets, w, 1.0, candidates=cands, starts=[th0], maxiter=0)
    assert min(r.starts) <= 2 * f(np.ones(len(cands))) * (1 + 1e-9)
    g_num = scipy.optimize.approx_fprime(th0, f, 1e-6)
    # analytic gradient as in the module
    lb = m @ (th0 * th0)
    big_f = (t / lb).sum()
    s = th0.sum()
    g = 2 * s * big_f - s * s * 2 * th0 * (m.T @ (t / lb**2))
    assert g == pytest.approx(g_num, rel=1e-4)


def test_optimized_never_worse_than_marginals_and_checked_by_oracle():
    dom = Domain.from_sizes((2, 3, 2))
    wl = Workload(dom, [("a0",), ("a1", "a2"), ("a0", "a1")], weights=[1.0, 2.0, 0.5])
    for model in ("continuous", "discrete"):
        po_ = plan_pure(wl, 1.0, strategy="optimized", variance_model=model)
        pq = plan_pure(wl, 1.0, strategy="marginals", variance_model=model)
        assert po_.total_variance() <= pq.total_variance() * (1 + 1e-6)
    blocks = [po.marginal_matrix((2, 3, 2), g.attrs) for g in po_.groups]
    e = [float(b) for b in po_.budgets]
    assert po.privacy(blocks, e) <= 1.0
    tot = sum(w * np.trace(po.gls_cov(blocks, [po.dlap_var(x) for x in e], po.marginal_matrix((2, 3, 2), a)))
              for w, a in zip(wl.weights, [(0,), (1, 2), (0, 1)]))
    assert po_.total_variance() == pytest.approx(tot, rel=1e-8)


def test_optimized_for_max_variance():
    dom = Domain.from_sizes((2, 3, 4, 2))
    wl = Workload(dom, [("a0",), ("a1", "a2"), ("a0", "a1", "a3"), ("a2", "a3")])
    pm = plan_pure(wl, 1.0, strategy="optimized", objective="max", variance_model="continuous")
    ps = plan_pure(wl, 1.0, strategy="optimized", objective="sum", variance_model="continuous")
    pq = plan_pure(wl, 1.0, strategy="marginals", variance_model="continuous")
    assert pm.max_variance() <= ps.max_variance() * (1 + 1e-6)
    assert pm.max_variance() <= pq.max_variance() * (1 + 1e-6)
    assert ps.total_variance() <= pm.total_variance() * (1 + 1e-6)
    # max variance of the explicit GLS covariance
    blocks = [po.marginal_matrix(dom.sizes, g.attrs) for g in pm.groups]
    var = [2 / float(b) ** 2 for b in pm.budgets]
    mx = max(np.diag(po.gls_cov(blocks, var, po.marginal_matrix(dom.sizes, tuple(a)))).max() for a in wl.sets)
    assert pm.max_variance() == pytest.approx(mx, rel=1e-8)
    p_auto = plan_pure(wl, 1.0, objective="max", variance_model="continuous")
    assert p_auto.max_variance() <= pm.max_variance() * (1 + 1e-9)
