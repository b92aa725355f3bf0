"""Residual mechanisms: the one abstraction every planner shares.

Every planner of the ResidualPlanner family splits the row space of the workload into residual
subspaces, one per attribute set ``A`` of the workload's downward closure — mutually orthogonal
in the paper (§4.2; Algorithm 4), linearly independent for dpmatrix's split construction — and
measures each with its own Gaussian mechanism (paper §4.2, eq. 3; §7.2, eq. 9)::

    M_A(x; σ²_A) = R_A x + N(0, σ²_A Σ_A),   R_A = ⊗_{i∈A} Sub_i ⊗_{j∉A} 1ᵀ,   Σ_A = ⊗_{i∈A} Γ_i Γ_iᵀ.

Because ``R_A x = (⊗_{i∈A} Sub_i) v_A`` where ``v_A`` is the marginal of the data on ``A``, the
mechanism only ever touches the marginal table ``v_A``, never the full data vector (Algorithm 1 /
Algorithm 5: ``ω = H₁ v_A + σ_A H₂ z`` with ``H₁ = ⊗ Sub_i``, ``H₂ = ⊗ Γ_i``, ``z`` standard
normal). Everything is a Kronecker product of small per-attribute factors, held by an
:class:`AttributeBasis`, and applied axis by axis, never expanded.

From the factors follow, in closed form,

* the privacy cost ``pcost(M_A) = Π_{i∈A} β_i / σ²_A`` with ``β_i`` the largest diagonal of
  ``Sub_iᵀ (Γ_iΓ_iᵀ)⁻¹ Sub_i`` (Theorems 4.3 and 7.1);
* the residual estimate ``r_A = (⊗ G_i) ω`` with covariance ``σ²_A ⊗_{i∈A} K_i``,
  ``K_i = G_i Γ_i Γ_iᵀ G_iᵀ``;
* the marginal on any closure member ``A`` as ``Σ_{A'⊆A} r_{A'} ⊗_{j∈A∖A'} a_j`` (``a_j``
  broadcast along the attributes of ``A∖A'``; Algorithm 2 / Theorem 4.4 / Algorithm 6).

``[a_i, G_i]`` is the (pseudo-)inverse of the per-attribute measurement ``T_i = [1ᵀ; Sub_i]``:
every cell vector ``x`` with ``T_i x`` known is ``a_i (1ᵀx) + G_i (Sub_i x)``. For the paper's
Algorithm 4 (``Sub_i 1 = 0``) this is ``a_i = 1/n_i`` and ``G_i = Sub_i⁺`` — the residual
estimate is centred along every attribute and the marginal is ``Σ r_{A'} / Π n_j``. The *split*
construction (:mod:`dpmatrix._mechanisms.basis`) keeps the strategy's own way of estimating the
total, so ``a_i`` is not uniform and ``Sub_i 1 ≠ 0``; the formulas above cover both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._linalg.kron import kron_apply
from .basis import AttributeBasis

__all__ = ["ResidualMechanism", "apply_pinv", "apply_sub"]



def apply_pinv(bases: tuple[AttributeBasis, ...], omega: np.ndarray) -> np.ndarray:
    """``r = (⊗ G_i) ω`` (``G_i = Sub_i⁺`` for Algorithm 4) over the trailing axes of ``omega``
    (leading axes are a batch: every tensor of a batch is transformed exactly as it would be alone).

    ResidualPlanner's identity bases hold ``Sub_n⁺ = (1/n) [1ᵀ; 11ᵀ − n I]`` as a structured
    matrix, applied in closed form, ``r_0 = s/n``, ``r_{i+1} = (s − n ω_i)/n`` with ``s = Σ ω``
    along the axis — O(n) per fibre instead of the O(n²) product
    (:class:`~dpmatrix._linalg.structured.SubtractionPinv`); ResidualPlanner+ strategies' factors
    are dense products (:func:`~dpmatrix._linalg.kron.kron_apply`)."""
    return kron_apply(tuple(b.Sub_inv for b in bases), np.asarray(omega, dtype=float))


def apply_sub(bases: tuple[AttributeBasis, ...], tensor: np.ndarray, factor: str = "Sub") -> np.ndarray:
    """``(⊗ Sub_i) v`` (``factor="Sub"``) or ``(⊗ Γ_i) z`` (``"Gamma"``) over the trailing axes.

    ResidualPlanner's ``Sub_n = Γ = [1 | −I]`` is applied as ``v_0 − v_{i+1}`` along the axis
    (:class:`~dpmatrix._linalg.structured.Subtraction`: O(n) instead of O(n²); the same numbers as
    the product, whose terms are exact ±v or 0)."""
    mats = tuple(b.Sub if factor == "Sub" else b.Gamma for b in bases)
    return kron_apply(mats, np.asarray(tensor, dtype=float))


@dataclass(frozen=True, eq=False)
class ResidualMechanism:
    """The Gaussian mechanism ``M_A`` of one residual set ``A`` with noise scale ``σ²_A``."""

    attrs: tuple[int, ...]
    bases: tuple[AttributeBasis, ...]
    sigma2: float

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the marginal table on ``attrs``."""
        return tuple(b.n for b in self.bases)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return tuple(b.r for b in self.bases)

    @property
    def noise_shape(self) -> tuple[int, ...]:
        return tuple(b.n_noise for b in self.bases)

    @property
    def n_outputs(self) -> int:
        """Number of noisy numbers released (rank of ``R_A``)."""
        return math.prod(self.output_shape)

    @property
    def pcost_coef(self) -> float:
        """``Π β_i``: privacy cost at ``σ² = 1`` (Theorems 4.3, 7.1)."""
        return math.prod(b.beta for b in self.bases)

    @property
    def pcost(self) -> float:
        return self.pcost_coef / self.sigma2

    def measure(self, marginal: np.ndarray, z: np.ndarray) -> np.ndarray:
        """``ω = H₁ v + σ H₂ z`` (Algorithm 1 / 5) for a marginal table ``v`` and standard noise
        ``z`` of shape :attr:`noise_shape`. Returns the noisy outputs, shape :attr:`output_shape`."""
        signal = apply_sub(self.bases, marginal, "Sub")
        noise = apply_sub(self.bases, z, "Gamma")
        return signal + math.sqrt(self.sigma2) * noise

    def residual(self, omega: np.ndarray) -> np.ndarray:
        """``r_A = (⊗ G_i) ω``: the residual set's term of the reconstructed marginal."""
        return apply_pinv(self.bases, omega)
