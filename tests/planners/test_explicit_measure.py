"""Measuring an explicit-strategy plan (``dm.evaluate``) through the one measurement path.

Expected values are computed here from explicit matrices: the true marginals from pandas counts,
the variances from ``σ² diag(P (AᵀA)⁺ Pᵀ)`` with ``numpy.linalg.pinv`` (``P`` the 0/1 map from
the cells of (a, b) to the asked marginal, built by hand), the privacy cost from
``max diag(AᵀΣ⁻¹A)`` with ``A`` read back column by column from the mechanism's own linear map.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix.errors import PlanError

DOM = dm.Domain({"a": 3, "b": 2})
WK = dm.Workload(DOM, [("a",), ("a", "b")])
DF = pd.DataFrame({"a": [0, 0, 1, 2, 2, 2, 1], "b": [0, 1, 1, 0, 1, 1, 0]})


def _plan():
    return dm.evaluate(WK, "hierarchical", pcost=1)


def _true(key):
    counts = DF.groupby(list(key)).size()
    full = pd.MultiIndex.from_product([range(DOM.sizes[DOM.names.index(k)]) for k in key]) \
        if len(key) > 1 else pd.Index(range(DOM.sizes[DOM.names.index(key[0])]))
    return counts.reindex(full, fill_value=0).to_numpy(dtype=float)


def _P(key):
    """0/1 map from the 6 cells of (a, b) (row-major) to the cells of the marginal on key."""
    if key == ("a", "b"):
        return np.eye(6)
    if key == ("a",):
        return np.kron(np.eye(3), np.ones((1, 2)))
    return np.kron(np.ones((1, 3)), np.eye(2))  # ("b",)


def _variance(plan, key):
    A = np.asarray(plan.strategy)
    P = _P(key)
    return plan.sigma2 * np.diag(P @ np.linalg.pinv(A.T @ A) @ P.T)


def test_gaussian_estimates_are_unbiased_with_the_plans_variances():
    plan = _plan()
    gen = np.random.default_rng(11)
    reps = 600
    draws = {k: [] for k in (("a",), ("b",), ("a", "b"))}
    for _ in range(reps):
        meas = plan.measure(DF, rng=gen)
        for k, d in draws.items():
            d.append(meas.marginal(k)["estimate"].to_numpy())
    assert meas.noise == "gaussian"
    for k, d in draws.items():
        d = np.array(d)
        var = _variance(plan, k)
        np.testing.assert_allclose(meas.marginal(k)["variance"], var, rtol=1e-9)
        # mean within 4.5 standard errors; sample variance within 25% (sd of the ratio ≈ 0.058)
        assert np.all(np.abs(d.mean(axis=0) - _true(k)) < 4.5 * np.sqrt(var / reps))
        np.testing.assert_allclose(d.var(axis=0, ddof=1) / var, 1.0, atol=0.25)
    # the workload's entries: the (a, b) cells, answered the same way
    ans = meas.answer(("a", "b"))
    np.testing.assert_allclose(ans["estimate"], meas.marginal(("a", "b"))["estimate"], atol=1e-12)
    q = meas.query_vector(("a", "b"), np.array([1.0, 1, 0, 0, 0, 1]))
    row = np.array([1.0, 1, 0, 0, 0, 1])
    assert q.variance == pytest.approx(plan.sigma2 * row @ np.linalg.pinv(plan.strategy.T @ plan.strategy) @ row)


def _matrix_of(mech, n):
    """The mechanism's linear map read back on the unit count tables."""
    return np.column_stack([mech.apply(np.eye(n)[j].reshape(3, 2)) for j in range(n)])


def test_privacy_cost_of_the_measured_mechanism():
    plan = _plan()
    measured, (m,) = plan.mechanisms(noise="gaussian")
    A = _matrix_of(m, 6)
    pcost = np.max(np.diag(A.T @ A / m.scale))  # Σ = σ² I
    assert measured.pcost == pytest.approx(pcost, rel=1e-12) and pcost == pytest.approx(1.0, rel=1e-12)
    meas = plan.measure(DF, rng=np.random.default_rng(0))
    assert meas.plan.pcost == pytest.approx(pcost, rel=1e-12)


def test_secure_default_is_the_lattice_sampler_and_rescored():
    plan = _plan()
    meas = plan.measure(DF)  # no generator: secure sampler
    assert (meas.noise, meas.randomness) == ("lattice_gaussian", "os_csprng")
    measured, (m,) = plan.mechanisms()
    # the re-scored plan reports the lattice's exact ρ: pcost = ‖A‖²_{1→2}/σ²_new ≥ 2ρ (2 ulps)
    colmax = float(np.max(np.sum(plan.strategy**2, axis=0)))
    assert colmax / measured.sigma2 >= 2 * float(m.lattice.rho)
    assert measured.pcost == pytest.approx(2 * float(m.lattice.rho), rel=1e-12)
    assert 1 - 1e-3 < measured.pcost <= 1.0  # the lattice spends at most the planned budget
    # unbiased (a small seeded Monte Carlo; the generator is an insecure byte source here)
    gen = np.random.default_rng(5)
    reps = 150
    with pytest.warns(InsecureRandomnessWarning):
        est = np.array([plan.measure(DF, rng=gen, noise="lattice_gaussian").marginal("a")["estimate"].to_numpy()
                        for _ in range(reps)])
    assert np.all(np.abs(est.mean(axis=0) - _true(("a",))) < 4.5 * np.sqrt(_variance(plan, ("a",)) / reps))


def test_other_noises_are_refused():
    with pytest.raises(PlanError, match="lattice_gaussian"):
        _plan().mechanisms(noise="discrete_gaussian")


def test_release_round_trip(tmp_path):
    plan = _plan()
    meas = plan.measure(DF, rng=np.random.default_rng(2))
    dm.write_release(meas, tmp_path / "rel")
    rel = dm.load_release(tmp_path / "rel")
    back = rel.measurements
    for k in (("a",), ("a", "b")):
        pd.testing.assert_frame_equal(back.marginal(k), meas.marginal(k))
    assert back.plan.pcost == pytest.approx(meas.plan.pcost, rel=1e-12)
