"""The Examples sections of the fitness-for-use solver modules and of the targets reader run and
print what they claim (as tests/test_docstring_examples.py does for the public API)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["dpmatrix.solvers.fitness", "dpmatrix.solvers.fitness_newton", "dpmatrix.solvers.fitness_reduction",
           "dpmatrix.solvers.expsum", "dpmatrix.planners.targets_io"]


@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
