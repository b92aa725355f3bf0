"""Reading a plan back loads only the planner its file names: ``load_plan`` and
``plan_from_dict`` look the plan class up by the file's ``"format"`` (as reading a release
does), never import every built-in planner, and reading loads no optimizer (SciPy's
``optimize`` / ``stats``, CVXPY) — those are for planning. Each case runs in a fresh interpreter
and lists ``sys.modules``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix._workload_spec import parse_workload

SRC = Path(__file__).resolve().parents[2] / "src"
PLANNERS = ("_residual", "_pure", "_querysmasher", "_explicit", "_targets", "_targets_io", "_builtin", "_dispatch")
OPTIMIZERS = ("scipy.optimize", "scipy.stats", "cvxpy")

DOM = dm.Domain({"a": 8, "b": 4, "c": 2})


def _residual():
    return dm.plan(dm.Workload(DOM, [("a",), ("a", "b")]), rho=0.5)


def _pure():
    return dm.plan(dm.Workload(DOM, [("a",), ("b", "c")]), epsilon=1.0, delta=0)


def _pure_levels():
    return dm.plan(parse_workload(DOM, "a;b", query_types="a=prefix"), epsilon=1.0, delta=0, strategy="hierarchical")


def _querysmasher():
    return dm.plan(dm.QueryWorkload(DOM).add_explicit("b", np.eye(4)), rho=0.5, planner="querysmasher")


def _explicit():
    return dm.plan(dm.Workload(dm.Domain({"a": 3, "b": 4}), [("a",), ("a", "b")]), rho=0.5, planner="lsa",
                   objective="sum_var")  # fmt: skip


def _targets():
    return dm.plan(dm.Workload(DOM, [("a",), ("b", "c")]), targets={"a": 4.0, "b,c": 9.0})


CASES = {  # plan -> (format, the planner modules reading it may load)
    "residual": (_residual, "dpmatrix.plan/1", {"_residual"}),
    "pure": (_pure, "dpmatrix.pureplan/1", {"_pure"}),
    "pure_levels": (_pure_levels, "dpmatrix.pure_levels_plan/1", {"_pure"}),
    "querysmasher": (_querysmasher, "dpmatrix.qsplan/1", {"_querysmasher"}),
    "explicit": (_explicit, "dpmatrix.explicit_plan/1", {"_explicit"}),
    # a targets plan: its planner's module and the targets reader (which spans both routes)
    "targets": (_targets, "dpmatrix.plan/1", {"_residual", "_explicit", "_targets", "_targets_io"}),
}

READ = {
    "load_plan": "from dpmatrix._plan_file import load_plan\nplan = load_plan(sys.argv[1])\n",
    "plan_from_dict": "from dpmatrix.planners import plan_from_dict\nplan = plan_from_dict(json.load(open(sys.argv[1])))\n",
}


@pytest.mark.parametrize("how", sorted(READ))
@pytest.mark.parametrize("case", sorted(CASES))
def test_reading_a_plan_loads_its_own_planner_and_no_optimizer(tmp_path, case, how):
    make, fmt, allowed = CASES[case]
    plan = make()
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.saved_dict()))
    assert json.loads(path.read_text())["format"] == fmt
    code = ("import json, sys\n" + READ[how] +
            "print(type(plan).__name__, plan.pcost)\nprint(json.dumps(sorted(sys.modules)))\n")  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    said, listed = r.stdout.rstrip("\n").split("\n")[-2:]
    name, pcost = said.split()
    assert name == type(plan).__name__ and float(pcost) == pytest.approx(plan.pcost, rel=1e-12)
    mods = set(json.loads(listed))
    loaded = {p for p in PLANNERS if f"dpmatrix.planners.{p}" in mods}
    assert loaded <= allowed, sorted(loaded - allowed)
    assert [m for m in OPTIMIZERS if m in mods] == []


def test_the_control_planning_does_load_them():
    """The same harness sees the planners and SciPy's optimizer when planning."""
    code = ("import json, sys\nimport dpmatrix as dm\n"
            "dm.plan(dm.Workload(dm.Domain({'a': 3}), [('a',)]), targets=2.0)\n"
            "print(json.dumps(sorted(sys.modules)))\n")  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    mods = set(json.loads(r.stdout.rstrip("\n").split("\n")[-1]))
    assert {"dpmatrix.planners._builtin", "dpmatrix.planners._pure", "scipy.optimize"} <= mods


def test_the_written_out_normal_quantile_is_scipys():
    from scipy.stats import norm

    from dpmatrix.planners._targets import Z95

    assert Z95 == float(norm.ppf(0.975))
