"""dpmatrix.linalg (issue 12 layout)."""
