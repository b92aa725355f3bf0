"""The Examples sections of the public API's docstrings (and of the solver and planner modules
listed) run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["dpmatrix._privacy", "dpmatrix.planners._dispatch", "dpmatrix._measure.measure_plan", "dpmatrix.release._writer",
           "dpmatrix.release._reader",
           "dpmatrix._reconstruct.measurements", "dpmatrix._reconstruct.broadcast", "dpmatrix._reconstruct.fused", "dpmatrix._mechanisms.exact_exp", "dpmatrix._reconstruct.stacked",
           "dpmatrix.planners._optimality", "dpmatrix.planners._explicit.plan",
           "dpmatrix.planners._explicit.evaluation", "dpmatrix.planners._compare", "dpmatrix._linalg.marginal_map",
           "dpmatrix._mechanisms.linear", "dpmatrix.planners._pure.plan", "dpmatrix.planners._querysmasher.plan",
           "dpmatrix._queries", "dpmatrix._statement", "dpmatrix._measure.secure",
           "dpmatrix._selection", "dpmatrix.engines._data_source", "dpmatrix.engines._infer",
           "dpmatrix._table_text", "dpmatrix.engines._bincount",
           # one value-matching rule, missing values, privacy unit (data27)
           "dpmatrix._values", "dpmatrix._domain", "dpmatrix._unit", "dpmatrix._dates",
           # pure ε-DP strategies
           "dpmatrix.planners._pure.levels", "dpmatrix.planners._pure.hierarchical", "dpmatrix.planners._pure.joint_levels",
           "dpmatrix.planners._pure.joint_budgets", "dpmatrix.planners._pure.pidentity_plan", "dpmatrix.planners._pure.pidentity_union", "dpmatrix._solvers.pidentity", "dpmatrix._solvers.union_split", "dpmatrix._solvers.union_factors",
           "dpmatrix.planners._pure.kron_plan", "dpmatrix._measure.kron_records",
           "dpmatrix.planners._pure.matrix_strategy", "dpmatrix.planners._pure.gaussian_variant",
           "dpmatrix.planners._pure.units", "dpmatrix.planners._pure.query_factors", "dpmatrix._solvers.budget_split",
           # fitness-for-use solvers and the targets reader
           "dpmatrix._solvers.fitness", "dpmatrix._solvers.fitness_newton", "dpmatrix._solvers.fitness_reduction",
           "dpmatrix._solvers.expsum", "dpmatrix.planners._targets_io",
           # the release workflow and what it guards with
           "dpmatrix._workflow", "dpmatrix._ledger", "dpmatrix._plan_file", "dpmatrix._csv_cells",
           # counts with exact intervals
           "dpmatrix._reconstruct.linear_query",
           # reading a plan back (its own planner only)
           "dpmatrix.planners._read"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
