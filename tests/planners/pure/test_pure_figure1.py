"""Cormode et al. (datacubes), Figure 1 and §1/§3–4 numbers, against explicit matrices.

Binary A, B, C; x = (1, 2, 0, 1, 0, 0, 1, 0) (C order, A slowest); workload = marginal A and
marginal AB; Qx = (4, 1, 3, 1, 0, 1). Variances in the paper's continuous model (Laplace noise of
variance 2/ε_g²), ε = 1 (every number scales as 1/ε²).
"""


import numpy as np
import pure_oracle as po
import pytest

from dpmatrix._domain import Domain
from dpmatrix._solvers.budget_split import convex_budget_split, cube_root_split, uniform_split
from dpmatrix._workload import Workload
from dpmatrix.planners._pure import plan_pure
from dpmatrix.planners._pure import strategies as st

SIZES = (2, 2, 2)
X = np.array([1, 2, 0, 1, 0, 0, 1, 0], dtype=float)
QA = po.marginal_matrix(SIZES, (0,))
QAB = po.marginal_matrix(SIZES, (0, 1))
Q = np.vstack([QA, QAB])


@pytest.fixture
def wl():
    return Workload(Domain({"A": 2, "B": 2, "C": 2}), [("A",), ("A", "B")])


def test_query_answers():
    assert (Q @ X).tolist() == [4, 1, 3, 1, 0, 1]


def test_s_equals_q_uniform_is_48():
    # Explicit: every column of Q has two 1s -> uniform budget ε/2 per row, variance 2·4 = 8 each.
    assert po.privacy([Q], [0.5]) == pytest.approx(1.0)
    direct = 6 * 2 / 0.5**2
    assert direct == 48
    s = st.marginals(SIZES, [(0,), (0, 1)], [1, 1])
    assert uniform_split(2 * s.direct_weight, s.sensitivity, 1.0).objective == pytest.approx(48)


def test_s_equals_q_optimal_budgets_cube_root():
    s = st.marginals(SIZES, [(0,), (0, 1)], [1, 1])
    r = cube_root_split(2 * s.direct_weight, s.sensitivity, 1.0)
    assert r.eta == pytest.approx([0.442493, 0.557507], abs=1e-6)
    assert r.objective == pytest.approx((4 ** (1 / 3) + 2) ** 3, rel=1e-12)
    assert r.objective == pytest.approx(46.1679, abs=1e-4)
    # brute force over the budget line ε_A + ε_AB = 1 (direct recovery, 2 + 4 rows)
    e = np.linspace(0.3, 0.6, 300001)
    f = 2 * 2 / e**2 + 4 * 2 / (1 - e) ** 2
    assert e[f.argmin()] == pytest.approx(0.442493, abs=1e-5)
    assert f.min() == pytest.approx(46.1679, abs=1e-4)
    # §1 text: "variance 2(9/4ε)² ... 2(9/5ε)²" i.e. ε_A = 4/9, ε_AB = 5/9 (a rounded split)
    assert 2 * 2 * (9 / 4) ** 2 + 4 * 2 * (9 / 5) ** 2 == pytest.approx(46.17, abs=5e-3)


def test_convex_program_matches_closed_form_s_equals_q():
    # Program (1)-(3) with one budget per row, b_r = 2 (identity recovery, a = 1): Theorem 3.4.
    r = convex_budget_split(Q, np.full(6, 2.0), 1.0)
    assert r.objective == pytest.approx(46.1679, rel=1e-5)
    assert r.eta[:2] == pytest.approx([0.442493] * 2, abs=1e-4)
    assert po.privacy([Q], [1.0]) == 2  # sanity of the oracle
    assert (np.abs(Q).T @ r.eta).max() <= 1.0 + 1e-12


def _fourier_blocks():
    alphas = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)]  # ∅, A, B, AB
    return alphas, [po.hadamard_row(3, a)[None, :] for a in alphas]


def test_fourier_uniform_64_and_nonuniform_58_268():
    alphas, blocks = _fourier_blocks()
    # each ±1 row has column L1 norm 1: uniform budget ε/4
    assert po.privacy(blocks, [0.25] * 4) == pytest.approx(1.0)
    cov = po.gls_cov(blocks, [2 / 0.25**2] * 4, Q)
    assert np.trace(cov) == pytest.approx(64.0)
    # non-uniform: by symmetry ε_∅ = ε_A = a, ε_B = ε_AB = 1/2 - a; brute force over a
    a = np.linspace(0.26, 0.34, 8001)
    tot = [np.trace(po.gls_cov(blocks, [2 / x**2, 2 / x**2, 2 / (0.5 - x) ** 2, 2 / (0.5 - x) ** 2], Q))
           for x in a[::80]]
    best = min(tot)
    closed = 2 * (2 * 0.75 ** (1 / 3) + 2 * 0.25 ** (1 / 3)) ** 3
    assert closed == pytest.approx(58.268, abs=1e-3)
    assert best == pytest.approx(closed, rel=1e-4)
    # the library: fourier strategy groups, cube-root budgets, GLS variances
    s = st.fourier(SIZES, [(0,), (0, 1)], [1, 1])
    assert [g.attrs for g in s.groups] == [(), (0,), (1,), (0, 1)]
    assert uniform_split(2 * s.direct_weight, s.sensitivity, 1).objective == pytest.approx(64)
    assert cube_root_split(2 * s.direct_weight, s.sensitivity, 1).objective == pytest.approx(closed)


def test_plans_match_explicit_gls(wl):
    # The planner reports GLS variances (never above the paper's direct recovery).
    alphas, fblocks = _fourier_blocks()
    for strategy, budgeting, direct in [("marginals", "uniform", 48.0), ("marginals", "optimal", 46.1679),
                                        ("fourier", "uniform", 64.0), ("fourier", "optimal", 58.268)]:
        p = plan_pure(wl, 1.0, strategy=strategy, budgeting=budgeting, variance_model="continuous")
        e = [float(b) for b in p.budgets]
        blocks = ([QA, QAB] if strategy == "marginals" else fblocks)
        cov = po.gls_cov(blocks, [2 / x**2 for x in e], Q)
        assert p.total_variance() == pytest.approx(np.trace(cov), rel=1e-9)
        assert p.total_variance() <= direct * (1 + 1e-5)
        assert po.privacy(blocks, e) <= 1.0
    # For S = Q, GLS recovery beats the paper's direct recovery: 32 (uniform) instead of 48.
    p = plan_pure(wl, 1.0, strategy="marginals", budgeting="uniform", variance_model="continuous")
    assert p.total_variance() == pytest.approx(32.0)
    # Fourier blocks are orthogonal: GLS = direct recovery, so the paper's 64 and 58.268 are exact.
    p = plan_pure(wl, 1.0, strategy="fourier", variance_model="continuous")
    assert p.total_variance() == pytest.approx(58.268, abs=2e-3)


def test_auto_reports_comparison_and_picks_smallest(wl):
    p = plan_pure(wl, 1.0, variance_model="continuous")
    done = [r for r in p.comparison if "total_variance" in r]
    assert {r["strategy"] for r in done} == {"identity", "marginals", "fourier", "clustering", "optimized"}
    assert p.total_variance() == pytest.approx(min(r["total_variance"] for r in done))
    # The best candidate measures only the AB marginal with all of ε (identity on the union
    # {A, B}): 4 AB cells of variance 2 plus 2 A cells of variance 2·2 = 16/ε² (hand count).
    assert p.total_variance() == pytest.approx(16.0, rel=1e-5)
