"""Typed errors raised by dpmatrix.

Every user mistake raises a subclass of :class:`DPMatrixError` whose message says what was wrong
and what to do about it. They also subclass the matching builtin (``ValueError``, ``LookupError``)
so generic handlers keep working.
"""

from __future__ import annotations


class DPMatrixError(Exception):
    """Base class of every error dpmatrix raises on bad input or an impossible request."""


class DomainError(DPMatrixError, ValueError):
    """The domain is malformed: bad attribute names, sizes, labels or bins."""


class UnknownAttributeError(DomainError):
    """An attribute name that the domain does not have."""


class WorkloadError(DPMatrixError, ValueError):
    """The workload is malformed: empty, duplicate attributes, bad weights or query types."""


class BudgetError(DPMatrixError, ValueError):
    """The privacy budget is missing, ambiguous, non-finite, zero or negative."""


class DataError(DPMatrixError, ValueError):
    """The data do not match the domain: missing columns, NaNs, codes outside the domain."""


class PlanError(DPMatrixError, ValueError):
    """The selection problem could not be solved (infeasible objective, solver failure)."""


class TargetError(PlanError):
    """Accuracy targets are malformed: non-positive, NaN or infinite values, arrays of the wrong
    length, or a marginal that is not in the workload (the message names it)."""


class NotMeasuredError(DPMatrixError, LookupError):
    """A marginal or query was requested that the measurements cannot answer."""


class ReleaseError(DPMatrixError, ValueError):
    """A release artifact on disk is missing, incomplete or inconsistent."""


class SamplerArgumentError(DPMatrixError, ValueError):
    """A noise-sampler argument (size, random source, backend, tolerance) is invalid."""


class SamplerEnvironmentError(DPMatrixError, RuntimeError):
    """This machine's numerical library breaks an assumption of the exact samplers' proof (so no
    noise is drawn rather than noise whose exactness is not proven)."""
