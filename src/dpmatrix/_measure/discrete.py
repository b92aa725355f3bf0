"""Secure measurement with discrete Gaussian noise (paper §5, Algorithm 3, Theorem 5.1).

Replacing the correlated continuous noise of ``M_A(x) = R_A x + N(0, σ²_A Σ_A)`` by independent
discrete noise on ``H v`` (the naive swap of Example 2) can cost up to 2^k times more privacy, and
is not offered. Instead, for a residual set ``A`` with plain-marginal (identity) bases:

1. σ_A is rounded *up* to a rational ``σ̄ = s/t`` (relative increase of the variance at most
   ``rel_var_tol``); the plan is re-scored with ``σ̄²`` so it reports the privacy actually spent.
2. The integer mechanism ``M'(x) = Ξ x + N_Z(0, γ² I)`` is run on the integer marginal ``v`` of
   ``A``: ``Ξ x = H v`` with ``H = ⊗_{i∈A} (n_i I − 1 1ᵀ)`` (integer), and
   ``γ² = σ̄² Π_{i∈A} n_i²`` (rational). Noise is drawn exactly by the vectorized
   Canonne–Kamath–Steinke sampler from the OS CSPRNG; everything up to here is integer.
3. Post-processing by ``Y⁺ = ⊗ (1/n_i) Sub_{n_i}`` gives the residual measurement ``ω_A``.
   With continuous noise this has exactly the distribution of ``M_A(x; σ̄²)`` (Theorem 5.1), so
   selection and reconstruction are unchanged; the discrete noise has variance at most γ², so
   the reported variances are upper bounds.

Privacy: ``Ξ`` has squared L2 sensitivity ``Π n_i(n_i − 1)`` (max column norm), hence
``ρ_A = Π n_i(n_i−1) / (2 γ²) = p_A / (2 σ̄²)`` — the continuous mechanism's ρ (Example 3).

ResidualPlanner+ strategies (prefix, range, custom) use real-valued Cholesky factors, which have
no integer form ``Ξ`` with independent noise; discrete noise is refused for them with an error.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np

from .._linalg.kron import kron_apply
from .._linalg.structured import IntegerCentring, StructuredMatrix
from .._mechanisms.residual import ResidualMechanism
from .._mechanisms.samplers import RandomSource, rational_upper_bound, sample_discrete_gaussian
from ..errors import PlanError

__all__ = ["discrete_measure", "discrete_measure_many", "gamma_squared", "integer_outputs", "round_plan"]


def rational_sigma(sigma2: float, rel_var_tol: float) -> Fraction:
    """Smallest-denominator rational σ̄ with σ̄² ≥ σ² (exactly) and σ̄²/σ² − 1 ≤ tol."""
    target = Fraction(sigma2)
    s = rational_upper_bound(math.sqrt(sigma2), rel_var_tol)
    bump = 1.0
    while s * s < target:  # float sqrt may sit one ulp below the true root
        bump *= 1 + 1e-15
        s = rational_upper_bound(math.sqrt(sigma2) * bump, rel_var_tol)
    return s


def round_plan(plan, rel_var_tol: float = 1e-4):
    """The plan with every σ rounded up to a rational, and the rationals.

    Returns ``(rounded_plan, sigma_bar)`` where ``sigma_bar[i]`` is the :class:`Fraction` σ̄ of
    closure member ``i`` (``None`` where not measured). The rounded plan's privacy is computed from
    the largest float not above σ̄², so the reported privacy cost is never below the exact one
    (it can exceed it by one unit in the last place).
    """
    if not 0 < rel_var_tol < 1:
        raise PlanError(f"rel_var_tol must be in (0, 1), got {rel_var_tol!r}")
    bad = [plan.domain.names[a] for a, b in enumerate(plan.bases) if not b.is_identity]
    if bad:
        raise PlanError(
            "discrete Gaussian noise needs ResidualPlanner's integer factors (identity queries and "
            f"strategies); attribute(s) {bad} use prefix/range/custom strategies whose factors are "
            "real-valued — measure them with noise='gaussian', or plan them as plain marginals"
        )
    sigma_bar = np.empty(len(plan.sigma2), dtype=object)
    new = np.array(plan.sigma2, dtype=float)
    # a plan has thousands of residuals but few distinct σ²: each distinct float value is rounded
    # once (the rounding is a function of the exact value, so the cache changes nothing)
    rounded: dict[float, tuple[Fraction, float]] = {}
    for i, s2 in enumerate(new.tolist()):
        if not math.isfinite(s2):
            sigma_bar[i] = None
            continue
        hit = rounded.get(s2)
        if hit is None:
            sb = rational_sigma(s2, rel_var_tol)
            f = float(sb * sb)
            if Fraction(f) > sb * sb:  # never report more noise than is added
                f = float(np.nextafter(f, 0.0))
            hit = rounded[s2] = (sb, f)
        sigma_bar[i], new[i] = hit
    return plan._with_sigma2(new), sigma_bar


def gamma_squared(mech: ResidualMechanism, sigma_bar: Fraction) -> Fraction:
    """Discrete noise scale ``γ² = σ̄² Π_{i∈A} n_i²`` (eq. 7), an exact rational."""
    return sigma_bar * sigma_bar * math.prod(n * n for n in mech.shape)


def integer_outputs(mech: ResidualMechanism, marginal: np.ndarray) -> np.ndarray:
    """``H v`` with ``H = ⊗ (n_i I − 11ᵀ)``: exact integer arithmetic on the integer marginal."""
    v = np.asarray(marginal)
    if v.dtype.kind not in "iu":
        raise PlanError("the discrete mechanism needs an integer marginal table")
    return IntegerCentring.apply_last_axes(v, len(mech.shape))


def discrete_measure(
    mech: ResidualMechanism,
    marginal: np.ndarray,
    sigma_bar: Fraction,
    rng: RandomSource | np.random.Generator | None = None,
) -> np.ndarray:
    """Algorithm 3: ``Y⁺ (H v + z)`` with ``z ~ N_Z(0, γ² I)``, ``γ² = σ̄² Π n_i²``.

    Returns the residual measurement (shape ``mech.output_shape``), distributed like
    ``mech.measure`` with ``σ² = σ̄²`` up to the (smaller) discrete noise variance.
    """
    shape = mech.shape
    hv = integer_outputs(mech, marginal)
    z = sample_discrete_gaussian(gamma_squared(mech, sigma_bar), int(np.prod(shape)), rng)
    z = z.reshape(shape)
    noisy = hv + z  # integer
    y_pinv = tuple(b.Sub / b.n for b in mech.bases)  # post-processing from here on
    return kron_apply(y_pinv, noisy.astype(float))


def discrete_measure_many(
    mechs: list[ResidualMechanism],
    marginals: list[np.ndarray],
    sigma_bars: list[Fraction],
    rng: RandomSource | np.random.Generator | None = None,
    sample=None,
) -> list[np.ndarray]:
    """:func:`discrete_measure` for several residual mechanisms at once (same results in
    distribution, fewer calls): the mechanisms with the same shape, factors and ``γ²`` are
    stacked, their noise is one call of the exact sampler (i.i.d. ``N_Z(0, γ²)`` draws, split in
    order — the same joint distribution as one call per mechanism) and ``H v`` and ``Y⁺`` are
    applied to the stack (:func:`~dpmatrix._linalg.kron.kron_apply` transforms each stacked
    tensor exactly as alone). Returns the measurements in the order given. ``sample(γ², size,
    rng)`` draws the exact noise (a noise family's ``sample``; the discrete Gaussian sampler by
    default).
    """
    keys: dict[int, object] = {}

    def basis_key(b) -> object:
        k = keys.get(id(b))
        if k is None:  # a structured Sub (plain attribute) is its own key: never expanded
            k = keys[id(b)] = b.Sub if isinstance(b.Sub, StructuredMatrix) else \
                np.ascontiguousarray(b.Sub, dtype=float).tobytes()
        return k

    gammas: dict[tuple, Fraction] = {}  # γ² depends on the shape and σ̄ only: few distinct values
    groups: dict[tuple, list[int]] = {}
    for i, (mech, s_bar) in enumerate(zip(mechs, sigma_bars)):
        shape = tuple(mech.shape)
        gamma2 = gammas.get((shape, s_bar))
        if gamma2 is None:
            gamma2 = gammas[shape, s_bar] = gamma_squared(mech, s_bar)
        key = (shape, gamma2, tuple(basis_key(b) for b in mech.bases))
        groups.setdefault(key, []).append(i)
    out: list[np.ndarray | None] = [None] * len(mechs)
    for (shape, gamma2, _), idx in groups.items():
        mech = mechs[idx[0]]
        v = np.stack([np.asarray(marginals[i]) for i in idx])
        if v.dtype.kind not in "iu":
            raise PlanError("the discrete mechanism needs an integer marginal table")
        hv = IntegerCentring.apply_last_axes(v.astype(np.int64, copy=False), len(shape), inplace=True)  # v: ours
        hv += (sample or sample_discrete_gaussian)(gamma2, hv.size, rng).reshape(hv.shape)  # H v + z, exact
        y_pinv = tuple(b.Sub / b.n for b in mech.bases)  # post-processing from here on
        noisy = kron_apply(y_pinv, hv.astype(float))
        for j, i in enumerate(idx):
            out[i] = noisy[j]
    return out  # type: ignore[return-value]


class InsecureRandomnessWarning(UserWarning):
    """Noise meant to be secure was drawn from a reproducible (seeded) source."""


def discrete_randomness(rng: np.random.Generator | None) -> str:
    """Where exact discrete noise comes from: the OS's secure source (``rng=None``), or a user's
    seeded generator — reproducible but not secure, which is warned about and recorded."""
    if rng is None:
        return "os_csprng"
    warnings.warn(
        "exact discrete noise drawn from a numpy Generator is reproducible but NOT "
        "secure; pass rng=None for the operating system's secure random source",
        InsecureRandomnessWarning,
        stacklevel=4,
    )
    return "seeded_insecure"
