"""The coarse-to-fine schedule of the max-variance p-Identity optimizer (rows constant on blocks
of cells in the early surrogate stages), forced on a small domain with ``coarse_from=1``.

Expected numbers come from explicit dense matrices built here: the query rows written out with
numpy loops, ``A = [I; Θ] D`` column-normalized by hand, and ``max_q q (AᵀA)⁻¹ qᵀ`` with
``np.linalg.inv``."""

import numpy as np
import pytest

from dpmatrix._solvers.pidentity import (
    MAX_STAGES_COARSE,
    IntervalQueries,
    optimize_pidentity_max,
    tree_theta,
)


def explicit_rows(kind, n):
    rows = []
    for a in range(n):
        for b in range(a, n):
            if kind == "range" or a == 0:
                w = np.zeros(n)
                for j in range(a, b + 1):
                    w[j] = 1.0
                rows.append((a, b, w))
    return rows


def explicit_max(theta, w):
    n = theta.shape[1]
    a = np.vstack([np.eye(n), theta])
    a = a / np.abs(a).sum(axis=0)          # every column of L1 norm 1
    cov = np.linalg.inv(a.T @ a)
    return max(float(q @ cov @ q) for q in w)


@pytest.mark.parametrize("kind", ["prefix", "range"])
def test_coarse_schedule_max_is_the_explicit_max(kind):
    n = 24                                   # not a multiple of the block (4 divides, 5 does not)
    rows = explicit_rows(kind, n)
    q = IntervalQueries(n, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
    w = np.array([r[2] for r in rows])
    start = tree_theta(n, 4)
    stages = ((8.0, 5, 15), (32.0, 4, 15), (128.0, 1, 20))
    r = optimize_pidentity_max(q, [("tree:4", start)], stages=stages)
    # the coarse stages really ran (their candidates are in the log) ...
    labels = [lab for lab, _ in r.starts]
    assert "tree:4>max:t=8/b5" in labels and "tree:4>max:t=32/b4" in labels
    # ... and the reported loss is the explicit dense maximum of the returned Θ
    assert r.loss == pytest.approx(explicit_max(r.theta, w), rel=1e-9)
    assert r.loss <= explicit_max(start, w) * (1 + 1e-12)
    assert r.loss < n                       # beats the cells (max variance n on the full range)
    # every logged candidate's value is the best so far or worse: the result is the minimum
    assert r.loss == pytest.approx(min(v for _, v in r.starts), rel=1e-12)


def test_default_schedule_forced_on_small_domain_matches_explicit_and_is_deterministic():
    n = 20
    rows = explicit_rows("range", n)
    q = IntervalQueries(n, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
    w = np.array([r[2] for r in rows])
    r1 = optimize_pidentity_max(q, [("tree:4", tree_theta(n, 4))], coarse_from=1)
    r2 = optimize_pidentity_max(q, [("tree:4", tree_theta(n, 4))], coarse_from=1)
    assert any(lab.endswith("/b4") for lab, _ in r1.starts)   # MAX_STAGES_COARSE was used
    assert MAX_STAGES_COARSE[0][1] == 4
    assert r1.loss == pytest.approx(explicit_max(r1.theta, w), rel=1e-9)
    np.testing.assert_array_equal(r1.theta, r2.theta)
    assert r1.starts == r2.starts
    # the fine schedule (not forced) logs no block stages
    r3 = optimize_pidentity_max(q, [("tree:4", tree_theta(n, 4))])
    assert not any("/b" in lab for lab, _ in r3.starts)
    assert r3.loss == pytest.approx(explicit_max(r3.theta, w), rel=1e-9)
