"""The general unit of measurement: one linear map on one marginal, plus noise of one family.

Every planner's plan is measured as a list of :class:`LinearMechanism` (the protocol in
:mod:`dpmatrix.planners._base`): mechanism ``j`` releases ::

    ω_j = post_j( L_j(x_{A_j}) + H_j(z_j) )

where ``x_{A_j}`` is the count table of the marginal on the attribute set ``A_j`` (axes in domain
order), ``L_j`` a linear map on it (a dense matrix over the flattened table, or any callable),
``z_j`` noise of one family — i.i.d. standard normal scaled by ``√σ²`` (``"gaussian"``), the
exact discrete Gaussian of variance parameter ``σ̄²`` (``"discrete_gaussian"``, Canonne–Kamath–
Steinke), the exact discrete Laplace ``P(y) ∝ e^{-ε_g|y|}`` (``"discrete_laplace"``), or the
lattice mechanism (``"lattice_gaussian"``, :mod:`dpmatrix._mechanisms.lattice`: a real-valued
``C`` snapped exactly to ``k = round(C x/γ)``, exact discrete Gaussian noise of variance
parameter ``τ² = σ̄²/γ²`` on ``k``, then ``γ(k + z)`` as the first post-processing) — and
``H_j`` an optional linear map of the noise (identity: i.i.d. noise on every output; ResidualPlanner's
``Γ`` and WFF's Fourier weights are correlated). ``post_j`` is an optional deterministic
post-processing (e.g. QuerySmasher's map from an integer mechanism back to its own outputs).
Privacy is the plan's business (it chose the scales); this module only states what is run.

Exact discrete noise is added to *integer* outputs of ``L_j`` only (``H_j`` must be the identity):
there is no floating-point Laplace or discrete noise on real-valued rows; a real-valued map is
made integer by the lattice (:meth:`LinearMechanism.lattice`), whose exact cost it carries.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import PlanError
from .lattice import DEFAULT_LATTICE_TOL, LatticeQuery, LatticeSetting, snap
from .noise_families import noise_family, noise_family_names

__all__ = ["LINEAR_KIND", "NOISE_FAMILIES", "LinearKind", "LinearMechanism"]

#: the registered noise families (:mod:`~dpmatrix._mechanisms.noise_families`)
NOISE_FAMILIES = noise_family_names()


@dataclass(frozen=True, eq=False)
class LinearMechanism:
    """One mechanism ``ω = post(L(x_A) + H(z))`` of a plan (module docstring).

    Parameters
    ----------
    key : hashable
        The mechanism's name in :attr:`Measurements.noisy` (unique within a plan).
    attrs : tuple of int
        Sorted attribute positions ``A`` whose count table ``L`` reads.
    apply : callable
        ``L``: count table (shape ``sizes[A]``) → outputs (any shape).
    noise_shape : tuple of int
        Shape of the noise draw ``z``.
    family : {"gaussian", "discrete_gaussian", "discrete_laplace", "lattice_gaussian"}
    scale : float or Fraction
        ``σ²`` of each standard normal draw (gaussian), ``σ̄²`` as a Fraction (discrete
        Gaussian), ``ε_g`` as a Fraction (discrete Laplace), or ``τ² = σ̄²/γ²`` as a Fraction
        (lattice: the integer noise's variance parameter).
    noise_map : callable, optional
        ``H`` applied to the scaled draw; ``None`` is the identity (i.i.d. noise).
    post : callable, optional
        Deterministic post-processing of ``L(x) + H(z)``.
    lattice : LatticeSetting, optional
        The lattice family's query ``C``, ``σ̄``, exponent ``f`` and exact cost ``ρ`` (required
        for that family, absent otherwise).
    """

    key: Hashable
    attrs: tuple[int, ...]
    apply: Callable[[np.ndarray], np.ndarray]
    noise_shape: tuple[int, ...]
    family: str
    scale: float | Fraction
    noise_map: Callable[[np.ndarray], np.ndarray] | None = None
    post: Callable[[np.ndarray], np.ndarray] | None = None
    lattice: LatticeSetting | None = None

    def __post_init__(self) -> None:
        noise_family(self.family)  # a registered family, or a PlanError naming them
        if self.family != "gaussian" and self.noise_map is not None:
            raise PlanError("exact discrete noise is added independently to integer outputs: no noise_map")
        if (self.family == "lattice_gaussian") != (self.lattice is not None):
            raise PlanError("the lattice_gaussian family needs its LatticeSetting (and only it does)")
        if self.lattice is not None and self.scale != self.lattice.tau2:
            raise PlanError("a lattice mechanism's scale is its setting's τ² = σ̄²/γ²")

    @classmethod
    def lattice_of(
        cls,
        key: Hashable,
        attrs: tuple[int, ...],
        query: LatticeQuery,
        sigma_bar: Fraction,
        *,
        pre: Callable[[np.ndarray], np.ndarray] | None = None,
        post: Callable[[np.ndarray], np.ndarray] | None = None,
        tol: float = DEFAULT_LATTICE_TOL,
    ) -> LinearMechanism:
        """The lattice mechanism ``ω = post(γ(round(C pre(x_A)/γ) + z))``, ``z ~ N_Z(0, σ̄²/γ²)``:
        the real-valued ``ω = post(C pre(x_A) + N(0, σ̄² I))`` run with exact integer noise
        (:mod:`dpmatrix._mechanisms.lattice`; its cost is ``lattice.rho``).

        Parameters
        ----------
        key : hashable
        attrs : tuple of int
            Sorted attribute positions.
        query : LatticeQuery
            ``C``: the float matrices actually snapped.
        sigma_bar : fractions.Fraction
            Rational noise scale ``σ̄`` (on the scale of ``C x``).
        pre : callable, optional
            Count table → ``C``'s input (e.g. a flattening); identity if omitted.
        post : callable, optional
            Post-processing applied after the map back to ``γℤ``.
        tol : float
            Bound on ``γ√m/Δ₂`` (:func:`~dpmatrix._mechanisms.lattice.choose_exponent`).

        Returns
        -------
        LinearMechanism

        Examples
        --------
        >>> from fractions import Fraction
        >>> from dpmatrix._mechanisms.lattice import LatticeQuery
        >>> m = LinearMechanism.lattice_of("S", (0,), LatticeQuery.of([np.array([[0.5, -0.5]])]), Fraction(2))
        >>> m.lattice.f, m.signal(np.array([3, 1])) * 2.0**-m.lattice.f
        (21, array([1.]))
        """
        setting = LatticeSetting.choose(query, sigma_bar, tol=tol)
        f = setting.f

        def apply(t: np.ndarray) -> np.ndarray:
            return snap(query, np.asarray(t if pre is None else pre(t)), f)

        def back(k: np.ndarray) -> np.ndarray:  # γ(k + z): post-processing of the integers
            y = np.asarray(k, dtype=float) * 2.0**-f
            return y if post is None else post(y)

        return cls(key, tuple(attrs), apply, query.output_shape, "lattice_gaussian", setting.tau2,
                   None, back, setting)

    @classmethod
    def dense(cls, key: Hashable, attrs: tuple[int, ...], matrix: np.ndarray, sigma2: float) -> LinearMechanism:
        """``ω = A x_A + N(0, σ² I)`` with a dense strategy ``A`` (rows × cells of ``x_A`` in C order).

        Parameters
        ----------
        key : hashable
        attrs : tuple of int
            Sorted attribute positions.
        matrix : numpy.ndarray
            ``A``, shape ``(rows, Π n_i)``.
        sigma2 : float
            Noise variance of every row.

        Returns
        -------
        LinearMechanism

        Examples
        --------
        >>> import numpy as np
        >>> m = LinearMechanism.dense("S", (0,), np.eye(2), 1.0)
        >>> m.apply(np.array([3, 4]))
        array([3., 4.])
        """
        A = np.asarray(matrix, dtype=float)
        if A.ndim != 2:
            raise PlanError(f"a dense strategy must be a matrix, got shape {A.shape}")
        s2 = float(sigma2)
        if not s2 > 0 or not np.isfinite(s2):
            raise PlanError(f"the noise variance must be positive and finite, got {sigma2!r}")
        return cls(key, tuple(attrs), lambda t: A @ np.asarray(t, dtype=float).reshape(-1),
                   (A.shape[0],), "gaussian", s2)

    @property
    def kind(self) -> LinearKind:
        """How the measurement runs a group of linear mechanisms (:class:`LinearKind`)."""
        return LINEAR_KIND

    def signal(self, table: np.ndarray) -> np.ndarray:
        """``L(x_A)``: exact integer arithmetic for the discrete families."""
        t = np.asarray(table)
        if self.family == "gaussian":
            return np.asarray(self.apply(t.astype(float)))
        if t.dtype.kind not in "iu":
            raise PlanError("exact discrete noise needs an integer count table")
        out = np.asarray(self.apply(t.astype(np.int64)))
        if self.family == "lattice_gaussian" and out.dtype == object:
            return out  # snapped values beyond int64 range: exact Python integers
        if out.dtype.kind not in "iu":
            raise PlanError(f"mechanism {self.key!r}: discrete noise needs integer outputs of the linear map")
        return out


class LinearKind:
    """Runs linear mechanisms: ``ω_j = post_j(L_j(x_{A_j}) + H_j(z_j))`` with the noise of the
    whole group drawn by one ``family.draw`` call, in the group's order."""

    def outputs(self, records, tables, sources, family, rng) -> list[np.ndarray]:
        """One noisy output per mechanism (``sources``: unused, a linear map reads its own table).

        Examples
        --------
        >>> from dpmatrix._mechanisms.noise_families import noise_family
        >>> m = LinearMechanism.dense("S", (0,), np.eye(2), 1e-30)
        >>> LINEAR_KIND.outputs([m], [np.array([3, 4])], [(0,)], noise_family("gaussian"),
        ...                     np.random.default_rng(0))[0].round(6)
        array([3., 4.])
        """
        signals = [m.signal(t) for m, t in zip(records, tables)]
        out = []
        for m, signal, z in zip(records, signals, family.draw(records, rng)):
            y = family.add(signal, z)
            out.append(y if m.post is None else m.post(y))
        return out


#: The one :class:`LinearKind` every :class:`LinearMechanism` is run by.
LINEAR_KIND = LinearKind()
