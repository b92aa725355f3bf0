"""QuerySmasher's sub-mechanisms: one Gaussian mechanism per residual space, privacy cost 1 at
σ² = 1 (Kronecker, dense and Fourier strategies; QuerySmasher paper §4-5, WFF)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..._linalg import fourier as ff
from ..._linalg.kron import kron_apply
from ..._solvers.lowdim_optimal import LowDimMechanism

__all__ = [
    "DenseMech",
    "FourierMech",
    "KronMech",
    "SubMechanism",
    "centre_basis",
    "empty_mech",
    "sqrt_factor",
]


# =============================================================================================
# sub-mechanisms (privacy cost 1 at σ² = 1)
# =============================================================================================
def sqrt_factor(G: np.ndarray) -> np.ndarray:
    """W with WᵀW = G (rows = eigen-directions with positive eigenvalue)."""
    G = (G + G.T) / 2
    lam, V = np.linalg.eigh(G)
    keep = lam > max(float(lam.max()), 0.0) * 1e-13 * len(lam) if lam.size else lam > 0
    return (V[:, keep] * np.sqrt(lam[keep])).T


def centre_basis(n: int) -> np.ndarray:
    """Orthonormal basis (rows) of the vectors orthogonal to 1 (n−1 × n)."""
    H = np.eye(n) - 1.0 / n
    lam, V = np.linalg.eigh(H)
    return V[:, lam > 0.5].T


@dataclass(eq=False, kw_only=True)
class SubMechanism:
    """Interface: Gaussian mechanism on one residual space, privacy cost 1 at σ² = 1.

    Subclasses add their own positional fields (``sizes``, their strategy, ``method``); the
    solver's report below is shared and keyword-only.
    """

    loss: float = math.nan  # weighted sum of variances of the (normalized) sub-workload at σ² = 1
    lower_bound: float = math.nan
    gap: float = math.nan
    converged: bool = True
    iterations: int = 0

    def marginal_factors(self) -> tuple[float, ...] | None:
        """``κ_j`` with ``B_j⁺ B_j⁺ᵀ = κ_j (I − 11ᵀ/n_j)`` for every Kronecker factor, or ``None``
        (the mechanism is not a plain-marginal one; discrete noise needs it)."""
        return None


@dataclass(eq=False)
class KronMech(SubMechanism):
    """``B = ⊗_j B_j`` with ``max diag(B_jᵀB_j) = 1``; noise ``N(0, σ² I)``."""

    sizes: tuple[int, ...]
    B: tuple[np.ndarray, ...]
    Bpinv: tuple[np.ndarray, ...]
    method: str

    @property
    def n_outputs(self) -> int:
        return math.prod(b.shape[0] for b in self.B)

    @property
    def pcost(self) -> float:
        return math.prod(float(np.max(np.einsum("ij,ij->j", b, b))) for b in self.B)

    def measure(self, x: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
        return self.signal(x) + self.noise(sigma * rng.standard_normal(self.noise_shape))

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """Shape of the standard normal draw: one per output (i.i.d. noise)."""
        return tuple(b.shape[0] for b in self.B)

    def signal(self, x: np.ndarray) -> np.ndarray:
        """``B x`` on the residual space's marginal table."""
        return kron_apply(self.B, np.asarray(x, float).reshape(self.sizes))

    noise = None  # i.i.d.: the noise map is the identity

    def marginal_factors(self) -> tuple[float, ...] | None:
        """``κ_j`` with ``B_j⁺ B_j⁺ᵀ = κ_j (I − 11ᵀ/n_j)`` for every Kronecker factor, or ``None``."""
        out = []
        for P, n in zip(self.Bpinv, self.sizes):
            K = P @ P.T
            C = np.eye(n) - 1.0 / n
            kappa = float(np.trace(K)) / (n - 1)
            if not np.allclose(K, kappa * C, rtol=0, atol=1e-9 * max(kappa, 1e-300)):
                return None
            out.append(kappa)
        return tuple(out)

    def reconstruct(self, omega: np.ndarray) -> np.ndarray:
        return kron_apply(self.Bpinv, omega)

    def var_kron(self, Wc: Sequence[np.ndarray]) -> np.ndarray:
        out = np.ones(())
        for W, P in zip(Wc, self.Bpinv):
            R = W @ P
            out = np.multiply.outer(out, np.einsum("ij,ij->i", R, R))
        return out

    def trace_kron(self, Gs: Sequence[np.ndarray]) -> float:
        return math.prod(float(np.sum(G * (P @ P.T))) for G, P in zip(Gs, self.Bpinv))

    def var_dense(self, P: np.ndarray) -> np.ndarray:
        T = np.asarray(P, float).reshape((-1,) + self.sizes)
        R = kron_apply(tuple(p.T for p in self.Bpinv), T)
        return np.sum(R.reshape(R.shape[0], -1) ** 2, axis=1)

    def trace_dense(self, G: np.ndarray) -> float:
        N = math.prod(self.sizes)
        K = tuple(p @ p.T for p in self.Bpinv)
        KG = kron_apply(K, np.asarray(G, float).reshape(self.sizes + (N,)).transpose(
            (len(self.sizes),) + tuple(range(len(self.sizes))))).reshape(N, N)
        return float(np.trace(KG))


@dataclass(eq=False)
class DenseMech(SubMechanism):
    """A dense strategy ``B`` (r × N) from the optimal solver."""

    sizes: tuple[int, ...]
    mech: LowDimMechanism
    method: str

    @property
    def n_outputs(self) -> int:
        return self.mech.rank

    @property
    def pcost(self) -> float:
        B = self.mech.B
        return float(np.max(np.einsum("ij,ij->j", B, B)))

    def measure(self, x, sigma, rng):
        return self.signal(x) + sigma * rng.standard_normal(self.noise_shape)

    @property
    def noise_shape(self) -> tuple[int, ...]:
        return (self.mech.rank,)

    def signal(self, x):
        return self.mech.B @ np.asarray(x, float).reshape(-1)

    noise = None

    def reconstruct(self, omega):
        return (self.mech.Bpinv @ omega).reshape(self.sizes)

    def var_kron(self, Wc):
        P = self.mech.Bpinv  # N × r
        r = P.shape[1]
        out = None
        step = max(1, int(2e7 // max(1, math.prod(w.shape[0] for w in Wc))))
        for a in range(0, r, step):
            T = P[:, a : a + step].T.reshape((-1,) + self.sizes)
            R = kron_apply(tuple(Wc), T)
            s = np.sum(R**2, axis=0)
            out = s if out is None else out + s
        return out

    def trace_kron(self, Gs):
        """``tr(G K)``, ``K = B⁺B⁺ᵀ = Σ_j p_j p_jᵀ`` (``p_j`` the columns of ``B⁺``), as
        ``Σ_j p_jᵀ (G p_j)``: ``G = ⊗ G_i`` applied to the ``r`` columns, never to the ``N × N``
        matrix ``K`` (``O(r N Σ n_i)`` instead of ``O(N² r)``)."""
        P = self.mech.Bpinv  # N × r
        T = np.ascontiguousarray(P.T).reshape((-1,) + self.sizes)
        return float(np.sum(kron_apply(tuple(Gs), T) * T))

    def var_dense(self, P):
        R = np.asarray(P, float).reshape(-1, math.prod(self.sizes)) @ self.mech.Bpinv
        return np.einsum("ij,ij->i", R, R)

    def trace_dense(self, G):
        P = self.mech.Bpinv
        return float(np.sum((G @ P) * P))


@dataclass(eq=False)
class FourierMech(SubMechanism):
    """WFF: noise of variance ``σ² h_f`` on every Fourier coefficient (inf: not measured)."""

    sizes: tuple[int, ...]
    h: np.ndarray
    method: str = "fourier"

    @property
    def _hv(self) -> np.ndarray:
        return np.where(np.isfinite(self.h), self.h, 0.0)

    @property
    def n_outputs(self) -> int:
        return int(np.isfinite(self.h).sum())

    @property
    def pcost(self) -> float:
        N = math.prod(self.sizes)
        return float(np.sum(1.0 / (N * self.h)))

    def measure(self, x, sigma, rng):
        return self.signal(x) + self.noise(sigma * rng.standard_normal(self.noise_shape))

    @property
    def noise_shape(self) -> tuple[int, ...]:
        return tuple(self.sizes)

    def signal(self, x):
        """The measured (finite-weight) Fourier coefficients of the table (complex, ortho)."""
        x = np.asarray(x, float).reshape(self.sizes)
        if not self.sizes:
            return x
        X = np.fft.fftn(x, axes=tuple(range(len(self.sizes))), norm="ortho")
        return np.where(np.isfinite(self.h), X, 0.0)

    def noise(self, z):
        """Noise of variance ``h_f`` (times the scale) on every measured coefficient."""
        if not self.sizes:
            return math.sqrt(float(self._hv)) * z
        Z = np.fft.fftn(z, axes=tuple(range(len(self.sizes))), norm="ortho")
        return np.where(np.isfinite(self.h), np.sqrt(self._hv) * Z, 0.0)

    def reconstruct(self, omega):
        if not self.sizes:
            return np.asarray(omega, float)
        return np.fft.ifftn(omega, axes=tuple(range(len(self.sizes))), norm="ortho").real

    def var_kron(self, Wc):
        if not self.sizes:
            return np.asarray(self._hv)
        Phi = tuple(ff.gamma_rows(W, (W.shape[1],)) for W in Wc)
        return kron_apply(Phi, self._hv)

    def trace_kron(self, Gs):
        if not self.sizes:
            return float(self._hv)
        g = tuple(ff.gamma_1d(G)[None, :] for G in Gs)
        return float(kron_apply(g, self._hv).sum())

    def var_dense(self, P):
        g = ff.gamma_rows(P, self.sizes)
        return np.sum(g.reshape(g.shape[0], -1) * self._hv.reshape(-1), axis=1)

    def trace_dense(self, G):
        return float(np.sum(ff.gamma_dense(G, self.sizes) * self._hv))


def empty_mech() -> KronMech:
    """The total count (no attributes): B = [1], loss filled in by the caller."""
    return KronMech((), (), (), "exact")
