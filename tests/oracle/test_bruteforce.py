"""dpmatrix against explicit matrices (tests/oracle.py, built from the paper's definitions).

Random small domains and workloads: the mechanism's privacy cost is the largest diagonal of
Bᵀ Σ⁻¹ B; reconstructed answers are the generalized-least-squares answers; the variance
formulas equal the explicit covariance; and a simulation agrees with the claimed variances.
"""


import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
import oracle
from dpmatrix.engines import project


def random_instance(seed: int):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    sizes = [int(s) for s in rng.integers(2, 5, size=k)]
    while np.prod(sizes) > 200:
        sizes[int(np.argmax(sizes))] -= 1
    dom = dm.Domain.from_sizes(sizes)
    n_marg = int(rng.integers(1, 4))
    sets = set()
    while len(sets) < n_marg:
        r = int(rng.integers(0, k + 1))
        sets.add(tuple(sorted(rng.choice(k, size=r, replace=False).tolist())))
    sets = sorted(sets)
    weights = rng.uniform(0.2, 3.0, size=len(sets))
    wk = dm.Workload(dom, sets, weights=weights)
    n = 60
    data = pd.DataFrame({name: rng.integers(0, s, size=n) for name, s in zip(dom.names, sizes)})
    return dom, wk, data, rng


def explicit(plan):
    sizes = plan.domain.sizes
    sets = list(plan.closure.sets)
    sigma2 = {s: float(v) for s, v in zip(sets, plan.sigma2)}
    B, Sigma = oracle.stack_mechanism(sizes, sets, sigma2)
    return sizes, sets, B, Sigma


def full_vector(data, sizes):
    x = np.zeros(int(np.prod(sizes)))
    idx = np.ravel_multi_index(tuple(data.iloc[:, i].to_numpy() for i in range(len(sizes))), sizes)
    np.add.at(x, idx, 1)
    return x


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("objective", ["sum_var", "max_var"])
def test_privacy_cost_is_largest_diagonal(seed, objective):
    dom, wk, data, rng = random_instance(seed)
    budget = float(rng.uniform(0.3, 3.0))
    plan = dm.plan(wk, pcost=budget, objective=objective)
    _, _, B, Sigma = explicit(plan)
    assert oracle.pcost(B, Sigma) == pytest.approx(plan.pcost, rel=1e-9)
    assert plan.pcost == pytest.approx(budget, rel=1e-6)
    assert plan.rho == pytest.approx(oracle.rho(oracle.pcost(B, Sigma)), rel=1e-9)
    assert plan.mu == pytest.approx(oracle.mu(oracle.pcost(B, Sigma)), rel=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_mechanisms_match_explicit_residual_matrices(seed):
    dom, wk, data, rng = random_instance(seed)
    plan = dm.plan(wk, pcost=1.0)
    sizes = dom.sizes
    x = full_vector(data, sizes)
    table = x.reshape(sizes)
    for key in plan.closure.sets:
        mech = plan.mechanism(key)
        v = project(table, tuple(range(len(sizes))), key)
        # signal part: R_A x
        out = mech.measure(v, np.zeros(mech.noise_shape)).ravel()
        np.testing.assert_allclose(out, oracle.residual_matrix(sizes, key) @ x, atol=1e-9)
        # noise part: σ H₂ H₂ᵀ σ = σ² Σ_A (columns of H₂ from unit noise vectors)
        m = int(np.prod(mech.noise_shape))
        H2 = np.stack(
            [mech.measure(np.zeros(mech.shape), e.reshape(mech.noise_shape)).ravel() for e in np.eye(m)],
            axis=1,
        ) / np.sqrt(mech.sigma2)
        np.testing.assert_allclose(H2 @ H2.T, oracle.residual_cov(sizes, key), atol=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_reconstruction_is_gls_and_variances_exact(seed):
    dom, wk, data, rng = random_instance(seed)
    plan = dm.plan(wk, pcost=1.0, objective="sum_var")
    sizes, sets, B, Sigma = explicit(plan)
    meas = plan.measure(data, rng=np.random.default_rng(seed))
    offsets = oracle.stack_offsets(sizes, sets)
    omega = np.zeros(B.shape[0])
    for s in sets:
        omega[offsets[s]] = meas.noisy[s].ravel()
    for key in sets:  # every closure member, not only the workload marginals
        Q = oracle.marginal_query(sizes, key)
        np.testing.assert_allclose(
            meas.estimate(key).ravel(), oracle.gls_estimate(Q, B, Sigma, omega), atol=1e-8
        )
        cov = oracle.gls_covariance(Q, B, Sigma)
        np.testing.assert_allclose(plan.variance(key).ravel(), np.diag(cov), rtol=1e-9)
        np.testing.assert_allclose(meas.covariance(key), cov, atol=1e-9)
    # the workload's total variance and RMSE
    total = sum(np.trace(oracle.gls_covariance(oracle.marginal_query(sizes, s), B, Sigma)) for s in wk.sets)
    assert plan.total_variance() == pytest.approx(total, rel=1e-9)


def test_simulation_agrees_with_claimed_variances():
    dom = dm.Domain.from_sizes([3, 2, 4])
    wk = dm.Workload(dom, [(0, 1), (1, 2), (0,)], weights=[1, 2, 1])
    rng = np.random.default_rng(11)
    data = pd.DataFrame({n: rng.integers(0, s, 40) for n, s in zip(dom.names, dom.sizes)})
    plan = dm.plan(wk, pcost=0.8)
    truth = {s: project(full_vector(data, dom.sizes).reshape(dom.sizes), (0, 1, 2), s) for s in wk.sets}
    draws = 3000
    sims = {s: np.empty((draws,) + truth[s].shape) for s in wk.sets}
    gen = np.random.default_rng(12)
    for t in range(draws):
        meas = plan.measure(data, rng=gen)
        for s in wk.sets:
            sims[s][t] = meas.estimate(s)
    for s in wk.sets:
        claimed = plan.variance(s)
        emp_var = sims[s].var(axis=0, ddof=1)
        # sample variance of a normal: relative sd sqrt(2/(N-1)) ≈ 2.6%; allow 5 sd
        np.testing.assert_allclose(emp_var, claimed, rtol=5 * np.sqrt(2 / (draws - 1)))
        # unbiased: mean within 5 standard errors of the truth
        se = np.sqrt(claimed / draws)
        assert np.all(np.abs(sims[s].mean(axis=0) - truth[s]) < 5 * se)
        # 95% intervals cover about 95% of the time
        z = 1.959963984540054
        cover = np.mean(np.abs(sims[s] - truth[s]) <= z * np.sqrt(claimed))
        assert 0.93 < cover < 0.97
