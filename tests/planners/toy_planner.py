"""A toy planner, to show what adding a planner takes: one module and one registration line.

Every cell of every workload marginal is measured directly with the same Gaussian noise. A record
adds 1 to one cell of each of the ``k`` marginals, so ``max diag(BᵀΣ⁻¹B) = k/σ²`` and the budget
``pcost`` gives ``σ² = k/pcost``; every cell's variance is ``σ²`` (plain marginals only).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from dpmatrix._mechanisms.linear import LinearMechanism
from dpmatrix._privacy import Budget, PrivacyReport
from dpmatrix._reconstruct.estimator import EntryAnswer, Estimator
from dpmatrix._reconstruct.measurements import axis_labels
from dpmatrix._workload import Workload
from dpmatrix.errors import PlanError
from dpmatrix.planners._base import PlanBase
from dpmatrix.planners._formats import plan_format
from dpmatrix.planners._registry import PlannerSpec

TOY_FORMAT = "tests.toy_identity_plan/1"


@plan_format(TOY_FORMAT)
@dataclass(frozen=True, eq=False)
class IdentityPlan(PlanBase, PrivacyReport):
    workload: Workload
    spent: Budget

    @property
    def budget(self) -> Budget:
        return self.spent

    @property
    def domain(self):
        return self.workload.domain

    @cached_property
    def sigma2(self) -> float:
        return len(self.workload) / self.spent.pcost

    def _shape(self, key):
        return tuple(self.domain.sizes[a] for a in key)

    def _variance(self, key):
        if key not in self.workload.sets:
            raise PlanError(f"{self.domain.names_of(key)} is not a workload marginal")
        return np.full(self._shape(key), self.sigma2)

    def _query_variance(self, key):
        return self._variance(key)

    def total_variance(self) -> float:
        return float(sum(np.prod(self._shape(s)) for s in self.workload.sets)) * self.sigma2

    def rmse(self) -> float:
        return float(np.sqrt(self.sigma2))

    def max_variance(self) -> float:
        return self.sigma2

    def table(self) -> pd.DataFrame:
        return pd.DataFrame({"marginal": [",".join(self.workload.names(i)) for i in range(len(self.workload))],
                             "variance": self.sigma2})

    def to_dict(self):
        return {"format": TOY_FORMAT, "domain": self.domain.to_dict(), "workload": self.workload.to_dict(),
                "pcost": self.spent.pcost}

    @classmethod
    def from_dict(cls, spec):
        from dpmatrix._domain import Domain

        domain = Domain.from_dict(spec["domain"])
        return cls(Workload.from_dict(domain, spec["workload"]), Budget(float(spec["pcost"])))

    def mechanisms(self, *, noise=None, rel_var_tol=1e-4):
        if noise not in (None, "auto", "gaussian"):
            raise PlanError(f"the toy planner draws floating-point Gaussian noise only, not {noise!r}")
        return self, [LinearMechanism.dense(s, s, np.eye(int(np.prod(self._shape(s)))), self.sigma2)
                      for s in self.workload.sets]

    def estimator(self, noisy):
        return IdentityEstimator(self, noisy)


class IdentityEstimator(Estimator):
    def __init__(self, plan: IdentityPlan, noisy):
        self.plan, self.noisy = plan, noisy

    def estimate(self, key):
        self.plan._variance(key)  # a workload marginal, or a PlanError
        return np.asarray(self.noisy[key], dtype=float).reshape(self.plan._shape(key))

    def variance(self, key):
        return self.plan._variance(key)

    def entries(self):
        return iter(range(len(self.plan.workload)))

    def entry_of(self, key):
        return self.plan.workload.index(key)

    def entry(self, i):
        wk, dom = self.plan.workload, self.plan.domain
        key = tuple(wk.sets[i])
        labels = axis_labels(dom, key, wk.types(i), [wk.query_matrix(a, t) for a, t in zip(key, wk.types(i))])
        return EntryAnswer(dom.names_of(key), dom.names_of(key), labels, self.estimate(key), self.variance(key))


@dataclass(frozen=True, kw_only=True)
class IdentityOptions:
    pass


TOY = PlannerSpec(name="toy-identity", options=IdentityOptions, formats=(TOY_FORMAT,),
                  plan=lambda wk, budget, options: IdentityPlan(wk, Budget(budget.pcost)))
