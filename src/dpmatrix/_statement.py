"""The privacy statement of a plan or release: one dict (written to the manifest) and one line
(printed by every command) derived from it, so console and manifest cannot disagree.

* Continuous Gaussian noise: ρ-zCDP, equivalently μ-GDP with μ = sqrt(2ρ), and (ε, δ)-DP by the
  exact analytic Gaussian conversion (Balle & Wang 2018; [RP+] Definition 2).
* Discrete Gaussian noise (and the lattice noise of real-valued strategies): ρ-zCDP (Canonne,
  Kamath, Steinke 2020, Theorem 14), and (ε, δ)-DP by their zCDP conversion (Corollary 13 /
  :func:`dpmatrix._privacy.epsilon_from_zcdp`) — the same bound an asked (ε, δ) is converted with
  (:func:`dpmatrix._privacy.approx_pcost`), so the stated ε is at most the asked one. Gaussian DP
  and the analytic curve are established for the continuous Gaussian only, so no μ is claimed.
* ``noise="auto"`` states the secure default noise (discrete), which is what ``dpmatrix plan``
  and the plan report state: the guarantee the default release will have.
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

from ._privacy import ANALYTIC, accounting_of, stated_epsilon
from .errors import BudgetError

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


def privacy_summary(plan: Any, *, noise: str = "auto", delta: float, reproducible: bool = False) -> dict:
    """The manifest's ``privacy`` object for a plan measured with ``noise``.

    ε is :func:`dpmatrix._privacy.stated_epsilon` under the accounting of ``noise`` — the one
    function that also converts an asked (ε, δ), so a statement never exceeds the ask; μ only
    where μ-GDP is proven (continuous Gaussian noise).

    Parameters
    ----------
    plan : Plan
        Anything with ``rho`` and ``pcost`` (for discrete noise: the plan actually measured,
        with its rounded noise scales).
    noise : {"auto", "gaussian", "discrete_gaussian", "lattice_gaussian", "discrete_laplace"}
        ``"auto"``: the secure default noise (discrete), as ``dpmatrix plan`` states a plan.
    delta : float
        δ at which ε is stated.
    reproducible : bool
        The noise came from a user-given seed.

    Returns
    -------
    dict
        ``rho, pcost, mu, epsilon, delta, accounting, definition, reproducible``.

    Examples
    --------
    >>> class P: rho, pcost = 0.5, 1.0
    >>> s = privacy_summary(P(), delta=1e-9)
    >>> round(s["epsilon"], 5), s["mu"], s["accounting"]
    (6.47407, None, 'discrete_gaussian_zcdp')
    """
    if noise == "discrete_laplace":
        return pure_summary(plan, reproducible=reproducible)
    accounting = accounting_of(noise)
    discrete = accounting != ANALYTIC
    rho = float(plan.rho)
    epsilon = stated_epsilon(float(plan.pcost), delta, accounting)
    lattice = (
        " on the query snapped to a fine lattice (sensitivity bound includes the rounding)"
        if noise == "lattice_gaussian" else ""
    )
    definition = (
        f"rho-zCDP of the discrete Gaussian mechanism (Canonne, Kamath, Steinke 2020, Theorem 14){lattice}; "
        "(epsilon, delta)-DP by their zCDP conversion (Corollary 13), the same bound an (epsilon, delta) "
        "budget is converted with; neighbouring datasets differ by adding or removing one record"
        if discrete
        else "rho-zCDP (equivalently mu-GDP, and (epsilon, delta)-DP by the exact analytic Gaussian "
        "conversion); neighbouring datasets differ by adding or removing one record"
    )
    return {
        "rho": rho,
        "pcost": float(plan.pcost),
        "mu": None if discrete else math.sqrt(float(plan.pcost)),
        "epsilon": float(epsilon),
        "delta": float(delta),
        "accounting": accounting,
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
    unit = privacy.get("unit")
    if isinstance(unit, dict) and isinstance(unit.get("per_person"), dict):  # a person, not a record
        who = str(unit.get("description", "one person"))
        rec = privacy["record"] if isinstance(privacy.get("record"), dict) else privacy  # a plan's per-person form
        record = ({"pure_epsilon": rec.get("pure_epsilon")} if rec.get("pure_epsilon") is not None
                  else {"rho": rec.get("rho")})  # fmt: skip
        person = {**unit["per_person"], "reproducible": privacy.get("reproducible")}
        per_record = ", ".join(f"{k} = {v:.6g}" for k, v in record.items() if v is not None)
        return privacy_line(person).replace("one record", who) + f" (per record: {per_record})"
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
