"""Defaults shared by the library and the command line, in a module that imports nothing.

The command line builds its argument parser from these values before it loads any numerical
library (``dpmatrix --help`` and ``dpmatrix query`` start in a fraction of a second); the
modules that own each default re-export it under its usual name.
"""

from __future__ import annotations

__all__ = ["DEFAULT_DELTA", "DEFAULT_OBJECTIVE", "ENCODINGS"]

#: The objective of ``dm.plan`` and of the command line when none is given: a
#: statistics office publishes every marginal as a table, and ``max_var`` bounds the worst
#: cell of every table, where ``sum_var`` lets small tables carry large variances (§6.2).
DEFAULT_OBJECTIVE = "max_var"

#: What a data argument holds (:func:`dpmatrix.engines.engine_for`): raw values, codes
#: ``0..size-1``, or ``auto`` (the reading the data fit).
ENCODINGS = ("auto", "raw", "codes")

#: The δ at which ε is stated when the budget was not given as (ε, δ) (manifests, plan files).
DEFAULT_DELTA = 1e-9
