"""Reconstruction: the frozen Measurements (estimates, exact variances, tidy tables) and the on-disk store of noisy answers."""
