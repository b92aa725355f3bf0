"""dpmatrix: differentially private marginals and linear queries with matrix mechanisms."""

from .domain import Attribute, Domain
from .errors import (
    BudgetError,
    DataError,
    DomainError,
    DPMatrixError,
    NotMeasuredError,
    PlanError,
    ReleaseError,
    UnknownAttributeError,
    WorkloadError,
)

__version__ = "0.1.0"
