"""The measurement protocol is general: a plan with one dense strategy matrix over the cells of an
attribute subset (the shape of an explicit-strategy plan) is measured by ``dm.measure`` and
answered through ``Measurements`` with no code of its own beyond ``mechanisms`` and ``estimator``.
Expected values come from explicit matrices and the generator's own draws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._mechanisms.linear import LinearMechanism
from dpmatrix._reconstruct.estimator import EntryAnswer, Estimator

DOM = dm.Domain({"a": 2, "b": 3, "c": 2})
ATTRS = (0, 1)
A = np.array([[1.0, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0],
              [0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 1, 0], [1, 1, 0, 0, 0, 0]])
SIGMA2 = 2.5


class _DensePlan(dm.PlanBase):
    """Toy explicit-strategy plan: ``y = A x_ab + N(0, σ² I)``, GLS on the cells of ``(a, b)``."""

    domain = DOM
    workload = dm.Workload(DOM, [("a", "b")])

    @property
    def budget(self):
        return dm.Budget(float(np.max(np.sum(A * A, axis=0))) / SIGMA2)

    def _cov(self):
        return SIGMA2 * np.linalg.inv(A.T @ A)

    def _sum_map(self, key):  # cells of (a, b) -> cells of key ⊆ (a, b)
        full = np.eye(6).reshape(2, 3, 6)
        drop = tuple(i for i, x in enumerate(ATTRS) if x not in key)
        return full.sum(axis=drop).reshape(-1, 6) if drop else full.reshape(6, 6)

    def _variance(self, key):
        P = self._sum_map(key)
        return np.diag(P @ self._cov() @ P.T).reshape(tuple(DOM.sizes[i] for i in key))

    _query_variance = _variance

    def total_variance(self):
        return float(self._variance(ATTRS).sum())

    def rmse(self):
        return float(np.sqrt(self._variance(ATTRS).mean()))

    def max_variance(self):
        return float(self._variance(ATTRS).max())

    def table(self):
        return pd.DataFrame({"rows": [A.shape[0]], "sigma2": [SIGMA2]})

    def to_dict(self):
        return {"format": "toy"}

    def measure(self, data, *, rng=None, **options):
        return dm.measure(self, data, rng=rng, **options)

    # -- the measurement protocol --
    def mechanisms(self, *, noise=None, rel_var_tol=1e-4):
        return self, [LinearMechanism.dense("strategy", ATTRS, A, SIGMA2)]

    def estimator(self, noisy):
        plan = self

        class _GLS(Estimator):
            cells = np.linalg.solve(A.T @ A, A.T @ noisy["strategy"])

            def estimate(self, key):
                return (plan._sum_map(key) @ self.cells).reshape(tuple(DOM.sizes[i] for i in key))

            def variance(self, key):
                return plan._variance(key)

            def covariance(self, key):
                P = plan._sum_map(key)
                return P @ plan._cov() @ P.T

            def entries(self):
                return iter([0])

            def entry_of(self, key):
                return 0

            def entry(self, i):
                return EntryAnswer(("a", "b"), ("a", "b"), [None, None], self.estimate(ATTRS), self.variance(ATTRS))

        return _GLS()


def test_dense_strategy_plan_through_the_one_path():
    df = pd.DataFrame({"a": [0, 1, 1, 0, 1], "b": [2, 0, 2, 2, 1], "c": [0, 1, 0, 0, 1]})
    x = np.zeros((2, 3))
    for a, b in zip(df["a"], df["b"]):
        x[a, b] += 1
    plan = _DensePlan()
    meas = dm.measure(plan, df, rng=np.random.default_rng(4))
    # the noisy output is A x + sqrt(σ²) z with z the generator's standard normal draws
    z = np.random.default_rng(4).standard_normal(A.shape[0])
    np.testing.assert_allclose(meas.noisy["strategy"], A @ x.reshape(-1) + np.sqrt(SIGMA2) * z, atol=1e-12)
    assert (meas.noise, meas.randomness) == ("gaussian", "seeded_insecure")  # a user generator: not private
    # tidy tables through Measurements: GLS cells, their sums, exact variances, linear queries
    y = meas.noisy["strategy"]
    cells = np.linalg.lstsq(A, y, rcond=None)[0]
    t = meas.marginal(("a", "b"))
    np.testing.assert_allclose(t["estimate"], cells, atol=1e-9)
    np.testing.assert_allclose(t["variance"], SIGMA2 * np.diag(np.linalg.inv(A.T @ A)), rtol=1e-12)
    np.testing.assert_allclose(meas.marginal("b")["estimate"], cells.reshape(2, 3).sum(axis=0), atol=1e-9)
    q = meas.query({"a": 1, "b": (0, 1)})
    sel = np.array([0, 0, 0, 1, 1, 0.0])
    assert q.estimate == pytest.approx(sel @ cells)
    assert q.variance == pytest.approx(SIGMA2 * sel @ np.linalg.inv(A.T @ A) @ sel)
    names, table = next(meas.iter_marginals())
    assert names == ("a", "b") and len(table) == 6
