"""Classic strategies and their exact error (Li & Miklau Prop. 2.4, Fig. 4, Example 3.1, §5.2).

Units: the paper's error P(ε,δ)·‖A‖²_{1→2}·tr(WᵀW(AᵀA)⁻¹) is dpmatrix's total variance at
pcost = 1/P (σ² = ‖A‖²_{1→2}/pcost); the paper's numbers use P = 1, i.e. pcost = 1 here.
Expected values: the paper, hand derivations, or numpy pinv on explicit matrices built here.
"""

import math

import numpy as np
import pytest

from dpmatrix._linalg.strategies import (
    evaluate,
    fourier,
    haar,
    hierarchical,
    identity,
    kron,
    quarter_root,
)
from dpmatrix.errors import PlanError, WorkloadError


def all_range(n):
    return np.array([[1.0 if a <= j <= b else 0.0 for j in range(n)] for a in range(n) for b in range(a, n)])


def all_range_gram(n):
    r = np.arange(n)
    return (np.minimum.outer(r, r) + 1.0) * (n - np.maximum.outer(r, r))


def brute_error(W, A, pcost=1.0):
    """Prop. 2.4 straight from the definition (pseudo-inverse)."""
    s2 = np.max(np.sum(A * A, axis=0))
    V = W @ np.linalg.pinv(A.T @ A) @ W.T
    return s2 / pcost * np.diag(V)


def svdb(G):
    lam = np.clip(np.linalg.eigvalsh(G), 0, None)
    return np.sqrt(lam).sum() ** 2 / G.shape[0]


def test_fig4_matrices():
    H = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0],
                  [0, 0, 0, 1]], float)
    Y = np.array([[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]], float)
    np.testing.assert_array_equal(hierarchical(4), H)
    np.testing.assert_array_equal(haar(4), Y)
    assert hierarchical(9, 3).shape == (13, 9)  # 1 + 3 + 9 nodes
    assert hierarchical(5).shape[0] == 9  # [0,5) → [0,2),[2,5) → …: 1 + 2 + 4 + 2 nodes
    np.testing.assert_array_equal(identity(3), np.eye(3))


def test_allrange4_errors_match_the_paper():
    W = all_range(4)
    assert evaluate(W, "identity").total == pytest.approx(20.0)
    assert evaluate(W, "workload").total == pytest.approx(24.0)
    assert evaluate(W, "hierarchical").total == pytest.approx(20.857143, abs=5e-7)
    assert evaluate(W, "haar").total == pytest.approx(18.0)
    for name in ("identity", "workload", "hierarchical", "haar", "fourier", "quarter_root"):
        prof = evaluate(W, name)
        A = {"identity": np.eye(4), "workload": W, "hierarchical": hierarchical(4), "haar": haar(4),
             "fourier": fourier(4, W), "quarter_root": quarter_root(W)}[name]
        expected = brute_error(W, A)
        np.testing.assert_allclose(prof.query_variances, expected, rtol=1e-10)
        assert prof.total == pytest.approx(expected.sum(), rel=1e-10)
        assert prof.max_variance == pytest.approx(expected.max(), rel=1e-10)
        assert prof.sensitivity2 == pytest.approx(np.max(np.diag(A.T @ A)))  # Gaussian privacy


def test_pcost_scales_the_noise():
    W = all_range(5)
    assert evaluate(W, "haar", pcost=4.0).total == pytest.approx(evaluate(W, "haar").total / 4)
    np.testing.assert_allclose(evaluate(W, haar(5), pcost=2.0).query_variances,
                               brute_error(W, haar(5), pcost=2.0))


def test_quarter_root_error_is_bound_times_diagonal_spread():
    # A = (WᵀW)^{1/4}: error = max diag(G^{1/2}) · tr(G^{1/2}); bound = mean diag · tr
    for W in (all_range(6), np.array([[1., 2, 0], [0, 1, 1], [3, 0, 1]])):
        G = W.T @ W
        lam, V = np.linalg.eigh(G)
        R = (V * np.sqrt(np.clip(lam, 0, None))) @ V.T
        expected = np.max(np.diag(R)) * np.trace(R)
        assert evaluate(W, "quarter_root").total == pytest.approx(expected, rel=1e-9)
        assert expected >= svdb(G) * (1 - 1e-12)


def test_quarter_root_reaches_the_bound_on_a_variable_agnostic_workload():
    # AllPredicate(n) (App. C): WᵀW = 2^{n-2}(I + J) has a constant-diagonal square root
    n = 6
    W = np.array([[(k >> j) & 1 for j in range(n)] for k in range(2 ** n)], float)
    assert evaluate(W, "quarter_root").total == pytest.approx(svdb(W.T @ W), rel=1e-10)


def test_fourier_full_basis_is_identity_equivalent_and_restricted_basis_is_smaller():
    W = all_range(6)
    F = fourier(6)
    np.testing.assert_allclose(F @ F.T, np.eye(6), atol=1e-12)
    assert evaluate(W, F).total == pytest.approx(evaluate(W, "identity").total)
    low = np.array([[1.0] * 8, [math.cos(2 * math.pi * t / 8) for t in range(8)]])
    Fr = fourier(8, low)
    assert Fr.shape[0] == 2
    assert evaluate(low, Fr).total == pytest.approx(brute_error(low, Fr).sum())


def test_gram_only_totals_match_explicit():
    W = all_range(16)
    for name in ("identity", "hierarchical", "haar", "quarter_root"):
        assert evaluate(W.T @ W, name, gram=True).total == pytest.approx(evaluate(W, name).total, rel=1e-10)


def test_kron_strategy_for_two_dimensional_ranges():
    W = np.kron(all_range(3), all_range(4))
    A = kron(haar(3), haar(4))
    assert evaluate(W, A).total == pytest.approx(brute_error(W, A).sum(), rel=1e-10)


def test_paper_example_3_1_and_section_5_2_ratios():
    # AllRange(1024), errors relative to the singular value bound. §5.2 prints wavelet 1.53 and
    # hierarchical 1.78 — reproduced. Example 3.1 prints 1.84 / 2.14 / identity 33.75 /
    # workload 50.58: each is 1.203× ours because its printed bound (5.32e6) is 1.203× below
    # (Σσ)²/n = 6.4007e6 (see tests/linalg/test_spectra.py); the strategy errors themselves agree.
    n = 1024
    G = all_range_gram(n)
    b = svdb(G)
    haar_r = evaluate(G, "haar", gram=True).total / b
    hier_r = evaluate(G, "hierarchical", gram=True).total / b
    ident_r = evaluate(G, "identity", gram=True).total / b
    work_r = np.max(np.diag(G)) * n / b  # A = W: ‖W‖² · tr(G G⁻¹) = max diag G · n
    assert round(haar_r, 2) == 1.53
    assert round(hier_r, 2) == 1.78
    for ours, printed in ((ident_r, 33.75), (hier_r, 2.14), (haar_r, 1.84), (work_r, 50.58)):
        assert printed / ours == pytest.approx(6.4007e6 / 5.32e6, rel=5e-3)


def test_paper_example_3_1_two_dimensional_ratios():
    # AllRange(32, 32): the paper prints workload 17.25, identity 8.15, hierarchical 2.92,
    # wavelet 2.23. The first three are reproduced with Kronecker strategies. Our Kronecker Haar
    # (the 1-D Fig. 4 wavelet on each axis) gives 1.82, not 2.23: the paper does not give its
    # 2-D wavelet matrix; Privelet's multi-dimensional transform weights its coefficients for
    # ε-DP, which is not column-uniform under L2 — we report what the stated matrix achieves.
    G = np.kron(all_range_gram(32), all_range_gram(32))
    b = svdb(G)
    assert b == pytest.approx(4.39e6, rel=1e-3)
    assert round(evaluate(G, "identity", gram=True).total / b, 2) == 8.15
    assert round(np.max(np.diag(G)) * 1024 / b, 2) == 17.25
    assert round(evaluate(G, kron(hierarchical(32), hierarchical(32)), gram=True).total / b, 2) == 2.92
    assert round(evaluate(G, kron(haar(32), haar(32)), gram=True).total / b, 2) == 1.82


def test_strategy_that_cannot_answer_names_itself():
    W = all_range(4)
    with pytest.raises(PlanError, match="'top-two'.*row space"):
        evaluate(W, hierarchical(4)[:3], name="top-two")
    with pytest.raises(PlanError, match="row space"):
        evaluate(W.T @ W, hierarchical(4)[:3], gram=True, name="top-two")
    with pytest.raises(PlanError, match="unknown strategy"):
        evaluate(W, "nope")


def test_zero_or_malformed_workload_is_rejected():
    with pytest.raises(WorkloadError, match="zero"):
        evaluate(np.zeros((2, 4)), "identity")
    with pytest.raises(PlanError, match="4 matrix"):
        evaluate(all_range(4), np.eye(3))
    with pytest.raises(PlanError):
        evaluate(all_range(4), "identity", pcost=0.0)
