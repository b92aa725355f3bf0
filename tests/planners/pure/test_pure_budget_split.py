"""Budget splits: cube-root and square-root rules against brute force and the convex program (1)-(3)."""

import numpy as np
import pure_oracle as po
import pytest

from dpmatrix._solvers.budget_split import (
    convex_budget_split,
    cube_root_split,
    square_root_split,
    uniform_split,
)
from dpmatrix.errors import BudgetError, PlanError
from dpmatrix.planners._pure import strategies as st

SIZES = (3, 2, 4)
SETS = [(0, 1), (1, 2), (2,)]


def test_convex_program_equals_cube_root_for_groupable_residual_blocks():
    """Fourier-type blocks with unequal column norms C_g = Π(n_i - 1): Theorem 3.4 on an explicit
    strategy (per-row budgets, one constraint per column)."""
    s = st.fourier(SIZES, SETS, [1.0, 1.0, 1.0])
    blocks = [po.residual_matrix(SIZES, g.attrs) for g in s.groups]
    assert [np.abs(b).sum(axis=0).max() for b in blocks] == list(s.sensitivity)
    b_rows = np.concatenate([np.full(b.shape[0], 2 * w / b.shape[0]) for b, w in zip(blocks, s.direct_weight)])
    closed = cube_root_split(2 * s.direct_weight, s.sensitivity, 1.0)
    conv = convex_budget_split(np.vstack(blocks), b_rows, 1.0)
    assert conv.objective == pytest.approx(closed.objective, rel=1e-5)
    per_row = np.concatenate([np.full(b.shape[0], e) for b, e in zip(blocks, closed.eta)])
    assert conv.eta == pytest.approx(per_row, rel=1e-3, abs=1e-6)
    assert po.privacy(blocks, closed.eta) == pytest.approx(1.0)
    # the closed-form budgets' objective, recomputed by hand
    assert (b_rows / per_row**2).sum() == pytest.approx(closed.objective, rel=1e-9)


def test_convex_program_beats_equal_budgets_when_weights_differ():
    # Every column is covered by two of the three rows; the program's per-row budgets are
    # checked against a brute-force grid (given x, y the best third budget is min(1-x, 1-y)).
    s_abs = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=float)
    b = np.array([1.0, 8.0, 1.0])
    conv = convex_budget_split(s_abs, b, 1.0)
    assert (s_abs.T @ conv.eta).max() <= 1 + 1e-9
    g = np.linspace(0.001, 0.999, 999)
    x, y = np.meshgrid(g, g)
    z = np.minimum(1 - x, 1 - y)
    ok = (x + y <= 1) & (z > 0)
    brute = (b[0] / x[ok] ** 2 + b[1] / y[ok] ** 2 + b[2] / z[ok] ** 2).min()
    assert conv.objective <= brute + 1e-6
    assert conv.objective == pytest.approx(brute, rel=1e-3)
    assert conv.objective < uniform_split(b, [2.0, 2.0, 2.0], 1.0).objective


def test_square_root_rule_brute_force():
    s, c = np.array([1.0, 4.0, 9.0]), np.array([1.0, 2.0, 1.0])
    r = square_root_split(s, c, 2.0)
    assert ((c * r.eta) ** 2).sum() == pytest.approx(4.0)
    assert r.objective == pytest.approx((s / r.eta**2).sum())
    rng = np.random.default_rng(0)
    for _ in range(2000):  # random feasible points on the L2 sphere are never better
        u = np.abs(rng.normal(size=3)) + 1e-3
        eta = 2.0 * u / np.sqrt(((c * u) ** 2).sum())
        assert (s / eta**2).sum() >= r.objective * (1 - 1e-12)


def test_cube_root_brute_force_unequal_norms():
    s, c = np.array([3.0, 1.0, 5.0]), np.array([1.0, 4.0, 2.0])
    r = cube_root_split(s, c, 1.5)
    assert (c * r.eta).sum() == pytest.approx(1.5)
    rng = np.random.default_rng(1)
    for _ in range(2000):
        u = np.abs(rng.normal(size=3)) + 1e-3
        eta = 1.5 * u / (c * u).sum()
        assert (s / eta**2).sum() >= r.objective * (1 - 1e-12)


def test_bad_input():
    with pytest.raises(BudgetError):
        cube_root_split([1.0], [1.0], 0.0)
    with pytest.raises(PlanError):
        cube_root_split([1.0, 2.0], [1.0], 1.0)
    with pytest.raises(PlanError):
        cube_root_split([0.0], [1.0], 1.0)
