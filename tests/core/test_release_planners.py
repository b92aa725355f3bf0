"""One measurement path, one Measurements type, one release format for every planner:
QuerySmasher / WFF plans are measured, written, loaded and queried (API and CLI) like
ResidualPlanner plans."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._mechanisms.linear import LinearMechanism
from dpmatrix._queries import QueryWorkload, affine_queries
from dpmatrix._reconstruct.measurements import Measurements
from dpmatrix.cli import main


def _qs_workload():
    dom = dm.Domain({"a": 3, "b": 4})
    return QueryWorkload(dom).add_explicit(("a", "b"), affine_queries(3, 4)).add_kron(("a",), ["prefix"])


DATA = pd.DataFrame({"a": [0, 1, 2, 2, 1], "b": [0, 3, 1, 2, 2]})


def _cli(*argv) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(list(argv)) == 0
    return buf.getvalue()


@pytest.mark.parametrize("planner", ["querysmasher", "wff"])
def test_querysmasher_release_round_trip(tmp_path, planner):
    plan = dm.plan(_qs_workload(), pcost=1.0, planner=planner)
    meas = plan.measure(DATA, rng=np.random.default_rng(5))
    assert type(meas) is Measurements  # the one frozen type
    out = dm.write_release(meas, tmp_path / "rel")
    rel = dm.load_release(out)
    # the plan read back has the same noise scales and privacy
    assert rel.plan.pcost == pytest.approx(plan.pcost, rel=1e-12)
    assert {S: r.sigma2 for S, r in rel.plan.residuals.items()} == {
        S: r.sigma2 for S, r in plan.residuals.items()}
    assert rel.privacy["rho"] == pytest.approx(0.5)
    # answers reconstructed from the saved measurements equal the in-memory ones, and the saved tables
    for i in range(len(plan.workload.groups)):
        want = meas.workload_answer(i)
        got = rel.measurements.workload_answer(i)
        np.testing.assert_allclose(got["estimate"], want["estimate"], rtol=0, atol=1e-9)
        np.testing.assert_allclose(got["variance"], plan.group_variance(i).reshape(-1), rtol=1e-12)
    saved = rel.table(("a",))
    np.testing.assert_allclose(saved["estimate"], meas.workload_answer(1)["estimate"], atol=1e-9)
    # the command line reads the release: list, then one table (csv)
    listing = _cli("query", str(out))
    assert "a,b" in listing and "rho = 0.5" in listing
    csv = pd.read_csv(io.StringIO(_cli("query", str(out), "--marginal", "a", "--format", "csv")))
    np.testing.assert_allclose(csv["estimate"], saved["estimate"], atol=1e-9)


def test_querysmasher_discrete_release_round_trip(tmp_path):
    """Discrete noise re-scores the plan (σ rounded up); the release stores and reloads those σ²."""
    dom = dm.Domain.from_sizes([3, 2])
    plan = dm.plan(dm.Workload.marginals(dom, 2, upto=True), pcost=0.8, planner="querysmasher")
    meas = plan.measure(pd.DataFrame({"a0": [0, 1, 2, 2], "a1": [0, 1, 1, 0]}), noise="discrete_gaussian")
    assert (meas.noise, meas.randomness) == ("discrete_gaussian", "os_csprng")
    rel = dm.load_release(dm.write_release(meas, tmp_path / "rel"))
    assert rel.plan.pcost == pytest.approx(meas.plan.pcost, rel=1e-12) and rel.plan.pcost <= 0.8
    np.testing.assert_allclose(rel.marginal(("a0", "a1"))["estimate"], meas.marginal(("a0", "a1"))["estimate"],
                               atol=1e-9)


@pytest.mark.parametrize("planner", ["querysmasher", "wff"])
def test_querysmasher_default_noise_release_round_trip(tmp_path, planner):
    """Default noise on real-valued spaces is the lattice sampler (re-scored plan, ρ ≤ planned);
    the release stores those σ² and answers from disk as in memory."""
    plan = dm.plan(_qs_workload(), pcost=1.0, planner=planner)
    meas = plan.measure(DATA)
    assert (meas.noise, meas.randomness) == ("lattice_gaussian", "os_csprng")
    assert meas.plan.rho <= plan.rho * (1 + 1e-9) and meas.plan.rho == pytest.approx(0.5, rel=3e-4)
    rel = dm.load_release(dm.write_release(meas, tmp_path / "rel"))
    assert rel.plan.pcost == pytest.approx(meas.plan.pcost, rel=1e-12)
    assert {S: r.sigma2 for S, r in rel.plan.residuals.items()} == {
        S: r.sigma2 for S, r in meas.plan.residuals.items()}
    for i in range(len(plan.workload.groups)):
        np.testing.assert_allclose(rel.measurements.workload_answer(i)["estimate"],
                                   meas.workload_answer(i)["estimate"], rtol=0, atol=1e-9)


def test_querysmasher_plan_from_dict_refuses_other_scales():
    plan = dm.plan(_qs_workload(), pcost=1.0, planner="querysmasher")
    spec = json.loads(json.dumps(plan.to_dict(), default=float))
    spec["residuals"][0]["sigma2"] = spec["residuals"][0]["sigma2"] / 2  # less noise than planned
    with pytest.raises(dm.PlanError, match="noise scale"):
        type(plan).from_dict(spec)


def test_dense_mechanism_is_a_general_unit():
    """An explicit-strategy plan's unit: ``A x_S + N(0, σ² I)`` on the flattened marginal of S
    (checked against the explicit product on the table of two records)."""
    A = np.array([[1.0, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [0.5, -1, 0, 2, 0, 1]])
    m = LinearMechanism.dense("A", (0, 1), A, 2.0)
    table = np.zeros((2, 3), dtype=np.int64)
    table[0, 2] += 1
    table[1, 0] += 1
    np.testing.assert_allclose(m.signal(table), A @ np.array([0, 0, 1, 1, 0, 0.0]))
    assert (m.family, m.scale, m.noise_shape) == ("gaussian", 2.0, (3,))
    with pytest.raises(dm.PlanError):
        LinearMechanism.dense("A", (0,), A, math.nan)
