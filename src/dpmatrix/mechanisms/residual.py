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
construction (:mod:`dpmatrix.plan.residual_basis`) keeps the strategy's own way of estimating the
total, so ``a_i`` is not uniform and ``Sub_i 1 ≠ 0``; the formulas above cover both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

__all__ = ["AttributeBasis", "ResidualMechanism", "apply_pinv", "identity_basis", "kron_apply"]


def is_identity(S: np.ndarray) -> bool:
    """True when ``S`` is (numerically, to 1e-12) the square identity matrix — the one test of
    "ResidualPlanner's plain-marginal factors" used everywhere."""
    S = np.asarray(S)
    return S.ndim == 2 and S.shape[0] == S.shape[1] and np.allclose(S, np.eye(S.shape[0]), rtol=0, atol=1e-12)


@dataclass(frozen=True, eq=False)
class AttributeBasis:
    """Per-attribute factors of ResidualPlanner+ for one ``(W, S)`` pair (arrays read-only).

    Attributes
    ----------
    n : domain size of the attribute.
    W, S : the base workload (``m × n``) and the strategy replacement (``k × n``).
    Sub : ``r × n`` subtraction matrix (Algorithm 4: ``Sub 1 = 0``; split: ``Subᵀ Sub =
        SᵀS − c 11ᵀ``, see :mod:`dpmatrix.plan.residual_basis`).
    Gamma : noise factor; the residual noise covariance factor is ``Gamma Gammaᵀ`` (``r × r``).
    Sub_inv : ``G``, ``n × r``: with ``total_inv`` the (pseudo-)inverse ``[a, G]`` of
        ``[1ᵀ; Sub]`` (reconstruction, Algorithm 6); ``Sub⁺`` for Algorithm 4.
    total_inv : ``a``, length ``n``: how the total ``1ᵀx`` enters the cells; ``1/n`` for
        Algorithm 4.
    beta : Theorem 7.1 privacy-cost factor, ``max diag(Subᵀ (Γ Γᵀ)⁻¹ Sub)``.
    resid_cov : ``n × n`` matrix ``G Γ Γᵀ Gᵀ`` — covariance, per unit σ², of the
        reconstructed data-space vector from this attribute's residual.
    trace_in : ``||W G Γ||_F²`` (attribute in the residual set).
    trace_out : ``||W a||²`` (attribute in the query but not in the residual set;
        ``||W 1||² / n²`` for Algorithm 4).
    diag_in : ``diag(W G Γ Γᵀ Gᵀ Wᵀ)`` (length m).
    diag_out : ``(W a)²`` (length m).
    construction : ``"centred"`` (Algorithm 4) or ``"split"``.
    """

    n: int
    W: np.ndarray
    S: np.ndarray
    Sub: np.ndarray
    Gamma: np.ndarray
    Sub_inv: np.ndarray
    total_inv: np.ndarray
    beta: float
    resid_cov: np.ndarray
    trace_in: float
    trace_out: float
    diag_in: np.ndarray
    diag_out: np.ndarray
    construction: str = "centred"

    @property
    def r(self) -> int:
        """Number of rows of ``Sub`` (dimension of this attribute's residual)."""
        return int(self.Sub.shape[0])

    @property
    def m(self) -> int:
        """Number of queries (rows) of ``W``."""
        return int(self.W.shape[0])

    @property
    def n_noise(self) -> int:
        """Number of standard normal draws per value of this attribute (columns of ``Gamma``)."""
        return int(self.Gamma.shape[1])

    @cached_property
    def is_identity(self) -> bool:
        """True for ResidualPlanner's plain-marginal basis (W = S = I, see :func:`is_identity`)."""
        return is_identity(self.W) and is_identity(self.S)

    @property
    def uniform_total(self) -> bool:
        """True when the total enters every cell equally (``a = 1/n``: Algorithm 4, RP — the
        identity basis is built as "centred" by either construction)."""
        return self.construction == "centred"


@lru_cache(maxsize=None)
def identity_basis(n: int) -> AttributeBasis:
    """ResidualPlanner's basis for a plain (identity-workload) attribute of size ``n``.

    ``Sub = Γ = Sub_n`` so the noise is ``σ H z`` with ``z ~ N(0, I_n)`` (Algorithm 1);
    ``β = (n−1)/n``; ``K = I − 11ᵀ/n`` (the centring projection), so the cell-variance factors are
    ``(n−1)/n`` in the residual set and ``1/n²`` outside it (Theorem 4.4).
    """
    from .plan.residual_basis import attribute_basis

    eye = np.eye(n)
    return attribute_basis(eye, eye)


def kron_apply(mats: tuple[np.ndarray, ...], tensor: np.ndarray) -> np.ndarray:
    """``(⊗_i mats[i]) vec(tensor)`` without expanding the Kronecker product.

    ``tensor`` has one axis per factor, in order, optionally after leading batch axes; factor
    ``i`` acts on axis ``i`` of the trailing ``len(mats)`` axes (C-order vectorization).
    Each factor is one broadcast matrix product on a reshaped view,
    ``(pre, n, post) -> (pre, r, post)``, so batches of equal-shape tensors (stacked along the
    leading axes) cost one call per factor.
    """
    k = len(mats)
    out = np.asarray(tensor)
    lead = out.ndim - k
    for i, m in enumerate(mats):
        ax = lead + i
        shape = out.shape
        n = shape[ax]
        pre = math.prod(shape[:ax])
        post = math.prod(shape[ax + 1 :])
        # one small product per leading index (no single large GEMM): each tensor of a batch is
        # transformed exactly as it would be alone, so batched and one-by-one results agree
        res = np.matmul(m, out.reshape(pre, n, post))
        out = res.reshape(shape[:ax] + (m.shape[0],) + shape[ax + 1 :])
    return out


def apply_pinv(bases: tuple["AttributeBasis", ...], omega: np.ndarray) -> np.ndarray:
    """``r = (⊗ G_i) ω`` (``G_i = Sub_i⁺`` for Algorithm 4) over the trailing axes of ``omega`` (leading axes are a batch).

    For ResidualPlanner's identity bases ``Sub_n⁺ = (1/n) [1ᵀ; 11ᵀ − n I]`` is applied in closed
    form, ``r_0 = s/n``, ``r_{i+1} = (s − n ω_i)/n`` with ``s = Σ ω`` along the axis — O(n)
    per fibre instead of the O(n²) product; other bases use :func:`kron_apply`'s product.
    Every tensor of a batch is transformed exactly as it would be alone. (Bases other than the
    identity — ResidualPlanner+ strategies — use :func:`kron_apply` on all factors.)"""
    out = np.asarray(omega, dtype=float)
    if not all(b.is_identity for b in bases):
        return kron_apply(tuple(b.Sub_inv for b in bases), out)
    lead = out.ndim - len(bases)
    for i, b in enumerate(bases):
        ax = lead + i
        if b.n > 1:
            n = float(b.n)
            shape = out.shape
            res = np.empty(shape[:ax] + (b.n,) + shape[ax + 1 :])
            head = (slice(None),) * ax
            np.sum(out, axis=ax, keepdims=True, out=res[head + (slice(0, 1),)])
            tail = res[head + (slice(1, None),)]
            np.multiply(out, -n, out=tail)
            tail += res[head + (slice(0, 1),)]
            res /= n
            out = res
        else:  # n = 1: an empty residual, Sub⁺ is the 1 × 0 zero matrix
            out = np.zeros(out.shape[:ax] + (1,) + out.shape[ax + 1 :])
    return out


def apply_sub(bases: tuple["AttributeBasis", ...], tensor: np.ndarray, factor: str = "Sub") -> np.ndarray:
    """``(⊗ Sub_i) v`` (``factor="Sub"``) or ``(⊗ Γ_i) z`` (``"Gamma"``) over the trailing axes.

    ResidualPlanner's ``Sub_n = Γ = [1 | −I]`` is applied as ``v_0 − v_{i+1}`` along the axis
    (O(n) instead of O(n²); the same numbers as the product, whose terms are exact ±v or 0)."""
    out = np.asarray(tensor, dtype=float)
    if not all(b.is_identity for b in bases):
        return kron_apply(tuple(getattr(b, factor) for b in bases), out)
    lead = out.ndim - len(bases)
    for i in range(len(bases)):
        head = (slice(None),) * (lead + i)
        out = np.subtract(out[head + (slice(0, 1),)], out[head + (slice(1, None),)])
    return out


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
        signal = kron_apply(tuple(b.Sub for b in self.bases), np.asarray(marginal, dtype=float))
        noise = kron_apply(tuple(b.Gamma for b in self.bases), z)
        return signal + math.sqrt(self.sigma2) * noise

    def residual(self, omega: np.ndarray) -> np.ndarray:
        """``r_A = (⊗ G_i) ω``: the residual set's term of the reconstructed marginal."""
        return apply_pinv(self.bases, omega)
