"""The measurement path: noisy answers of a plan's mechanisms on data (batching, Gaussian and discrete noise)."""

from .measure_plan import measure

__all__ = ["measure"]
