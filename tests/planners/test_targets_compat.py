"""Target plans and releases written before targets became a wrapper still load.

The files in ``tests/data/targets_v0`` were written by the code of main@be833de, where a plan
from accuracy targets was a subclass of its planner's plan (``ResidualTargetPlan``,
``ExplicitTargetPlan``; ``generate.py`` there is the script). Read now, each is a
:class:`~dpmatrix.planners._targets.TargetedPlan` around the same planner's plan, with the target
table, certificate and privacy cost the old code printed (``expected.json``), and it writes
the same description back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._plan_file import load_plan
from dpmatrix.planners._explicit.plan import ExplicitStrategyPlan
from dpmatrix.planners._targets import TargetedPlan
from dpmatrix.protocols import HasTargets
from stored_arrays import as_lists

DATA = Path(__file__).resolve().parents[1] / "data" / "targets_v0"
EXPECTED = json.loads((DATA / "expected.json").read_text())
INNER = {"ResidualTargetPlan": dm.ResidualPlan, "ExplicitTargetPlan": ExplicitStrategyPlan}


def _check(plan, expected) -> None:
    assert isinstance(plan, TargetedPlan) and isinstance(plan, HasTargets) and isinstance(plan, dm.Plan)
    assert isinstance(plan.plan, INNER[expected["class"]])
    got = json.loads(plan.target_table().to_json(orient="records"))
    assert pd.DataFrame(got).equals(pd.DataFrame(expected["target_table"]))
    assert plan.certificate() == pytest.approx(expected["certificate"])
    assert plan.pcost == pytest.approx(expected["pcost"], rel=1e-12)


@pytest.mark.parametrize("name", ["residual", "explicit"])
def test_old_target_plan_files_load_as_targeted_plans(name):
    path = DATA / f"{name}_targets_plan.json"
    plan = load_plan(path)
    _check(plan, EXPECTED[name])
    got, spec = plan.to_dict(), json.loads(path.read_text())
    # the privacy statement's prose once named the lattice sampler's module (renamed since): it
    # is text for a reader, not read back; every number and every other entry is the same
    for d in (got, spec):
        d.get("privacy", {}).pop("definition", None)
    # arrays are now stored as exact float64 bytes and an explicit strategy's eigendecomposition
    # beside it (read back checked, not recomputed); written out, every number is the same
    assert as_lists(got) == spec  # the same description written back


def test_old_targets_release_loads_with_its_targets():
    rel = dm.load_release(DATA / "residual_targets_release")
    _check(rel.plan, EXPECTED["residual"])
    got = json.loads(rel.measurements.marginal(("agegp", "alcgp")).to_json(orient="records"))
    assert pd.DataFrame(got).equals(pd.DataFrame(EXPECTED["release"]["marginal"]))
