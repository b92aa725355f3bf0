"""Privacy accounting of the noise actually drawn: one function states ε, one converts an asked
(ε, δ) into a budget, both from the same bound, so a statement never exceeds what was asked.

Every release is a linear query answered with additive noise; neighbouring datasets differ by
adding or removing one record. The noise kinds and the tightest accounting proven for each:

``"gaussian"`` — continuous Gaussian ``N(0, Σ)`` (floating point, on request only)
    Privacy cost ``p = max diag(Bᵀ Σ⁻¹ B)`` ([RP+] Definition 2). The privacy loss is exactly
    ``N(p/2, p)``, so the mechanism is μ-GDP with ``μ = √p`` (Dong, Roth, Su 2019), ρ-zCDP with
    ``ρ = p/2``, and (ε, δ)-DP on the exact analytic curve
    ``δ(ε) = Φ(√p/2 − ε/√p) − e^ε Φ(−√p/2 − ε/√p)`` (Balle & Wang 2018, Theorem 8):
    :func:`dpmatrix._privacy.epsilon_from_delta`.

``"discrete_gaussian"`` / ``"lattice_gaussian"`` — independent discrete Gaussians ``N_Z(0, σ_j²)``
    on the integer query ``Ξx`` of a residual mechanism (paper §5, Algorithm 3), or on a real
    query snapped to a lattice ``γℤ`` (:mod:`dpmatrix._mechanisms.lattice`). Canonne, Kamath,
    Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020):

    * Theorem 14 (multivariate discrete Gaussian): a shift ``Δ ∈ ℤ^d`` costs ρ-zCDP with
      ``ρ = Σ_j Δ_j² / (2σ_j²)`` — exactly the continuous Gaussian's ρ, and zCDP composes by
      adding ρ; the plan's ρ (with the rounded-up σ̄ of the noise drawn) is this ρ.
    * Proposition 12 / Corollary 13: ρ-zCDP implies (ε, δ)-DP with
      ``ε = min_{α>1} αρ + (α log(1 − 1/α) − log(α − 1) − log δ)/(α − 1)``
      (:func:`dpmatrix._privacy.epsilon_from_zcdp`). Any α gives a valid ε, so a numerically
      approximate minimiser still states a true guarantee.
    * Theorem 7 (one query of integer sensitivity Δ): the exact curve
      ``δ(ε) = P[X > εσ²/Δ − Δ/2] − e^ε P[X > εσ²/Δ + Δ/2]``, ``X ~ N_Z(0, σ²)``
      (:func:`discrete_gaussian_delta`). A release answers many queries at once, and the exact
      curve of their sum of discrete privacy losses is not closed-form (it needs a numerical
      privacy-loss-distribution accountant), so releases are stated by the zCDP bound above.
      It is looser than the exact curve (tested: for one query it always lies above it), and it
      is used for BOTH the conversion of an asked (ε, δ) and the statement, so they agree.
    * The μ-GDP of the continuous Gaussian is not established for discrete noise: no μ is stated.

``"discrete_laplace"`` — exact discrete Laplace on integer strategy rows (pure ε-DP planner)
    Pure ε-DP with ε = the largest column L1 norm of the budget-scaled strategy; δ = 0 at every
    ε, and ``ρ = ε²/2`` for composition (Bun & Steinke 2016, Proposition 1.4).

Budget conversion (:func:`rho_for_epsilon`). An asked (ε, δ) becomes the largest ρ whose stated ε
at δ is at most the asked ε under the accounting of the noise that will be drawn. The library's
default noise is the secure discrete one (``noise="auto"`` resolves to ``discrete_gaussian`` or
``lattice_gaussian`` unless a seeded generator is given), so ``noise="auto"`` converts with the
discrete accounting — valid for every noise kind (the continuous Gaussian is ρ-zCDP too), merely
loose for the continuous one, whose own exact curve is used with ``noise="gaussian"``.

Examples
--------
>>> rho = rho_for_epsilon(1.0, 1e-9)  # secure default noise
>>> epsilon_for(rho, 1e-9, "discrete_gaussian") <= 1.0
True
>>> round(epsilon_for(0.5, 1e-9, "gaussian"), 4), round(epsilon_for(0.5, 1e-9, "discrete_gaussian"), 4)
(6.1739, 6.4741)
"""

from __future__ import annotations

import math

from ._privacy import (
    ANALYTIC,
    DISCRETE_ZCDP,
    PURE,
    accounting_of,
    approx_pcost,
    delta_from_epsilon,  # noqa: F401  (used by the doctests)
    stated_epsilon,
)
from .errors import BudgetError

__all__ = [
    "NOISE_KINDS",
    "SOURCES",
    "accounting_of",
    "discrete_gaussian_delta",
    "discrete_gaussian_epsilon",
    "epsilon_for",
    "gdp_holds",
    "rho_for_epsilon",
]

#: Every noise kind a release can draw.
NOISE_KINDS = ("gaussian", "discrete_gaussian", "lattice_gaussian", "discrete_laplace")

#: What each accounting states, with its sources (written into manifests and reports).
SOURCES = {
    ANALYTIC: "rho-zCDP (equivalently mu-GDP, and (epsilon, delta)-DP by the exact analytic Gaussian "
    "conversion, Balle & Wang 2018)",
    DISCRETE_ZCDP: "rho-zCDP of the discrete Gaussian mechanism (Canonne, Kamath, Steinke 2020, Theorem 14); "
    "(epsilon, delta)-DP by their zCDP conversion (Corollary 13), the bound an (epsilon, delta) budget "
    "is converted with",
    PURE: "pure epsilon-DP (delta = 0) of the discrete Laplace mechanism",
}


def gdp_holds(noise: str) -> bool:
    """Whether μ-Gaussian DP with ``μ = √(2ρ)`` is proven for this noise (the continuous
    Gaussian only).

    Examples
    --------
    >>> gdp_holds("gaussian"), gdp_holds("discrete_gaussian"), gdp_holds("auto")
    (True, False, False)
    """
    return accounting_of(noise) == ANALYTIC


def epsilon_for(rho: float, delta: float, noise: str = "auto") -> float:
    """THE ε stated at ``delta`` for a release of ρ-zCDP drawn with ``noise``
    (:func:`dpmatrix._privacy.stated_epsilon` under the noise's accounting).

    Parameters
    ----------
    rho : float
        ρ of the noise drawn (``pcost / 2``); positive.
    delta : float
        δ in (0, 1).
    noise : str
        Noise kind (``"auto"``: the secure default).

    Returns
    -------
    float
        The analytic-Gaussian ε for ``"gaussian"``, the Canonne–Kamath–Steinke zCDP conversion for
        the discrete kinds.

    Raises
    ------
    BudgetError
        For ``"discrete_laplace"`` (pure ε-DP states its ε directly) or bad numbers.

    Examples
    --------
    >>> round(epsilon_for(0.5, 1e-9, "gaussian"), 5)
    6.17394
    """
    return stated_epsilon(2.0 * float(rho), delta, accounting_of(noise))


def rho_for_epsilon(epsilon: float, delta: float, noise: str = "auto") -> float:
    """The largest ρ whose stated ε (:func:`epsilon_for`) at ``delta`` is at most ``epsilon``
    (:func:`dpmatrix._privacy.approx_pcost` / 2): checked with the very function that states it,
    so ``epsilon_for(rho_for_epsilon(ε, δ, k), δ, k) ≤ ε`` holds in floating point.

    Parameters
    ----------
    epsilon : float
        Asked ε, positive.
    delta : float
        Asked δ in (0, 1).
    noise : str
        The noise that will be drawn (``"auto"``: the secure default, discrete accounting).

    Returns
    -------
    float

    Examples
    --------
    >>> r = rho_for_epsilon(1.0, 1e-9, "gaussian")
    >>> round(epsilon_for(r, 1e-9, "gaussian"), 9)
    1.0
    """
    return approx_pcost(epsilon, delta, accounting_of(noise)) / 2.0


# ---------------------------------------------------------------------------------------------
# The exact (ε, δ) curve of one discrete Gaussian query (Canonne, Kamath, Steinke, Theorem 7)
# ---------------------------------------------------------------------------------------------
def _tail(sigma2: float, s: float) -> float:
    """``P[X > s]`` for ``X ~ N_Z(0, σ²)`` (sums of ``e^{−x²/2σ²}`` over a ±(40σ + |s| + 2) window,
    whose omitted mass is below ``e^{−800}`` relative)."""
    import numpy as np

    sd = math.sqrt(sigma2)
    half = math.ceil(40 * sd + abs(s) + 2)
    x = np.arange(-half, half + 1, dtype=float)
    w = np.exp(-(x * x) / (2 * sigma2))
    z = math.fsum(w.tolist())
    return math.fsum(w[x > s].tolist()) / z


def discrete_gaussian_delta(epsilon: float, sigma2: float, sensitivity: int = 1) -> float:
    """Exact δ(ε) of ``q(x) + N_Z(0, σ²)`` for an integer query of sensitivity ``Δ``
    (Canonne, Kamath, Steinke 2020, Theorem 7):
    ``δ = P[X > εσ²/Δ − Δ/2] − e^ε P[X > εσ²/Δ + Δ/2]``, ``X ~ N_Z(0, σ²)``.

    Parameters
    ----------
    epsilon : float
        ε ≥ 0.
    sigma2 : float
        The scale parameter σ² of the discrete Gaussian.
    sensitivity : int
        The integer sensitivity Δ ≥ 1.

    Returns
    -------
    float

    Examples
    --------
    The discrete Gaussian's δ is slightly above the continuous one's at the same σ² (here
    0.00725 against 0.00683), which is why the continuous curve is not stated for it:

    >>> round(discrete_gaussian_delta(1.0, 4.0), 5), round(delta_from_epsilon(1.0, 1 / 4.0), 5)
    (0.00725, 0.00683)
    """
    D = int(sensitivity)
    if D < 1 or D != sensitivity:
        raise BudgetError(f"sensitivity must be a positive integer, got {sensitivity!r}")
    s2 = float(sigma2)
    if not (math.isfinite(s2) and s2 > 0):
        raise BudgetError(f"sigma2 must be positive, got {sigma2!r}")
    e = float(epsilon)
    t = e * s2 / D
    d = _tail(s2, t - D / 2) - math.exp(e) * _tail(s2, t + D / 2)
    return max(d, 0.0)


def discrete_gaussian_epsilon(delta: float, sigma2: float, sensitivity: int = 1) -> float:
    """Smallest ε with :func:`discrete_gaussian_delta` ``≤ delta`` (bisection to 1e-12 relative,
    rounded up).

    Examples
    --------
    >>> e = discrete_gaussian_epsilon(1e-6, 25.0)
    >>> discrete_gaussian_delta(e, 25.0) <= 1e-6
    True
    """
    d = float(delta)
    if not 0 < d < 1:
        raise BudgetError(f"delta must be in (0, 1), got {delta!r}")
    if discrete_gaussian_delta(0.0, sigma2, sensitivity) <= d:
        return 0.0
    lo, hi = 0.0, 1.0
    while discrete_gaussian_delta(hi, sigma2, sensitivity) > d:
        lo, hi = hi, hi * 2
        if hi > 1e6:  # pragma: no cover
            raise BudgetError("could not bracket epsilon")
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2
        if discrete_gaussian_delta(mid, sigma2, sensitivity) > d:
            lo = mid
        else:
            hi = mid
    return hi

