"""The Examples sections of the pure ε-DP modules added for issue 14 run and print what they claim."""

import doctest
import importlib

import pytest

MODULES = ["dpmatrix.planners.pure.levels", "dpmatrix.planners.pure.hierarchical",
           "dpmatrix.planners.pure.matrix_strategy", "dpmatrix.planners.pure.gaussian_variant",
           "dpmatrix.planners.pure.units", "dpmatrix.planners.pure.query_factors", "dpmatrix.solvers.budget_split"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
