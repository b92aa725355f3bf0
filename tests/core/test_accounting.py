"""Statements never exceed the ask: for every noise kind a release draws and every budget form,
the stated guarantee (the manifest's ``privacy`` object) is at most what was asked; and the
curves behind the statements are checked against independent brute-force computations.

Independent references written here:

* the (ε, δ) curve of the discrete Gaussian: the hockey-stick divergence
  ``δ(ε) = Σ_x max(0, P(x) − e^ε Q(x))`` of the two shifted pmfs, summed in 60-digit decimal
  arithmetic over the integers ``|x| ≤ Δ + 60σ`` (the mass left out is below e^{-1800});
* the zCDP conversion (Canonne, Kamath, Steinke 2020, Corollary 13) minimised on a grid of α;
* the analytic Gaussian curve from scipy's normal cdf (Balle & Wang 2018, Theorem 8).
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import dpmatrix as dm
from dpmatrix._accounting import (
    discrete_gaussian_delta,
    discrete_gaussian_epsilon,
    epsilon_for,
    gdp_holds,
)
from dpmatrix._statement import privacy_summary
from dpmatrix.errors import BudgetError

DATA = Path(dm.__file__).parent / "data"
REL = 1e-9  # the relative tolerance of "stated ≤ asked"

RHOS = (0.01, 0.1, 0.5, 1.0, 5.0, 20.0)
EPS_DELTAS = [(e, d) for e in (0.1, 1.0, 5.0, 10.0, 50.0) for d in (1e-5, 1e-9)]
MUS = (0.5, 1.0, 3.0)
PURE_EPS = (0.1, 1.0, 10.0)
NOISES = ("gaussian", "discrete_gaussian", "lattice_gaussian")


# -- independent references -----------------------------------------------------------------------
def brute_delta(epsilon: float, sigma2: float, shifts: tuple[int, ...]) -> Decimal:
    """δ(ε) of ``N_Z(0, σ² I)`` against ``N_Z(Δ, σ² I)`` for one or two coordinates, by summing
    ``max(0, P(x) − e^ε Q(x))`` over the truncated integer grid in decimal arithmetic."""
    getcontext().prec = 60
    s2 = Decimal(repr(sigma2))
    K = max(shifts) + int(60 * math.sqrt(sigma2)) + 2
    xs = range(-K, K + 1)
    w = {x: (-(Decimal(x) ** 2) / (2 * s2)).exp() for x in range(-K - max(shifts), K + 1)}
    z = sum(w[x] for x in xs)
    ee = Decimal(repr(epsilon)).exp()
    if len(shifts) == 1:
        (d,) = shifts
        return sum(max(Decimal(0), (w[x] - ee * w[x - d]) / z) for x in xs)
    d1, d2 = shifts
    total = Decimal(0)
    for x in xs:
        for y in xs:
            v = w[x] * w[y] - ee * w[x - d1] * w[y - d2]
            if v > 0:
                total += v
    return total / (z * z)


def cks_epsilon(rho: float, delta: float) -> float:
    """Corollary 13 of Canonne-Kamath-Steinke on a grid of the Rényi order α (each α valid)."""
    a = 1 + np.logspace(-4, 6, 1_000_000)
    e = a * rho + (a * np.log1p(-1 / a) - np.log(a - 1) - math.log(delta)) / (a - 1)
    return float(e.min())


def analytic_epsilon(pcost: float, delta: float) -> float:
    mu = math.sqrt(pcost)
    lo, hi = 0.0, 500.0
    for _ in range(200):
        eps = (lo + hi) / 2
        d = norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)
        lo, hi = (eps, hi) if d > delta else (lo, eps)
    return hi


# -- the discrete Gaussian's exact curve (Theorem 7) against brute force -------------------------
@pytest.mark.parametrize("sigma2, sens", [(0.5, 1), (1.0, 1), (4.0, 1), (4.0, 3), (30.25, 2), (100.0, 1)])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 3.0])
def test_discrete_gaussian_curve_equals_brute_force(sigma2, sens, eps):
    want = float(brute_delta(eps, sigma2, (sens,)))
    got = discrete_gaussian_delta(eps, sigma2, sens)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_discrete_gaussian_epsilon_inverts_the_curve():
    for sigma2, d in ((4.0, 1e-5), (25.0, 1e-9), (400.0, 1e-9)):
        e = discrete_gaussian_epsilon(d, sigma2)
        assert float(brute_delta(e, sigma2, (1,))) <= d * (1 + 1e-9)
        assert float(brute_delta(e * (1 - 1e-6), sigma2, (1,))) > d


@pytest.mark.parametrize("sigma2, sens", [(1.0, 1), (4.0, 1), (9.0, 2), (100.0, 1)])
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_zcdp_statement_holds_for_one_discrete_gaussian(sigma2, sens, delta):
    """The stated ε of discrete noise (the zCDP conversion at ρ = Δ²/2σ²) is a true guarantee of
    the exact discrete curve, and (being a bound through zCDP) not below the exact ε."""
    rho = sens * sens / (2 * sigma2)
    stated = epsilon_for(rho, delta, "discrete_gaussian")
    assert stated == pytest.approx(cks_epsilon(rho, delta), rel=1e-6)
    assert float(brute_delta(stated, sigma2, (sens,))) <= delta
    assert stated >= discrete_gaussian_epsilon(delta, sigma2, sens)


@pytest.mark.parametrize("sigma2, shifts", [(2.0, (1, 2)), (6.25, (2, 3))])
def test_zcdp_statement_holds_for_a_two_coordinate_discrete_gaussian(sigma2, shifts):
    """A release is many independent discrete Gaussians at once (Theorem 14): ρ = Σ Δ_j²/(2σ²);
    the stated ε at δ must be a guarantee of the exact two-dimensional divergence."""
    delta = 1e-5
    rho = sum(s * s for s in shifts) / (2 * sigma2)
    stated = epsilon_for(rho, delta, "discrete_gaussian")
    assert float(brute_delta(stated, sigma2, shifts)) <= delta
    # the analytic curve of the continuous Gaussian at the same ρ would state less: it is
    # not what discrete noise is stated with
    assert epsilon_for(rho, delta, "gaussian") < stated


# -- one conversion, one statement ---------------------------------------------------------------
@pytest.mark.parametrize("eps, delta", EPS_DELTAS)
def test_asked_epsilon_is_converted_with_the_statement_function(eps, delta):
    p = dm.Budget.approx(eps, delta).pcost  # default: the secure (discrete) noise
    assert cks_epsilon(p / 2, delta) == pytest.approx(eps, rel=1e-6)
    assert epsilon_for(p / 2, delta, "discrete_gaussian") <= eps
    assert epsilon_for(p / 2, delta, "lattice_gaussian") <= eps
    assert epsilon_for(p / 2, delta, "gaussian") <= eps  # valid, loose for continuous noise
    pg = dm.Budget.approx(eps, delta, noise="gaussian").pcost
    assert analytic_epsilon(pg, delta) == pytest.approx(eps, rel=1e-7)
    assert epsilon_for(pg / 2, delta, "gaussian") <= eps
    # the continuous conversion is the larger budget: stating it for discrete noise would exceed ε
    assert pg > p and epsilon_for(pg / 2, delta, "discrete_gaussian") > eps


def test_mu_only_where_it_holds():
    assert gdp_holds("gaussian") and not gdp_holds("discrete_gaussian") and not gdp_holds("lattice_gaussian")
    with pytest.raises(BudgetError):
        dm.Budget.approx(1.0, 1e-9, noise="discrete_laplace")


# -- the grid: stated ≤ asked for every noise kind and budget form --------------------------------
ATTRS = ["education-num", "race", "sex"]


@pytest.fixture(scope="module")
def adult():
    sizes = dm.Domain.from_json(DATA / "adult-domain.json")
    dom = dm.Domain.from_dict({a: sizes.sizes[sizes.index(a)] for a in ATTRS})
    df = pd.read_csv(DATA / "adult.csv", usecols=ATTRS)[ATTRS]
    plain = dm.Workload(dom, [("education-num", "race"), ("race", "sex")])
    mixed = dm.Workload.marginals(dom, 2, upto=True, query_types={"education-num": "prefix"})
    return df, plain, mixed


def _release_privacy(adult, noise: str, at_delta: float, **budget) -> dict:
    """The privacy object a release of a plan of ``budget`` measured with ``noise`` writes."""
    df, plain, mixed = adult
    wk = mixed if noise == "lattice_gaussian" else plain
    plan = dm.plan(wk, **budget)
    if noise == "gaussian":
        meas = plan.measure(df, noise="gaussian_float")
    else:
        meas = plan.measure(df, noise=noise)
    assert meas.noise == noise
    return privacy_summary(meas.plan, noise=meas.noise, delta=at_delta)


@pytest.mark.parametrize("noise", NOISES)
@pytest.mark.parametrize("rho", RHOS)
def test_grid_rho(adult, noise, rho):
    p = _release_privacy(adult, noise, 1e-9, rho=rho)
    assert p["rho"] <= rho * (1 + REL)
    assert p["epsilon"] <= epsilon_for(rho, 1e-9, noise) * (1 + REL)
    if noise == "gaussian":
        assert p["mu"] == pytest.approx(math.sqrt(2 * rho), rel=1e-9)
    else:
        assert p["mu"] is None  # μ-GDP is not established for discrete noise


@pytest.mark.parametrize("noise", NOISES)
@pytest.mark.parametrize("eps, delta", EPS_DELTAS)
def test_grid_epsilon_delta(adult, noise, eps, delta):
    p = _release_privacy(adult, noise, delta, epsilon=eps, delta=delta)  # default conversion
    assert p["delta"] == delta and p["epsilon"] <= eps * (1 + REL)
    if noise != "gaussian":  # the discrete statement is (nearly) all of the ask: little waste
        assert p["epsilon"] >= eps * (1 - 1e-3)
        assert p["epsilon"] == pytest.approx(cks_epsilon(p["rho"], delta), rel=1e-6)
    else:  # continuous noise asked for explicitly: its own exact curve, all of the ask
        q = _release_privacy(adult, noise, delta, budget=dm.Budget.approx(eps, delta, noise="gaussian"))
        assert eps * (1 - 1e-6) <= q["epsilon"] <= eps * (1 + REL)
        assert q["epsilon"] == pytest.approx(analytic_epsilon(q["pcost"], delta), rel=1e-7)


@pytest.mark.parametrize("noise", NOISES)
@pytest.mark.parametrize("mu", MUS)
def test_grid_mu(adult, noise, mu):
    p = _release_privacy(adult, noise, 1e-9, mu=mu)
    assert p["rho"] <= mu * mu / 2 * (1 + REL)  # μ-GDP implies (μ²/2)-zCDP: never more than that
    if noise == "gaussian":
        assert p["mu"] <= mu * (1 + REL)
    else:
        assert p["mu"] is None


@pytest.mark.parametrize("eps", PURE_EPS)
def test_grid_pure_epsilon(adult, eps):
    df, plain, _ = adult
    plan = dm.plan(plain, epsilon=eps, delta=0)
    meas = plan.measure(df)
    assert meas.noise == "discrete_laplace"
    p = privacy_summary(meas.plan, noise=meas.noise, delta=0.0)
    assert p["pure_epsilon"] <= eps * (1 + REL) and p["epsilon"] <= eps * (1 + REL)
    assert p["delta"] == 0.0 and p["mu"] is None and p["rho"] <= eps * eps / 2 * (1 + REL)


def test_plan_facts_state_the_default_release(adult):
    """The plan report's facts state the secure default noise's guarantee, equal to what the
    default release of the same plan states (up to the rounding of σ up to rationals)."""
    from dpmatrix._report.content import plan_facts

    df, plain, mixed = adult
    for wk in (plain, mixed):
        plan = dm.plan(wk, epsilon=1.0, delta=1e-9)
        facts = plan_facts(plan, delta=1e-9)["privacy"]
        meas = plan.measure(df)
        rel = privacy_summary(meas.plan, noise=meas.noise, delta=1e-9)
        assert facts["mu"] is None and rel["mu"] is None
        assert facts["epsilon"] <= 1.0 and rel["epsilon"] <= facts["epsilon"]
        assert rel["epsilon"] == pytest.approx(facts["epsilon"], rel=1e-3)
        assert facts["accounting"] == rel["accounting"] == "discrete_gaussian_zcdp"


def test_plan_epsilon_names_its_noise(adult):
    _, plain, _ = adult
    plan = dm.plan(plain, epsilon=1.0, delta=1e-9)
    assert plan.epsilon(1e-9, noise="auto") == privacy_summary(plan, delta=1e-9)["epsilon"] <= 1.0
    assert plan.epsilon(1e-9, noise="auto") == pytest.approx(cks_epsilon(plan.rho, 1e-9), rel=1e-6)
    # the default remains the continuous Gaussian's claim (analytic curve), below the ask here
    assert plan.epsilon(1e-9) == pytest.approx(analytic_epsilon(plan.pcost, 1e-9), rel=1e-7)
    assert plan.epsilon(1e-9) < 1.0


@pytest.mark.parametrize("eps, delta", [(0.1, 1e-9), (1.0, 1e-9), (10.0, 1e-5), (50.0, 1e-5)])
def test_querysmasher_lattice_release_states_at_most_the_ask(adult, eps, delta):
    df, _, mixed = adult
    plan = dm.plan(mixed, planner="querysmasher", epsilon=eps, delta=delta)
    meas = plan.measure(df)
    assert meas.noise == "lattice_gaussian"
    p = privacy_summary(meas.plan, noise=meas.noise, delta=delta)
    assert p["mu"] is None and p["epsilon"] <= eps * (1 + REL)
    assert p["epsilon"] == pytest.approx(cks_epsilon(p["rho"], delta), rel=1e-6)
