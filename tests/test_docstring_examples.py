"""The Examples sections of the public API's docstrings (and of the solver and planner modules
listed) run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["dpmatrix.privacy", "dpmatrix.planners.dispatch", "dpmatrix.measure.measure_plan", "dpmatrix.release._writer",
           "dpmatrix.release._reader",
           "dpmatrix.reconstruct.measurements", "dpmatrix.reconstruct.broadcast", "dpmatrix.reconstruct.fused", "dpmatrix.mechanisms.exact_exp", "dpmatrix.reconstruct.stacked",
           "dpmatrix.planners.optimality", "dpmatrix.planners.explicit.plan",
           "dpmatrix.planners.explicit.evaluation", "dpmatrix.planners.compare", "dpmatrix.linalg.marginal_map",
           "dpmatrix.mechanisms.linear", "dpmatrix.planners.pure.plan", "dpmatrix.planners.querysmasher.plan",
           "dpmatrix.queries", "dpmatrix.statement", "dpmatrix.measure.secure",
           "dpmatrix.selection", "dpmatrix.engines.data_source", "dpmatrix.engines.infer",
           "dpmatrix.table_text", "dpmatrix.engines.bincount",
           # one value-matching rule, missing values, privacy unit (data27)
           "dpmatrix.values", "dpmatrix.domain", "dpmatrix.unit", "dpmatrix.dates",
           # pure ε-DP strategies (issue 14)
           "dpmatrix.planners.pure.levels", "dpmatrix.planners.pure.hierarchical", "dpmatrix.planners.pure.joint_levels",
           "dpmatrix.planners.pure.joint_budgets", "dpmatrix.planners.pure.pidentity_plan", "dpmatrix.planners.pure.pidentity_union", "dpmatrix.solvers.pidentity",
           "dpmatrix.planners.pure.matrix_strategy", "dpmatrix.planners.pure.gaussian_variant",
           "dpmatrix.planners.pure.units", "dpmatrix.planners.pure.query_factors", "dpmatrix.solvers.budget_split",
           # fitness-for-use solvers and the targets reader (issue 13)
           "dpmatrix.solvers.fitness", "dpmatrix.solvers.fitness_newton", "dpmatrix.solvers.fitness_reduction",
           "dpmatrix.solvers.expsum", "dpmatrix.planners.targets_io",
           # the release workflow and what it guards with
           "dpmatrix.workflow", "dpmatrix.ledger", "dpmatrix.plan_file", "dpmatrix.csv_cells",
           # counts with exact intervals
           "dpmatrix.reconstruct.linear_query"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
