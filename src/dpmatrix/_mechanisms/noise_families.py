"""Noise families as objects: one registered object per kind of noise a mechanism can add.

A :class:`~dpmatrix._mechanisms.linear.LinearMechanism` names its family (``mech.family``); the
measurement draws that family's noise through the object registered under the name, so adding a
family is one class and one :func:`register_noise_family` call, not a branch in every caller.

=======================  ==================================================================
family                   noise added to ``L(x_A)``, per mechanism (``scale`` = its parameter)
=======================  ==================================================================
``gaussian``             ``H(√σ² z)``, ``z`` i.i.d. standard normal from a numpy Generator
                         (floating point: not a cryptographic source)
``discrete_gaussian``    i.i.d. exact discrete Gaussian ``N_Z(0, σ̄²)`` (Canonne, Kamath &
                         Steinke) on integer outputs
``lattice_gaussian``     the same exact discrete Gaussian, of variance parameter ``τ²``, on the
                         lattice's snapped integers (:mod:`dpmatrix._mechanisms.lattice`)
``discrete_laplace``     i.i.d. exact discrete Laplace ``P(y) ∝ e^{-ε_g|y|}`` on integer outputs;
                         every mechanism's draws in one vectorized call
=======================  ==================================================================

Exact families draw from ``rng`` when one is given (reproducible, NOT private) and from the OS
CSPRNG otherwise; the Gaussian family always draws from a numpy Generator.

Besides ``draw`` (one noise array per listed mechanism), a family offers ``sample(scale, size,
rng)``: ``size`` i.i.d. draws of one scale, for mechanisms that apply their own noise map to a
batch of draws (the residual mechanisms, :mod:`dpmatrix._measure.residual_records`). ``splits``
says whether drawing a list of mechanisms in several calls consumes ``rng`` exactly as one call
does (true for the families that draw mechanism by mechanism; false for the vectorized discrete
Laplace), so a measurement may draw a plan's noise batch by batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import PlanError
from .laplace import sample_discrete_laplace_many
from .samplers import sample_discrete_gaussian

__all__ = ["NoiseFamily", "noise_family", "noise_family_names", "register_noise_family"]


@runtime_checkable
class NoiseFamily(Protocol):
    """How one kind of noise is drawn and added (module docstring)."""

    name: str
    #: integer noise from exact samplers (the randomness is the OS CSPRNG's unless seeded)
    exact: bool
    #: drawing a list in consecutive parts consumes ``rng`` as drawing it at once
    splits: bool

    def draw(self, mechs: Sequence[Any], rng: Any) -> list[np.ndarray]:
        """One noise array per mechanism, in their order (``rng``: the caller's source)."""
        ...

    def sample(self, scale: Any, size: int, rng: Any) -> np.ndarray:
        """``size`` i.i.d. draws of the family's noise at ``scale`` (a flat array)."""
        ...

    def add(self, signal: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``signal + noise`` in the family's arithmetic."""
        ...


class GaussianFamily:
    """Floating-point Gaussian noise ``H(√σ² z)`` (``noise_map`` ``H`` optional)."""

    name = "gaussian"
    exact = False
    splits = True

    def draw(self, mechs: Sequence[Any], rng: Any) -> list[np.ndarray]:
        gen = rng if rng is not None else np.random.default_rng()
        out = []
        for m in mechs:
            z = math.sqrt(float(m.scale)) * gen.standard_normal(m.noise_shape)
            out.append(z if m.noise_map is None else m.noise_map(z))
        return out

    def sample(self, scale: Any, size: int, rng: Any) -> np.ndarray:
        """``√scale · z`` with ``z`` standard normal (``scale = 1`` gives ``z`` itself, bit for bit)."""
        gen = rng if rng is not None else np.random.default_rng()
        z = gen.standard_normal(int(size))
        return z if float(scale) == 1.0 else math.sqrt(float(scale)) * z

    def add(self, signal: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return np.asarray(signal + noise)


def _add_integers(signal: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Exact integer addition (object arithmetic beyond int64)."""
    z = np.asarray(noise, dtype=np.int64).reshape(signal.shape)
    if signal.dtype == object or np.max(np.abs(signal), initial=0) >= 2**62:
        return np.asarray(signal.astype(object) + z.astype(object))
    return np.asarray(signal + z)


class DiscreteGaussianFamily:
    """Exact discrete Gaussian of variance parameter ``scale`` (a Fraction) per output."""

    exact = True
    splits = True

    def __init__(self, name: str):
        self.name = name

    def draw(self, mechs: Sequence[Any], rng: Any) -> list[np.ndarray]:
        return [np.asarray(sample_discrete_gaussian(m.scale, math.prod(m.noise_shape), rng), dtype=np.int64)
                for m in mechs]

    def sample(self, scale: Any, size: int, rng: Any) -> np.ndarray:
        """``size`` exact ``N_Z(0, scale)`` draws (``scale`` a Fraction)."""
        return sample_discrete_gaussian(scale, int(size), rng)

    def add(self, signal: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return _add_integers(signal, noise)


class DiscreteLaplaceFamily:
    """Exact discrete Laplace of parameter ``ε_g = scale`` (a Fraction) per output; all draws
    in one vectorized call."""

    name = "discrete_laplace"
    exact = True
    splits = False  # one vectorized call for every mechanism

    def draw(self, mechs: Sequence[Any], rng: Any) -> list[np.ndarray]:
        if not mechs:
            return []
        return list(sample_discrete_laplace_many([m.scale for m in mechs],
                                                 [math.prod(m.noise_shape) for m in mechs], rng))

    def sample(self, scale: Any, size: int, rng: Any) -> np.ndarray:
        """``size`` exact discrete Laplace draws of parameter ``ε_g = scale``."""
        (out,) = sample_discrete_laplace_many([scale], [int(size)], rng)
        return np.asarray(out)

    def add(self, signal: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return signal + np.asarray(noise, dtype=np.int64).reshape(signal.shape)


_FAMILIES: dict[str, NoiseFamily] = {}


def register_noise_family(family: NoiseFamily) -> NoiseFamily:
    """Make ``family`` available under ``family.name``."""
    _FAMILIES[family.name] = family
    return family


def noise_family(name: str) -> NoiseFamily:
    """The family registered as ``name`` (a PlanError names the known ones otherwise)."""
    try:
        return _FAMILIES[name]
    except KeyError:
        raise PlanError(f"noise family must be one of {noise_family_names()}, got {name!r}") from None


def noise_family_names() -> tuple[str, ...]:
    """Every registered family's name."""
    return tuple(_FAMILIES)


for _family in (GaussianFamily(), DiscreteGaussianFamily("discrete_gaussian"), DiscreteLaplaceFamily(),
                DiscreteGaussianFamily("lattice_gaussian")):
    register_noise_family(_family)
