"""The measurement path: noisy answers of a plan's mechanisms on data (batching, Gaussian and discrete noise).

``measure`` is loaded on first use (PEP 562): a module that needs one helper of this package
(e.g. :mod:`.secure`'s noise scales, to read a saved plan) does not load the engines."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .measure_plan import measure

__all__ = ["measure"]


def __getattr__(name: str):
    if name == "measure":
        from .measure_plan import measure

        return measure
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
