"""Numeric solvers: arrays in, a frozen result with its certificate (lower bound, gap) out."""
