"""The privacy statement of a plan or release: one dict (written to the manifest) and one line
(printed by every command) derived from it, so console and manifest cannot disagree.

* Continuous Gaussian noise: ρ-zCDP, equivalently μ-GDP with μ = sqrt(2ρ), and (ε, δ)-DP by the
  exact analytic Gaussian conversion (Balle & Wang 2018; [RP+] Definition 2).
* Discrete Gaussian noise: ρ-zCDP (Canonne, Kamath, Steinke 2020, Theorem 4), and (ε, δ)-DP by
  their zCDP conversion (Proposition 1 / :func:`dpmatrix.privacy.epsilon_from_zcdp`). Gaussian DP
  and the analytic curve are established for the continuous Gaussian only, so no μ is claimed.
* Noise from a user-given seed: the numbers are reproducible by anyone who can guess the seed
  (seed 1234 was found in 5 s), so the statement says
  "REPRODUCIBLE, NOT PRIVATE" in front of everything else.

δ policy: δ is the probability with which the guarantee may fail outright; a
mechanism that publishes each record with probability δ is (0, δ)-DP. δ must therefore be far
below 1/n. The data size is private, so no n-based check is possible; dpmatrix refuses
δ ≥ :data:`MAX_DELTA` (1e-3: at δ = 1e-3 a release may expose one record in a thousand) and
warns above :data:`WARN_DELTA` (1e-6).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from .errors import BudgetError
from .privacy import epsilon_from_zcdp

__all__ = ["DISCRETE_NOISES", "MAX_DELTA", "WARN_DELTA", "check_delta", "privacy_line", "privacy_summary", "pure_summary"]

MAX_DELTA = 1e-3
#: Noises whose privacy is the discrete Gaussian's zCDP (no Gaussian-DP μ, no analytic curve).
DISCRETE_NOISES = ("discrete_gaussian", "lattice_gaussian")
WARN_DELTA = 1e-6

REPRODUCIBLE = "REPRODUCIBLE, NOT PRIVATE (noise from a user-given seed; anyone who finds the seed recovers the exact counts)"


class LargeDeltaWarning(UserWarning):
    """δ above :data:`WARN_DELTA`: the (ε, δ) guarantee may fail for a noticeable share of records."""


def check_delta(delta: Any, *, name: str = "delta") -> float:
    """δ as a float, refused unless ``0 < δ < MAX_DELTA`` (warned above ``WARN_DELTA``).

    Parameters
    ----------
    delta : float
        The δ of an (ε, δ) statement; strings and booleans are refused.
    name : str
        How the caller spells the option in messages (``"--delta"`` on the command line).

    Returns
    -------
    float

    Examples
    --------
    >>> check_delta(1e-9)
    1e-09
    """
    if isinstance(delta, (str, bytes, bool)) or delta is None:
        raise BudgetError(f"{name} must be a number, got {delta!r}")
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise BudgetError(f"{name} must be a number, got {delta!r}") from None
    if not math.isfinite(d) or not 0 < d < 1:
        raise BudgetError(f"{name} must be between 0 and 1 (exclusive), got {delta!r}")
    if d >= MAX_DELTA:
        raise BudgetError(
            f"{name} = {d:g} is too large to be a privacy guarantee: with probability delta the "
            f"guarantee may fail outright (a release may then expose whole records); use "
            f"{name} well below 1/(number of records), e.g. 1e-9, and below {MAX_DELTA:g} in any case"
        )
    if d > WARN_DELTA:
        warnings.warn(
            f"{name} = {d:g} is large: it should be well below 1/(number of records); "
            "1e-9 is the default",
            LargeDeltaWarning,
            stacklevel=2,
        )
    return d


def privacy_summary(plan: Any, *, noise: str = "gaussian", delta: float, reproducible: bool = False) -> dict:
    """The manifest's ``privacy`` object for a plan measured with ``noise``.

    Parameters
    ----------
    plan : Plan
        Anything with ``rho``, ``pcost``, ``mu`` and ``epsilon(delta)`` (for discrete noise: the
        plan actually measured, with its rounded noise scales).
    noise : {"gaussian", "discrete_gaussian", "lattice_gaussian"}
    delta : float
        δ at which ε is stated.
    reproducible : bool
        The noise came from a user-given seed.

    Returns
    -------
    dict
        ``rho, pcost, mu, epsilon, delta, definition, reproducible``.
    """
    if noise == "discrete_laplace":
        return pure_summary(plan, reproducible=reproducible)
    discrete = noise in DISCRETE_NOISES
    rho = float(plan.rho)
    epsilon = epsilon_from_zcdp(rho, delta) if discrete else float(plan.epsilon(delta))
    lattice = (
        " on the query snapped to a fine lattice (sensitivity bound includes the rounding; "
        "dpmatrix.mechanisms.lattice)" if noise == "lattice_gaussian" else ""
    )
    definition = (
        f"rho-zCDP of the discrete Gaussian mechanism (Canonne, Kamath, Steinke 2020){lattice}; "
        "(epsilon, delta)-DP by their zCDP conversion; neighbouring datasets differ by adding or "
        "removing one record"
        if discrete
        else "rho-zCDP (equivalently mu-GDP, and (epsilon, delta)-DP by the exact analytic Gaussian "
        "conversion); neighbouring datasets differ by adding or removing one record"
    )
    return {
        "rho": rho,
        "pcost": float(plan.pcost),
        "mu": None if discrete else float(plan.mu),
        "epsilon": float(epsilon),
        "delta": float(delta),
        "definition": definition,
        "reproducible": bool(reproducible),
    }


def pure_summary(plan: Any, *, reproducible: bool = False) -> dict:
    """The manifest's ``privacy`` object of a pure ε-DP release (exact discrete Laplace noise).

    ε is the plan's exact privacy (max column L1 norm of the budget-scaled strategy); δ = 0; for
    composition with zCDP releases ρ = ε²/2 (pure ε-DP implies (ε²/2)-zCDP, Bun & Steinke 2016,
    Proposition 1.4), ``pcost = 2ρ``; no μ-GDP is claimed.

    Parameters
    ----------
    plan : PurePlan
        Anything with ``pure_epsilon`` (the ε spent).
    reproducible : bool
        The noise came from a user-given seed.

    Returns
    -------
    dict
        ``pure_epsilon, epsilon, delta (0), rho, pcost, mu (None), definition, reproducible``.

    Examples
    --------
    >>> class P: pure_epsilon = 1.0
    >>> pure_summary(P())["rho"]
    0.5
    """
    eps = float(plan.pure_epsilon)
    return {
        "pure_epsilon": eps,
        "epsilon": eps,
        "delta": 0.0,
        "rho": eps * eps / 2,
        "pcost": eps * eps,
        "mu": None,
        "definition": "pure epsilon-DP (delta = 0) of the discrete Laplace mechanism on integer strategy "
        "rows; rho = epsilon^2/2 zCDP for composition; neighbouring datasets differ by adding or "
        "removing one record",
        "reproducible": bool(reproducible),
    }


def privacy_line(privacy: dict) -> str:
    """THE one-line privacy statement every command prints, rendered from a ``privacy`` dict of
    :func:`privacy_summary` (or a manifest's; older manifests without ``reproducible`` read as
    not reproducible).

    Examples
    --------
    >>> privacy_line({"rho": 0.5, "mu": 1.0, "epsilon": 6.17, "delta": 1e-9})[:28]
    'privacy: rho = 0.5 (zCDP), e'
    """
    if privacy.get("pure_epsilon") is not None:
        line = (
            f"privacy: epsilon = {privacy['pure_epsilon']:.6g} (pure DP, delta = 0; rho = "
            f"{privacy['rho']:.6g} zCDP for composition); neighbours differ by adding or removing one record"
        )
        return f"{REPRODUCIBLE}: {line}" if privacy.get("reproducible") else line
    mu = privacy.get("mu")
    gdp = f"mu = {mu:.6g} (Gaussian DP)" if mu is not None else "epsilon from zCDP (discrete noise, no mu claimed)"
    line = (
        f"privacy: rho = {privacy['rho']:.6g} (zCDP), epsilon = {privacy['epsilon']:.6g} at "
        f"delta = {privacy['delta']:.3g}, {gdp}; neighbours differ by adding or removing one record"
    )
    if privacy.get("reproducible"):
        line = f"{REPRODUCIBLE}: {line}"
    return line
