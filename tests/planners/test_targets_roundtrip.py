"""A targets plan read back from a plan file or a release keeps its target report.

The expected report is the one of the plan as planned (same process); the targets must come back
query by query (including unequal targets inside one group), the achieved variances must be the
loaded plan's own (checked against an explicit numpy computation from its strategy), and files
that do not fit are refused.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._plan_file import load_plan
from dpmatrix.cli import main
from dpmatrix.errors import PlanError
from dpmatrix.planners._dispatch import plan_from_dict
from dpmatrix.planners._explicit.plan import ExplicitStrategyPlan
from dpmatrix.planners._targets import TargetedPlan
from dpmatrix.planners._targets_io import with_target_report

DF = pd.DataFrame({"a": [0, 0, 1, 2, 2, 2, 1, 3], "b": [0, 1, 1, 0, 1, 1, 0, 1]})


def _same_report(back, plan):
    assert type(back) is type(plan) and type(back.plan) is type(plan.plan)
    pd.testing.assert_frame_equal(back.target_table(), plan.target_table())
    assert back.certificate() == pytest.approx(plan.certificate())
    for t0, t1 in zip(plan.target_report.targets, back.target_report.targets):
        np.testing.assert_array_equal(t1, t0)
    for a0, a1 in zip(plan.target_report.achieved, back.target_report.achieved):
        np.testing.assert_allclose(a1, a0, rtol=1e-12)


def _query_plan():
    dom = dm.Domain({"a": 4, "b": 2})
    qw = (dm.QueryWorkload(dom)
          .add_explicit("a", np.tril(np.ones((4, 4))), label="prefix a")
          .add_explicit(("a", "b"), np.eye(8), label="cells"))
    # unequal targets inside the first group: only a per-query record brings them back
    return dm.plan(qw, targets={"prefix a": [1.0, 2.0, 3.0, 4.0], "cells": 2.5})


def test_explicit_targets_plan_release_round_trip(tmp_path):
    plan = _query_plan()
    assert isinstance(plan, TargetedPlan) and isinstance(plan.plan, ExplicitStrategyPlan)
    dm.write_release(plan.measure(DF, rng=np.random.default_rng(1)), tmp_path / "rel")
    back = dm.load_release(tmp_path / "rel").plan
    _same_report(back, plan)
    # achieved = w (AᵀA)⁺ wᵀ of the loaded strategy (numpy only)
    P = np.linalg.pinv(back.strategy.T @ back.strategy) * back.sigma2
    W = np.kron(np.tril(np.ones((4, 4))), np.ones((1, 2)))  # prefix of a over the (a, b) cells
    np.testing.assert_allclose(back.target_report.achieved[0], np.einsum("ij,jk,ik->i", W, P, W), rtol=1e-9)


def test_residual_targets_plan_release_round_trip(tmp_path):
    wk = dm.Workload(dm.Domain({"a": 4, "b": 2}), [("a", "b"), ("a",)])
    plan = dm.plan(wk, targets={"a,b": 3.0, "a": 1.0})
    assert isinstance(plan, TargetedPlan) and isinstance(plan.plan, dm.ResidualPlan)
    meas = plan.measure(DF, rng=np.random.default_rng(2), noise="gaussian_float")
    dm.write_release(meas, tmp_path / "rel")
    _same_report(dm.load_release(tmp_path / "rel").plan, plan)


@pytest.mark.parametrize("make", ["query", "marginal"])
def test_plan_dict_round_trip(make):
    plan = _query_plan() if make == "query" else dm.plan(
        dm.Workload(dm.Domain({"a": 4, "b": 2}), [("a",), ("b",)]), targets={"a": 2.0, "b": 0.5}, rho=1.0)
    _same_report(plan_from_dict(json.loads(json.dumps(plan.to_dict()))), plan)


def test_cli_plan_save_keeps_the_targets(tmp_path, capsys):
    dom = tmp_path / "d.json"
    dom.write_text(json.dumps({"age": 6, "sex": 2, "race": 3}))
    saved = tmp_path / "plan.json"
    rc = main(["plan", "--domain", str(dom), "--workload", "age,sex;race", "--target", "age,sex=std<=3",
               "--target", "race=var<=2", "--save", str(saved)])
    _, err = capsys.readouterr()
    assert rc == 0, err
    back = load_plan(saved)
    wk = dm.Workload(dm.Domain({"age": 6, "sex": 2, "race": 3}), [("age", "sex"), ("race",)])
    _same_report(back, dm.plan(wk, targets={"age,sex": 9.0, "race": 2.0}))
    t = back.target_table().set_index("marginal")
    assert t.loc["age,sex", "target"] == 9.0 and t.loc["race", "achieved"] == pytest.approx(2.0, rel=1e-7)
    # and a release from the saved plan records the same targets in its manifest
    DF2 = pd.DataFrame({"age": [0, 1, 5, 3], "sex": [0, 1, 1, 0], "race": [2, 0, 1, 1]})
    DF2.to_csv(tmp_path / "data.csv", index=False)
    rc = main(["release", str(tmp_path / "data.csv"), "--plan", str(saved), "--out", str(tmp_path / "rel"),
               "--seed", "1", "--no-ledger", "--quiet", "--no-report"])
    assert rc == 0, capsys.readouterr().err
    _same_report(dm.load_release(tmp_path / "rel").plan, back)


def test_older_files_without_per_query_targets_use_the_rows():
    wk = dm.Workload(dm.Domain({"a": 3, "b": 2}), [("a",), ("b",)])
    plan = dm.plan(wk, targets={"a": 4.0, "b": 1.0})
    spec = plan.to_dict()
    del spec["targets"]["variances"]
    _same_report(plan_from_dict(spec), plan)  # per-marginal targets: the rows say it all


def test_saved_targets_that_do_not_fit_are_refused():
    plan = _query_plan()
    spec = plan.to_dict()
    bad = dict(spec["targets"], variances=[1.0])
    with pytest.raises(PlanError, match="entries"):
        with_target_report(plan_from_dict({k: v for k, v in spec.items() if k != "targets"}), bad)
    bad = dict(spec["targets"], variances=[[1.0, 2.0], 2.5])
    with pytest.raises(PlanError, match="4 queries but 2 targets"):
        plan_from_dict(dict(spec, targets=bad))
    bad = dict(spec["targets"], variances=[-1.0, 2.5])
    with pytest.raises(PlanError, match="positive"):
        plan_from_dict(dict(spec, targets=bad))
    with pytest.raises(PlanError, match="certificate"):
        plan_from_dict(dict(spec, targets=dict(spec["targets"], certificate={})))
