"""objective="max" for the fixed pure-DP strategies: the convex min-max budget split checked
against brute force (grids over the budget simplex), hand derivations, and explicit GLS."""

import itertools

import numpy as np
import pure_oracle as po
import pytest

from dpmatrix._domain import Domain
from dpmatrix._solvers.max_variance_split import (
    cube_root_lower_bound,
    max_variance_split,
)
from dpmatrix._workload import Workload
from dpmatrix.errors import PlanError
from dpmatrix.planners._pure import plan_pure


def _simplex_grid(sens, eps, steps):
    """All budget vectors with Σ C_g η_g = ε on a grid of ``steps`` parts (η_g > 0)."""
    k = len(sens)
    for parts in itertools.product(range(1, steps), repeat=k - 1):
        if sum(parts) >= steps:
            continue
        share = np.array(list(parts) + [steps - sum(parts)], dtype=float) / steps
        yield eps * share / np.asarray(sens, dtype=float)


@pytest.mark.parametrize("seed", range(6))
def test_split_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    k = 2 + seed % 2
    c = rng.random((4, k)) * (rng.random((4, k)) < 0.7)
    c[np.arange(4), rng.integers(0, k, 4)] += 0.2  # every query uses some group
    sens = rng.integers(1, 4, k).astype(float)
    eps = 0.8
    r = max_variance_split(c, sens, eps)
    assert float(sens @ r.eta) <= eps * (1 + 1e-12)
    direct = (c / r.eta**2).sum(axis=1).max()
    assert r.objective == pytest.approx(direct, rel=1e-12)
    brute = min((c / e**2).sum(axis=1).max() for e in _simplex_grid(sens, eps, 400 if k == 2 else 120))
    # the grid cannot beat the optimum; the certified bound cannot exceed any feasible value
    assert r.objective <= brute * (1 + 1e-6)
    assert r.lower_bound <= brute * (1 + 1e-9)
    assert r.lower_bound >= r.objective * (1 - 1e-6)  # duality gap closed
    assert brute <= r.objective * 1.02  # and the grid gets close to it


def test_disjoint_queries_closed_form():
    # c diagonal: equalize c_g/η_g² = t, Σ C_g √(c_g/t) = ε  ⇒  t = (Σ C_g √c_g)² / ε²
    c = np.diag([2.0, 8.0, 18.0])
    sens = np.array([1.0, 2.0, 1.0])
    r = max_variance_split(c, sens, 0.5)
    t = (1 * np.sqrt(2) + 2 * np.sqrt(8) + 1 * np.sqrt(18)) ** 2 / 0.25
    assert r.objective == pytest.approx(t, rel=1e-6)
    assert r.eta == pytest.approx(np.sqrt(np.diag(c) / t), rel=1e-5)


def test_single_query_is_the_cube_root_rule():
    # one query: min Σ c_g/η_g² under Σ C_g η_g = ε is Corollary 3.3's (Σ (c_g C_g²)^{1/3})³/ε²
    c = np.array([[1.0, 4.0, 0.5]])
    sens = np.array([1.0, 3.0, 2.0])
    r = max_variance_split(c, sens, 1.3)
    assert r.objective == pytest.approx(np.cbrt(c[0] * sens**2).sum() ** 3 / 1.3**2, rel=1e-6)
    assert cube_root_lower_bound(c, sens, 1.3, [1.0]) == pytest.approx(r.objective, rel=1e-6)


def test_query_without_group_is_refused():
    with pytest.raises(PlanError, match="no coefficient"):
        max_variance_split([[1.0, 0.0], [0.0, 0.0]], [1.0, 1.0], 1.0)


def test_marginals_max_gives_equal_budgets_and_beats_sum():
    # Figure 1 (A, B, C binary; marginals A and AB), S = Q: direct variances 2/ε_A² and
    # 2/ε_AB² are equalized by ε_A = ε_AB = ε/2 (max 8/ε²); the sum rule gives ε_A = 0.4425ε
    # (max 2/0.4425² = 10.21/ε² on A's direct recovery).
    dom = Domain({"A": 2, "B": 2, "C": 2})
    wl = Workload(dom, [("A",), ("A", "B")])
    pm = plan_pure(wl, 1.0, strategy="marginals", objective="max", variance_model="continuous")
    ps = plan_pure(wl, 1.0, strategy="marginals", objective="sum", variance_model="continuous")
    assert [float(b) for b in pm.budgets] == pytest.approx([0.5, 0.5], abs=1e-5)
    assert pm.max_variance() <= 8.0 * (1 + 1e-5)  # GLS never worse than the direct recovery
    assert pm.max_variance() < ps.max_variance()


def test_fourier_max_against_explicit_gls_grid():
    # fourier: each residual block alone in its subspace, so GLS = direct recovery and the
    # plan's max variance must be the grid minimum of the explicit GLS max cell variance.
    sizes = (2, 3)
    dom = Domain.from_sizes(sizes)
    sets = [(0,), (0, 1)]
    wl = Workload(dom, [("a0",), ("a0", "a1")])
    eps = 1.0
    p = plan_pure(wl, eps, strategy="fourier", objective="max", variance_model="continuous")
    blocks = [po.residual_matrix(sizes, g.attrs) for g in p.groups]
    sens = [po.privacy([b], [1.0]) for b in blocks]
    assert po.privacy(blocks, [float(b) for b in p.budgets]) <= eps + 1e-12
    qs = [po.marginal_matrix(sizes, s) for s in sets]

    def max_var(e):
        nv = [2.0 / x**2 for x in e]
        return max(np.diag(po.gls_cov(blocks, nv, q)).max() for q in qs)

    ours = max_var([float(b) for b in p.budgets])
    assert p.max_variance() == pytest.approx(ours, rel=1e-9)
    brute = min(max_var(e) for e in _simplex_grid(sens, eps, 40))
    assert ours <= brute * (1 + 1e-4)
    assert brute <= ours * 1.05


@pytest.mark.parametrize("strategy", ["identity", "marginals", "fourier", "clustering"])
def test_max_plans_are_private_and_no_worse_than_sum(strategy):
    sizes = (2, 3, 2)
    dom = Domain.from_sizes(sizes)
    wl = Workload(dom, [("a0",), ("a1", "a2"), ("a0", "a1")], weights=[1.0, 2.0, 0.5])
    pm = plan_pure(wl, 0.7, strategy=strategy, objective="max", variance_model="continuous")
    ps = plan_pure(wl, 0.7, strategy=strategy, objective="sum", variance_model="continuous")
    blocks = [po.marginal_matrix(sizes, g.attrs) if g.kind == "marginal"
              else po.residual_matrix(sizes, g.attrs) for g in pm.groups]
    assert po.privacy(blocks, [float(b) for b in pm.budgets]) <= 0.7 + 1e-12
    assert float(pm.privacy_epsilon()) <= 0.7
    # the min-max split optimizes the direct recovery and GLS can only lower it; on this
    # workload that keeps it below the sum split's GLS max (not a theorem in general)
    assert pm.max_variance() <= ps.max_variance() * (1 + 1e-9)
