"""Mechanisms: per-attribute residual bases (centred / split), the residual Gaussian mechanism, exact noise samplers."""
