"""Privacy accounting (paper Definition 2) against an independent transcription and hand values."""

import math

import numpy as np
import pytest
from scipy.stats import norm

import dpmatrix as dm
import oracle
from dpmatrix._privacy import (
    Budget,
    delta_from_epsilon,
    epsilon_from_delta,
    pcost_from_epsilon_delta,
    resolve_pcost,
)


@pytest.mark.parametrize("pcost", [0.01, 0.3, 1.0, 4.0, 25.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 3.0])
def test_delta_matches_definition_2(pcost, eps):
    assert delta_from_epsilon(eps, pcost) == pytest.approx(oracle.delta(eps, pcost), rel=1e-9, abs=1e-15)


def test_hand_values():
    # μ = 1 (pcost 1), ε = 1: δ = Φ(−1/2) − e Φ(−3/2) = 0.308538 − 2.718282·0.066807 = 0.126937
    assert delta_from_epsilon(1.0, 1.0) == pytest.approx(norm.cdf(-0.5) - math.e * norm.cdf(-1.5), rel=1e-12)
    assert round(delta_from_epsilon(1.0, 1.0), 6) == 0.126937
    # ε = 0: δ = 2Φ(μ/2) − 1
    assert delta_from_epsilon(0.0, 4.0) == pytest.approx(2 * norm.cdf(1.0) - 1, rel=1e-12)


@pytest.mark.parametrize("pcost", [0.05, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_round_trips(pcost, delta):
    eps = epsilon_from_delta(delta, pcost)
    assert delta_from_epsilon(eps, pcost) == pytest.approx(delta, rel=1e-8)
    assert pcost_from_epsilon_delta(eps, delta) == pytest.approx(pcost, rel=1e-8)


def test_monotone_and_tiny_delta_stable():
    e1, e2 = epsilon_from_delta(1e-12, 1.0), epsilon_from_delta(1e-6, 1.0)
    assert e1 > e2 > 0
    assert np.isfinite(epsilon_from_delta(1e-300, 1.0))


def test_budget_forms_and_units():
    assert resolve_pcost(rho=0.5) == 1.0
    assert resolve_pcost(mu=2.0) == 4.0
    assert resolve_pcost(pcost=0.7) == 0.7
    # (ε, δ) is converted for the secure default (discrete) noise: the zCDP conversion of
    # Canonne-Kamath-Steinke, checked here on an independent grid over the Rényi order α
    p = resolve_pcost(epsilon=1.0, delta=1e-6)
    assert _cks_epsilon_grid(p / 2, 1e-6) == pytest.approx(1.0, rel=1e-6)
    assert _cks_epsilon_grid(p / 2, 1e-6) >= 1.0 - 1e-9  # ... and the grid's ε is an upper bound
    # the continuous Gaussian's own exact curve only on request
    pg = Budget.approx(1.0, 1e-6, noise="gaussian").pcost
    assert delta_from_epsilon(1.0, pg) == pytest.approx(1e-6, rel=1e-9)
    assert pg > p
    b = Budget(2.0)
    assert (b.rho, b.mu) == (1.0, math.sqrt(2.0))


def _cks_epsilon_grid(rho: float, delta: float) -> float:
    """Canonne-Kamath-Steinke 2020, Corollary 13, minimised over a fine grid of the order α
    (every α gives a valid ε): written independently of dpmatrix."""
    best = math.inf
    for i in range(1, 400_000):
        a = 1 + i * 5e-4
        best = min(best, a * rho + (a * math.log(1 - 1 / a) - math.log(a - 1) - math.log(delta)) / (a - 1))
    return best


def test_plan_reports_all_units():
    wk = dm.Workload.marginals(dm.Domain.from_sizes([3, 4, 5]), 2)
    plan = dm.plan(wk, budget=Budget.approx(1.0, 1e-9, noise="gaussian"))  # continuous noise asked
    assert plan.epsilon(delta=1e-9) == pytest.approx(1.0, rel=1e-8)
    assert plan.rho == pytest.approx(plan.pcost / 2)
    assert plan.mu == pytest.approx(math.sqrt(plan.pcost))
    assert dm.plan(wk, mu=0.5).pcost == pytest.approx(0.25, rel=1e-12)
    assert dm.plan(wk, rho=0.5).pcost == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"rho": 0},
        {"rho": -1},
        {"pcost": float("nan")},
        {"pcost": float("inf")},
        {"epsilon": 1.0},
        {"delta": 1e-6},
        {"epsilon": -1.0, "delta": 1e-6},
        {"epsilon": 1.0, "delta": 1.5},
        {"rho": 1.0, "mu": 1.0},
        {"rho": "abc"},
    ],
)
def test_bad_budgets(kwargs):
    with pytest.raises(dm.BudgetError):
        resolve_pcost(**kwargs)
