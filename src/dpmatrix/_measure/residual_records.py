"""Residual mechanisms as measurement records: what a ResidualPlanner(+) plan's ``mechanisms(noise)``
lists, and how a group of them applies its query and noise.

A residual mechanism on the attribute set ``A`` releases ``ω_A = (⊗ Sub_i) v_A + σ_A (⊗ Γ_i) z``
(Algorithm 1 / 5; ``v_A`` the marginal on ``A``). It reads one marginal table like any other
mechanism, so the one executor (:mod:`dpmatrix._measure.executor`) counts and hands out its
tables; only the arithmetic is specific, and it is done for a whole count batch at once:

* :data:`RESIDUAL_GAUSSIAN` (``"gaussian"``): the batch's residuals of equal factors and column
  pattern are stacked and ``Sub`` and ``Γ`` applied to the stack
  (:func:`~dpmatrix._mechanisms.residual.apply_sub` takes leading batch axes); the standard
  normal draws of the whole batch are one ``family.sample`` call, in record order — the stream of
  the one-mechanism-at-a-time algorithm;
* :data:`RESIDUAL_DISCRETE` (``"discrete_gaussian"``): Algorithm 3 on the integer marginals,
  one exact sampler call per noise scale and shape
  (:func:`~dpmatrix._measure.discrete.discrete_measure_many`);
* :data:`RESIDUAL_LATTICE` (``"lattice_gaussian"``): the lattice form of each residual
  (:func:`~dpmatrix._measure.secure.residual_lattice_form`) measured exactly.

:func:`residual_records` sizes the noise before any data are read: σ rounded up to rationals
for discrete noise, σ̄ and the exact lattice spend for lattice noise, and returns the re-scored
plan that is actually measured with its records, in the order the executor counts them
(:func:`~dpmatrix._measure.counting.count_order`), so that records are measured batch by batch.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from .._linalg.kron import kron_apply
from .._mechanisms.lattice import (
    DEFAULT_LATTICE_TOL,
    LatticeQuery,
    choose_exponent,
    lattice_measure,
    lattice_rho,
    max_exponent,
)
from .._mechanisms.residual import ResidualMechanism, apply_sub
from .._workload import AttrSet
from ..errors import DataError
from .counting import count_order
from .discrete import discrete_measure_many, round_plan
from .secure import lattice_sigma_bar, rescored_sigma2, residual_lattice_form

__all__ = [
    "RESIDUAL_DISCRETE",
    "RESIDUAL_GAUSSIAN",
    "RESIDUAL_LATTICE",
    "DiscreteResidual",
    "GaussianResidual",
    "LatticeResidual",
    "residual_records",
]


class ResidualGaussianKind:
    """Floating-point Gaussian residual measurements of one count batch (module docstring)."""

    def outputs(self, records, tables, sources, family, rng) -> list[np.ndarray]:
        sizes = [math.prod(r.bases[a].n_noise for a in r.key) for r in records]
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        z_all = family.sample(1.0, int(offsets[-1]), rng)  # standard normal, in record order
        groups: dict[tuple, list[int]] = {}  # (factors of the counted set, column pattern)
        for j, (r, m) in enumerate(zip(records, sources)):
            cols = tuple(m.index(a) for a in r.key)
            groups.setdefault((tuple(id(r.bases[a]) for a in m), cols), []).append(j)
        out: list[np.ndarray | None] = [None] * len(records)
        for members in groups.values():
            first = records[members[0]]
            sub_bases = tuple(first.bases[a] for a in first.key)
            v = np.asarray(np.stack([tables[j] for j in members]), dtype=float)
            noise_shape = tuple(b.n_noise for b in sub_bases)
            at = offsets[np.asarray(members)]
            z = z_all[at[:, None] + np.arange(sizes[members[0]])].reshape((len(members),) + noise_shape)
            signal = apply_sub(sub_bases, v, "Sub")
            noise = apply_sub(sub_bases, z, "Gamma")
            scale = np.sqrt(np.array([records[j].sigma2 for j in members])).reshape((-1,) + (1,) * len(first.key))
            omega = signal + scale * noise
            for row, j in enumerate(members):
                out[j] = omega[row]
        return out  # type: ignore[return-value]


class ResidualDiscreteKind:
    """Exact discrete Gaussian residual measurements (Algorithm 3) of one count batch."""

    def outputs(self, records, tables, sources, family, rng) -> list[np.ndarray]:
        mechs = [ResidualMechanism(r.key, tuple(r.bases[a] for a in r.key), r.sigma2) for r in records]
        return discrete_measure_many(mechs, list(tables), [r.sigma_bar for r in records], rng, sample=family.sample)


class ResidualLatticeKind:
    """Lattice residual measurements: ``(⊗ P_i) γ(round(C v/γ) + z)`` per residual."""

    def outputs(self, records, tables, sources, family, rng) -> list[np.ndarray]:
        out = []
        for r, table in zip(records, tables):
            v = np.asarray(table)
            if v.dtype.kind not in "iu":
                raise DataError("the lattice mechanism needs integer marginal counts")
            res = lattice_measure(r.query, v, r.sigma_bar, rng, tol=r.tol, sample=family.sample)
            out.append(kron_apply(r.post, res.values))
        return out


RESIDUAL_GAUSSIAN = ResidualGaussianKind()
RESIDUAL_DISCRETE = ResidualDiscreteKind()
RESIDUAL_LATTICE = ResidualLatticeKind()


#: The ``attrs`` of every residual record: the attribute set it reads is its key (a named tuple
#: takes no base class to hold it, so each record names this one property).
_ATTRS_ARE_KEY = property(operator.attrgetter("key"), doc="The attribute set the residual reads: its key.")


class GaussianResidual(NamedTuple):
    """The residual on ``key`` with floating-point Gaussian noise of variance ``sigma2``
    (``bases``: the plan's per-attribute factors). A plan has one per measured residual set
    (10⁴–10⁶): a named tuple is cheap to make."""

    key: AttrSet
    sigma2: float
    bases: tuple
    family = "gaussian"
    kind = RESIDUAL_GAUSSIAN
    attrs = _ATTRS_ARE_KEY


class DiscreteResidual(NamedTuple):
    """The residual on ``key`` with exact discrete noise, σ̄ = ``sigma_bar`` (``sigma2``: the
    rounded plan's σ̄² as a float, ``bases``: its per-attribute factors)."""

    key: AttrSet
    sigma_bar: Fraction
    sigma2: float
    bases: tuple
    family = "discrete_gaussian"
    kind = RESIDUAL_DISCRETE
    attrs = _ATTRS_ARE_KEY


class LatticeResidual(NamedTuple):
    """The residual on ``key`` measured on a lattice: integer form ``query``, post-processing
    factors ``post``, noise scale ``sigma_bar`` and lattice tolerance ``tol``."""

    key: AttrSet
    query: LatticeQuery
    post: tuple
    sigma_bar: Fraction
    tol: float
    family = "lattice_gaussian"
    kind = RESIDUAL_LATTICE
    attrs = _ATTRS_ARE_KEY


def _measured_in_count_order(plan) -> list[tuple[AttrSet, int]]:
    closure = plan.closure
    sets = [s for s, on in zip(closure.sets, plan.measured) if on]
    return [(sub, closure.index(sub)) for sub in count_order(sets)]


def _gaussian(plan, rel_var_tol: float) -> tuple[Any, list]:
    bases = plan.bases
    return plan, [GaussianResidual(sub, float(plan.sigma2[i]), bases) for sub, i in _measured_in_count_order(plan)]


def _discrete(plan, rel_var_tol: float) -> tuple[Any, list]:
    rounded, sigma_bar = round_plan(plan, rel_var_tol)
    bases = rounded.bases
    return rounded, [DiscreteResidual(sub, sigma_bar[i], float(rounded.sigma2[i]), bases)
                     for sub, i in _measured_in_count_order(rounded)]


def _lattice(plan, rel_var_tol: float, tol: float = DEFAULT_LATTICE_TOL) -> tuple[Any, list]:
    """σ̄, γ and the exact ρ of every residual, and the re-scored plan (:mod:`.secure`)."""
    forms = {}
    new = np.array(plan.sigma2, dtype=float)
    rounded: dict[tuple[float, int], Fraction] = {}  # few distinct (σ², scale): round each once
    for i, (sub, on) in enumerate(zip(plan.closure.sets, plan.measured)):
        if not on:
            continue
        mech = plan.mechanism(sub)
        q, post, scale = residual_lattice_form(mech.bases)
        key = (float(plan.sigma2[i]), scale)
        sb = rounded.get(key)
        if sb is None:
            sb = rounded[key] = lattice_sigma_bar(key[0], scale, rel_var_tol=rel_var_tol, tol=tol)
        f = min(choose_exponent(q, tol=tol), max_exponent(sb))
        forms[sub] = LatticeResidual(sub, q, post, sb, tol)
        new[i] = rescored_sigma2(float(mech.pcost_coef), lattice_rho(q, sb, f), float(plan.sigma2[i]))
    measured = plan._with_sigma2(new)
    return measured, [forms[sub] for sub, _ in _measured_in_count_order(measured)]


_SIZING = {"gaussian": _gaussian, "discrete_gaussian": _discrete, "lattice_gaussian": _lattice}


def residual_records(plan, noise: str, rel_var_tol: float = 1e-4) -> tuple[Any, list]:
    """``(plan measured, records)`` of a ResidualPlanner(+) plan for the sampler ``noise``.

    Parameters
    ----------
    plan : ResidualPlan
    noise : {"gaussian", "discrete_gaussian", "lattice_gaussian"}
        A resolved sampler (:func:`~dpmatrix._measure.secure.resolve_noise`).
    rel_var_tol : float
        Largest relative variance increase from rounding σ for exact noise.

    Returns
    -------
    (ResidualPlan, list)
        The plan actually measured (re-scored for exact noise) and one record per measured
        residual, in count order.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")]), rho=1.0)
    >>> measured, records = residual_records(plan, "discrete_gaussian")
    >>> [r.key for r in records], {r.family for r in records}
    ([(0, 1), (0,), (1,), ()], {'discrete_gaussian'})
    """
    try:
        sizing = _SIZING[noise]
    except KeyError:
        raise DataError(f"a residual plan is measured with one of {', '.join(_SIZING)}; got {noise!r}") from None
    return sizing(plan, rel_var_tol)
