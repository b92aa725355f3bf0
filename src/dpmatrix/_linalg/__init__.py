"""Linear algebra below everything else: Kronecker products applied axis by axis, per-attribute query matrices, the Fourier basis."""
