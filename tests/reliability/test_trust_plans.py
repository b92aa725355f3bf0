"""Saved plans are checked before anything is charged: an edited noise scale with the privacy
statement left alone, or a residual the workload needs removed, is refused at load."""

from __future__ import annotations

import json

import pytest

import dpmatrix as dm
from dpmatrix._plan_file import load_plan
from dpmatrix.errors import PlanError


def _plan():
    return dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3, "c": 2}), [("a", "b"), ("b", "c")]), rho=0.5)


def _save(tmp_path, spec, name="plan.json"):
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return path


def test_an_untouched_plan_file_loads(tmp_path):
    plan = _plan()
    loaded = load_plan(_save(tmp_path, plan.to_dict()))
    assert loaded.rho == pytest.approx(0.5)


def test_an_edited_sigma2_is_refused(tmp_path):
    spec = _plan().to_dict()
    # the probe: sigma^2 / 1000 on one residual, stated rho unchanged
    r = next(r for r in spec["residuals"] if r["attributes"] == ["a", "b"])
    r["sigma2"] /= 1000
    with pytest.raises(PlanError, match=r"states rho = 0\.5, but its noise scales spend rho = .*edited"):
        load_plan(_save(tmp_path, spec))


def test_a_lowered_statement_is_refused(tmp_path):
    spec = _plan().to_dict()
    spec["privacy"]["rho"] = 0.05
    with pytest.raises(PlanError, match="states rho = 0.05"):
        load_plan(_save(tmp_path, spec))


def test_a_plan_without_a_statement_is_refused(tmp_path):
    spec = _plan().to_dict()
    del spec["privacy"]
    with pytest.raises(PlanError, match="states no privacy"):
        load_plan(_save(tmp_path, spec))


def test_a_missing_needed_residual_is_refused_before_any_charge(tmp_path, capsys):
    from dpmatrix.cli import main

    spec = _plan().to_dict()
    spec["residuals"] = [r for r in spec["residuals"] if r["attributes"] != ["b"]]
    path = _save(tmp_path, spec)
    with pytest.raises(PlanError, match="leaves a residual unmeasured that the workload needs"):
        load_plan(path)
    # through the CLI: a one-line error, and the ledger holds no charge
    data = tmp_path / "d.csv"
    data.write_text("a,b,c\n0,1,0\n1,2,1\n")
    led = tmp_path / "ledger.sqlite3"
    rc = main(["release", str(data), "--plan", str(path), "--encoding", "codes", "--out", str(tmp_path / "o"),
               "--ledger", str(led), "-q", "--no-report"])
    err = capsys.readouterr().err
    assert rc == 2 and "leaves a residual unmeasured" in err, err
    assert not led.exists() or dm.Ledger(led).rows() == []


def test_a_querysmasher_plan_file_is_checked_too(tmp_path):
    plan = dm.plan(dm.Workload(dm.Domain({"a": 3, "b": 3}), [("a", "b")]), rho=0.5, planner="querysmasher")
    spec = plan.to_dict()
    assert load_plan(_save(tmp_path, spec)).rho == pytest.approx(0.5)
    spec["privacy"]["rho"] = 0.005
    with pytest.raises(PlanError, match="states rho = 0.005"):
        load_plan(_save(tmp_path, spec, "qs.json"))
