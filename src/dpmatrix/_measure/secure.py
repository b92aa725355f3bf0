"""Secure noise by default: which sampler a measurement uses, and the lattice form of a residual.

:func:`resolve_noise` is THE one place where ``noise="auto"`` (the default of
:func:`dpmatrix.measure`, ``Plan.measure`` and ``dpmatrix release``) is decided:

* a user-given generator (``rng=``, the CLI's ``--seed``) → ``"gaussian"``: the floating-point
  Gaussian from that generator — reproducible, NOT private (recorded as such in the manifest);
* every measured factor an integer matrix (ResidualPlanner's plain marginals; QuerySmasher
  spaces that are plain-marginal mechanisms) → ``"discrete_gaussian"``: exact integer noise on
  the integer query (paper §5, Algorithm 3; :mod:`dpmatrix._measure.discrete`);
* otherwise (ResidualPlanner+ prefix/range/custom strategies, QuerySmasher's optimized
  spaces) → ``"lattice_gaussian"``: the real-valued query snapped to a lattice ``γℤ`` with
  discrete Gaussian noise, its privacy accounted exactly (:mod:`dpmatrix._mechanisms.lattice`).

Explicit choices: ``"discrete_gaussian"``, ``"lattice_gaussian"``, and ``"gaussian_float"``
(alias ``"gaussian"``) for the old floating-point Gaussian (OS-seeded PCG64; not a cryptographic
source and open to floating-point attacks; only on request).

The lattice form of a residual mechanism ``M_A(x) = R_A x + N(0, σ² ⊗ Γ_iΓ_iᵀ)`` rewrites it
with independent noise, attribute by attribute: a plain-marginal factor (``Sub = Γ = Sub_n``)
becomes the integer ``C_i = n I − 11ᵀ`` with post-processing ``Sub_n/n`` and noise scale ``× n``
(as in Algorithm 3), a strategy factor (``Γ = I``) stays ``C_i = Sub_i``. Then ``ω`` is
``(⊗ P_i) γ(round(Cv/γ) + z)`` with ``z ~ N_Z(0, σ̄²/γ²)``, ``σ̄ ≥ (1 + tol) σ Π n_i`` rational
(the factor ``1 + tol`` pays for the rounding: ``ρ_A ≤`` the plan's ``ρ_A``); the plan is
re-scored so that its reported ρ is the lattice mechanism's exact ρ (upper bound): the
residual's σ² becomes ``pcost_coef / (2ρ_A)``, within a relative ``4·tol + rel_var_tol`` of the
actual noise variance ``σ̄²/Π n_i²`` (reported variances may understate it by that much).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np

from .._linalg.structured import IntegerCentring
from .._mechanisms.lattice import (
    DEFAULT_LATTICE_TOL,
    LatticeQuery,
)
from .._mechanisms.samplers import rational_upper_bound
from ..errors import DataError, PlanError
from ..protocols import HasClosure, HasSecureNoise, HasSubMechanisms
from .discrete import InsecureRandomnessWarning

__all__ = [
    "NOISES",
    "SECURE_NOISES",
    "lattice_sigma_bar",
    "rescored_sigma2",
    "resolve_noise",
]

#: Every accepted ``noise=`` value.
NOISES = ("auto", "discrete_gaussian", "lattice_gaussian", "gaussian_float", "gaussian")
#: The noises drawn exactly from the OS CSPRNG (when no generator is given).
SECURE_NOISES = ("discrete_gaussian", "lattice_gaussian")


def _is_qs(plan) -> bool:
    return isinstance(plan, HasSubMechanisms)


def _integer_plan(plan) -> bool:
    """Every measured mechanism has an exact integer form (Algorithm 3 applies)."""
    if _is_qs(plan):
        return all(plan.solutions[r.structure].marginal_factors() is not None
                   for r in plan.residuals.values() if math.isfinite(r.sigma2))
    if isinstance(plan, HasSecureNoise):
        return plan.secure_noise == "discrete_gaussian"
    if isinstance(plan, HasClosure):
        return all(b.is_identity for b in plan.bases)
    return False  # a plan that only lists its mechanisms: the lattice sampler takes any matrix


def resolve_noise(plan, noise: str = "auto", rng=None) -> str:
    """The sampler a measurement of ``plan`` uses: ``"discrete_gaussian"``, ``"lattice_gaussian"``
    or ``"gaussian"`` (floating point).

    Parameters
    ----------
    plan : Plan or QuerySmasherPlan
    noise : {"auto", "discrete_gaussian", "lattice_gaussian", "gaussian_float", "gaussian"}
        ``"auto"``: secure noise (discrete if the plan's factors are integer, lattice
        otherwise) unless a generator is given; ``"gaussian_float"``/``"gaussian"``: the
        floating-point Gaussian (explicit request only).
    rng : numpy.random.Generator, optional
        A user's generator: ``"auto"`` then means the reproducible floating-point Gaussian.

    Returns
    -------
    str

    Examples
    --------
    >>> import dpmatrix as dm
    >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")]), rho=1.0)
    >>> resolve_noise(plan), resolve_noise(plan, "gaussian_float")
    ('discrete_gaussian', 'gaussian')
    """
    if noise not in NOISES:
        raise DataError(f"noise must be one of {', '.join(NOISES)}; got {noise!r}")
    if noise in ("gaussian", "gaussian_float"):
        if rng is not None:
            warn_seeded_float()
        return "gaussian"
    if noise == "auto":
        if rng is not None:
            warn_seeded_float()
            return "gaussian"
        return "discrete_gaussian" if _integer_plan(plan) else "lattice_gaussian"
    return noise


def warn_seeded_float() -> None:
    """A user's generator selects the reproducible floating-point Gaussian: say so (it is
    recorded as ``seeded_insecure`` and every artifact of a release says NOT PRIVATE)."""
    warnings.warn(
        "rng= draws floating-point Gaussian noise from your seeded generator: reproducible by whoever "
        "has the seed, NOT private; omit rng for exact noise from the operating system's secure source",
        InsecureRandomnessWarning,
        stacklevel=4,
    )


# ---------------------------------------------------------------------------------------------
# ResidualPlanner / ResidualPlanner+ plans
# ---------------------------------------------------------------------------------------------
def residual_lattice_form(bases) -> tuple[LatticeQuery, tuple[np.ndarray, ...], int]:
    """``(C, post-processing factors P_i, noise scale factor Π n_i over plain-marginal factors)``
    of a residual mechanism with per-attribute ``bases`` (see the module docstring)."""
    C, P, scale = [], [], 1
    for b in bases:
        if b.is_identity:  # n I − 11ᵀ and Sub_n / n, structured: O(n) per fibre, never n × n
            C.append(IntegerCentring(b.n))
            P.append(b.Sub / b.n)
            scale *= b.n
        else:
            G = np.asarray(b.Gamma)
            if G.shape != (b.r, b.r) or not np.array_equal(G, np.eye(b.r)):
                raise PlanError("the lattice sampler needs strategy factors with independent noise (Γ = I)")
            C.append(np.asarray(b.Sub, dtype=float))
            P.append(np.eye(b.r))
    return LatticeQuery.of(C), tuple(P), scale


def rescored_sigma2(coef: float, rho: Fraction, fallback: float) -> float:
    """The σ² a re-scored plan reports for a residual measured on a lattice of exact spend ``rho``.

    A residual whose privacy factor is ``coef`` spends ``ρ = coef/(2σ²)`` (zCDP, paper §5); the
    lattice mechanism's exact spend ``rho`` (:func:`~dpmatrix._mechanisms.lattice.lattice_rho`) is
    turned back into that unit: ``σ² = coef/(2ρ)`` computed in exact arithmetic, then lowered by
    two ulps, so that ``coef/σ²`` — the spend the plan reports — is never below ``2ρ``.

    Parameters
    ----------
    coef : float
        The residual's privacy factor (``pcost_coef`` of a residual mechanism, ``pcost`` of a
        QuerySmasher sub-mechanism, the squared sensitivity of an explicit strategy).
    rho : fractions.Fraction
        The lattice mechanism's exact ρ (an upper bound).
    fallback : float
        Returned unchanged when ``rho`` or ``coef`` is 0 (nothing is spent: the σ² is kept).

    Returns
    -------
    float

    Examples
    --------
    >>> from fractions import Fraction
    >>> s2 = rescored_sigma2(1.0, Fraction(1, 8), 9.0)
    >>> s2 < 4.0 and 1.0 / s2 >= 2 * 0.125
    True
    >>> rescored_sigma2(1.0, Fraction(0), 9.0)
    9.0
    """
    if rho == 0 or coef == 0:
        return fallback
    s2 = float(Fraction(coef) / (2 * rho))
    return float(np.nextafter(np.nextafter(s2, 0.0), 0.0))


def lattice_sigma_bar(sigma2: float, scale: int, *, rel_var_tol: float,
                      tol: float = DEFAULT_LATTICE_TOL) -> Fraction:
    """The rational noise scale ``σ̄ ≥ σ·scale·(1 + tol)`` of a lattice measurement.

    Snapping the query to the lattice ``γℤ`` moves it by at most ``γ√m ≤ tol·Δ₂``; that extra
    sensitivity is paid with noise (the factor ``1 + tol``), so the lattice mechanism spends no
    more than the plan's ρ (up to the float rounding of the plan's own privacy factors; the
    re-scored plan, :func:`rescored_sigma2`, reports the exact spend either way). ``scale`` is
    the product of the plain-marginal factor sizes ``Π n_i`` of :func:`residual_lattice_form`
    (1 for a strategy measured as is). The rational is the simplest one whose variance exceeds
    ``(σ·scale·(1 + tol))²`` by at most ``rel_var_tol``
    (:func:`~dpmatrix._mechanisms.samplers.rational_upper_bound`).

    Parameters
    ----------
    sigma2 : float
        The plan's noise variance σ² of the residual (or strategy).
    scale : int
        Noise scale factor of the integer form of the query (``Π n_i``; 1 if none).
    rel_var_tol : float, keyword-only
        Relative excess of ``σ̄²`` allowed by the rational approximation.
    tol : float, keyword-only
        The lattice tolerance (``γ√m ≤ tol·Δ₂``), default
        :data:`~dpmatrix._mechanisms.lattice.DEFAULT_LATTICE_TOL`.

    Returns
    -------
    fractions.Fraction

    Examples
    --------
    >>> sb = lattice_sigma_bar(4.0, 3, rel_var_tol=1e-4, tol=1e-3)
    >>> 6 * 1.001 <= sb <= 6 * 1.001 * 1.0001
    True
    """
    return rational_upper_bound(math.sqrt(sigma2) * scale * (1 + tol) * (1 + 1e-12), rel_var_tol)
