"""Numeric solvers: arrays in, one frozen result out (issue 12 layout)."""
