"""Secure measurement with discrete Gaussian noise (paper §5, Algorithm 3, Theorem 5.1)."""

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._linalg.kron import kron_apply
from dpmatrix._linalg.structured import IntegerCentring
from dpmatrix._measure.discrete import discrete_measure, gamma_squared, integer_outputs, round_plan
from dpmatrix._mechanisms.basis import identity_basis
from dpmatrix._mechanisms.residual import ResidualMechanism


def test_example_3():
    # Att1 with 4 values, A = {Att1}, σ = 2/3 (already rational: σ̄ = σ)
    mech = ResidualMechanism((0,), (identity_basis(4),), float(Fraction(4, 9)))
    # Y = 4 Sub⁺ and Ξ = Y R_A as printed in the paper
    Y = np.array([[1, 1, 1], [-3, 1, 1], [1, -3, 1], [1, 1, -3]])
    Xi_paper = np.array([[3, -1, -1, -1], [-1, 3, -1, -1], [-1, -1, 3, -1], [-1, -1, -1, 3]])
    np.testing.assert_array_equal(Y, 4 * oracle.sub_pinv(4))
    # our H is Ξ (the marginal on A is x itself): columns are H applied to unit tables
    H = np.stack([integer_outputs(mech, e) for e in np.eye(4, dtype=np.int64)], axis=1)
    np.testing.assert_array_equal(H, Xi_paper)
    assert H.dtype == np.int64
    g2 = gamma_squared(mech, Fraction(2, 3))
    assert g2 == Fraction(64, 9)
    sens2 = int(np.max(np.sum(H**2, axis=0)))
    assert sens2 == 12
    rho = Fraction(sens2) / (2 * g2)
    assert rho == Fraction(27, 32)
    assert mech.pcost / 2 == pytest.approx(float(rho), rel=1e-15)  # same as the continuous M_A


@pytest.mark.parametrize("sizes", [(2,), (3, 2), (2, 3, 2), (4, 3)])
def test_integer_mechanism_equivalent_to_algorithm_1(sizes):
    """Y⁺ Ξ = R_A (same mean) and Y⁺ γ² I Y⁺ᵀ = σ̄² Σ_A (same covariance), explicit matrices."""
    key = tuple(range(len(sizes)))
    s_bar = Fraction(7, 5)
    mech = ResidualMechanism(key, tuple(identity_basis(n) for n in sizes), float(s_bar**2))
    cells = int(np.prod(sizes))
    H = np.stack(
        [integer_outputs(mech, e.reshape(sizes)).ravel() for e in np.eye(cells, dtype=np.int64)], axis=1
    )
    Ypinv = oracle.kron_all([oracle.sub_matrix(n) / n for n in sizes])
    np.testing.assert_allclose(Ypinv @ H, oracle.residual_matrix(sizes, key), atol=1e-12)
    g2 = float(gamma_squared(mech, s_bar))
    np.testing.assert_allclose(
        g2 * Ypinv @ Ypinv.T, float(s_bar**2) * oracle.residual_cov(sizes, key), rtol=1e-12
    )
    # zCDP of the integer mechanism: max column norm² of Ξ over 2γ² equals p_A / (2σ̄²)
    sens2 = np.max(np.sum(H.astype(float) ** 2, axis=0))
    assert sens2 == math.prod(n * (n - 1) for n in sizes)
    assert sens2 / (2 * g2) == pytest.approx(mech.pcost / 2, rel=1e-12)


@pytest.mark.parametrize("sizes", [(), (3,), (4, 2, 3)])
def test_integer_centring_batched_equals_explicit_kron(sizes):
    """H = ⊗ (n_i I − 11ᵀ) as an explicit Kronecker matrix, applied to each table of a batch:
    the measuring loop's in-place multi-axis centring, the copying one and the structured
    operator one axis at a time (kron_apply) give the same integers exactly."""
    rng = np.random.default_rng(3)
    batch = rng.integers(-1000, 1000, size=(5,) + sizes, dtype=np.int64)
    H = np.ones((1, 1), dtype=np.int64)
    for n in sizes:
        H = np.kron(H, n * np.eye(n, dtype=np.int64) - np.ones((n, n), dtype=np.int64))
    want = np.stack([(H @ t.ravel()).reshape(sizes) for t in batch])
    copied = IntegerCentring.apply_last_axes(batch, len(sizes))
    np.testing.assert_array_equal(copied, want)
    assert copied is not batch and copied.dtype == np.int64
    own = batch.copy()
    got = IntegerCentring.apply_last_axes(own, len(sizes), inplace=True)
    np.testing.assert_array_equal(got, want)
    assert got is own and got.dtype == np.int64
    for j, t in enumerate(batch):
        one = kron_apply(tuple(IntegerCentring(n) for n in sizes), t) if sizes else t
        np.testing.assert_array_equal(one, want[j])
    big = batch.astype(object) * 10**20  # Python integers: the operator keeps them exact
    if sizes:
        np.testing.assert_array_equal(IntegerCentring(sizes[0]).apply(big[0], 0),
                                      np.tensordot(_explicit_centring(sizes[0]), big[0], axes=(1, 0)))


def _explicit_centring(n):
    return np.array([[n * (i == j) - 1 for j in range(n)] for i in range(n)], dtype=object)


def test_simulation_mean_and_covariance():
    sizes = (3, 2)
    mech = ResidualMechanism((0, 1), tuple(identity_basis(n) for n in sizes), float(Fraction(3, 2) ** 2))
    v = np.array([[5, 0], [2, 7], [1, 1]], dtype=np.int64)
    draws = np.stack(
        [discrete_measure(mech, v, Fraction(3, 2), np.random.default_rng(s)).ravel() for s in range(4000)]
    )
    truth = oracle.residual_matrix(sizes, (0, 1)) @ v.ravel().astype(float)
    cov = float(Fraction(3, 2) ** 2) * oracle.residual_cov(sizes, (0, 1))
    se = np.sqrt(np.diag(cov) / len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - truth) < 5 * se)
    emp = np.cov(draws.T)
    # discrete Gaussian variance ≤ γ² and, at γ = 9, within 1e-30 of it: compare to σ̄² Σ_A
    np.testing.assert_allclose(emp, cov, rtol=0.1, atol=0.1 * np.max(cov))


def test_plan_privacy_from_rounded_sigma_and_tolerance():
    dom = dm.Domain.from_sizes([4, 3, 5, 2])
    plan = dm.plan(dm.Workload.marginals(dom, 2, upto=True), rho=0.37)
    rounded, sbar = round_plan(plan, rel_var_tol=1e-4)
    rho_exact = Fraction(0)
    for i, key in enumerate(plan.closure.sets):
        s = sbar[i]
        assert s * s >= Fraction(float(plan.sigma2[i]))
        assert Fraction(float(rounded.sigma2[i])) <= s * s  # reported noise never above the real
        assert float(s * s) / plan.sigma2[i] - 1 <= 1e-4 + 1e-15
        mech = rounded.mechanism(key)
        # ρ_A = (squared L2 sensitivity of Ξ) / (2γ²), exactly
        sens2 = math.prod(n * (n - 1) for n in mech.shape)
        rho_exact += Fraction(sens2) / (2 * gamma_squared(mech, s))
    assert float(rho_exact) == pytest.approx(rounded.rho, rel=1e-12)
    assert rounded.rho >= float(rho_exact) * (1 - 1e-15)  # never reported below the true cost
    assert rounded.rho <= plan.rho and rounded.rho >= plan.rho / (1 + 1e-4)


def test_discrete_release_end_to_end_and_errors():
    dom = dm.Domain.from_sizes([3, 4, 2])
    rng = np.random.default_rng(0)
    df = pd.DataFrame({n: rng.integers(0, s, 200) for n, s in zip(dom.names, dom.sizes)})
    plan = dm.plan(dm.Workload.marginals(dom, 2), rho=1.0)
    from dpmatrix._measure.discrete import InsecureRandomnessWarning

    with pytest.warns(InsecureRandomnessWarning):
        meas = plan.measure(df, noise="discrete_gaussian", rng=np.random.default_rng(5))
    assert meas.noise == "discrete_gaussian"
    assert meas.plan.rho <= plan.rho
    t = meas.marginal(("a0", "a1"))
    truth = df.groupby(["a0", "a1"]).size().reindex(
        pd.MultiIndex.from_product([range(3), range(4)]), fill_value=0
    ).to_numpy()
    assert np.all(np.abs(t["estimate"].to_numpy() - truth) < 6 * t["std"].to_numpy())
    with pytest.raises(dm.DataError, match="noise must be"):
        plan.measure(df, noise="discrete_on_Hv")  # Example 2's naive replacement is not offered
    prefix = dm.plan(dm.Workload.marginals(dom, 1, query_types={"a1": "prefix"}), rho=1.0)
    with pytest.raises(dm.PlanError, match="real-valued"):
        prefix.measure(df, noise="discrete_gaussian")


def test_randomness_is_recorded_and_a_seeded_source_warns():
    from dpmatrix._measure.discrete import InsecureRandomnessWarning

    dom = dm.Domain.from_sizes([3, 2])
    df = pd.DataFrame({"a0": [0, 1, 2, 2], "a1": [0, 1, 1, 0]})
    plan = dm.plan(dm.Workload.marginals(dom, 1), rho=1.0)
    assert plan.measure(df, noise="discrete_gaussian").randomness == "os_csprng"
    with pytest.warns(InsecureRandomnessWarning, match="NOT secure"):
        m = plan.measure(df, noise="discrete_gaussian", rng=np.random.default_rng(0))
    assert m.randomness == "seeded_insecure"
    # a user's generator: reproducible by whoever has the seed
    assert plan.measure(df, rng=np.random.default_rng(0)).randomness == "seeded_insecure"
    assert plan.measure(df, noise="gaussian_float").randomness == "numpy_generator"


@pytest.mark.parametrize("rho", [0.01, 0.5, 2.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_zcdp_conversion_between_exact_gaussian_and_bun_steinke(rho, delta):
    from dpmatrix._privacy import epsilon_from_delta, epsilon_from_zcdp

    cks = epsilon_from_zcdp(rho, delta)
    exact_gaussian = epsilon_from_delta(delta, 2 * rho)  # the best any rho-zCDP Gaussian gets
    bun_steinke = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert exact_gaussian <= cks <= bun_steinke
    # the conversion is the infimum over alpha: a grid never beats the optimizer
    grid = [1 + 10**t for t in np.linspace(-4, 4, 2001)]
    best = min(a * rho + (a * math.log(1 - 1 / a) - math.log(a - 1) - math.log(delta)) / (a - 1) for a in grid)
    assert cks <= best + 1e-9 and cks >= best - 1e-3


def test_many_at_once_is_one_at_a_time_with_the_same_noise(monkeypatch):
    """discrete_measure_many (one sampler call per noise scale and shape) computes, for given
    noise draws, exactly what discrete_measure computes mechanism by mechanism: the noise is
    replaced by a fixed integer sequence, handed out in call order, in both runs."""
    from dpmatrix._measure import discrete as disc
    from dpmatrix._measure.discrete import discrete_measure_many

    mechs = [ResidualMechanism(key, tuple(identity_basis(n) for n in sizes), 1.0)
             for key, sizes in [((0, 1), (3, 2)), ((2,), (4,)), ((1, 2), (3, 2)), ((0,), (4,)), ((), ())]]
    rng = np.random.default_rng(9)
    tables = [rng.integers(0, 20, m.shape) for m in mechs]
    bars = [Fraction(3, 2), Fraction(3, 2), Fraction(3, 2), Fraction(5, 2), Fraction(3, 2)]
    stream = iter(range(10**6))
    calls = []

    def fake(gamma2, size, rng=None):
        calls.append((gamma2, size))
        return np.array([next(stream) % 7 - 3 for _ in range(size)], dtype=np.int64)

    monkeypatch.setattr(disc, "sample_discrete_gaussian", fake)
    got = discrete_measure_many(mechs, tables, bars)
    batched_calls = list(calls)
    # the same draws, one mechanism at a time, in the order the batched calls consumed them:
    # groups {0, 2} (3 x 2, same γ²), {1} (4), {3} (4, another σ̄), {4} (the total)
    stream = iter(range(10**6))
    calls.clear()
    want = {i: discrete_measure(mechs[i], tables[i], bars[i]) for i in [0, 2, 1, 3, 4]}
    assert len(batched_calls) == 4 and batched_calls[0] == (gamma_squared(mechs[0], bars[0]), 12)
    for i in range(len(mechs)):
        np.testing.assert_array_equal(got[i], want[i])


def test_many_at_once_has_the_distribution_of_algorithm_3():
    from dpmatrix._measure.discrete import discrete_measure_many

    sizes = (3, 2)
    mech = ResidualMechanism((0, 1), tuple(identity_basis(n) for n in sizes), float(Fraction(3, 2) ** 2))
    v = np.array([[5, 0], [2, 7], [1, 1]], dtype=np.int64)
    # 4000 copies of the same mechanism in one call: i.i.d. measurements
    draws = np.stack([w.ravel() for w in discrete_measure_many([mech] * 4000, [v] * 4000, [Fraction(3, 2)] * 4000,
                                                               np.random.default_rng(1))])
    truth = oracle.residual_matrix(sizes, (0, 1)) @ v.ravel().astype(float)
    cov = float(Fraction(3, 2) ** 2) * oracle.residual_cov(sizes, (0, 1))
    se = np.sqrt(np.diag(cov) / len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - truth) < 5 * se)
    np.testing.assert_allclose(np.cov(draws.T), cov, rtol=0.1, atol=0.1 * np.max(cov))
