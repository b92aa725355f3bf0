"""dpmatrix.solvers (issue 12 layout)."""
