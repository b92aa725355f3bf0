"""Methods whose work lives in a higher layer: ``Plan.report``, ``Release.report``,
``Measurements.postprocess``.

A lower layer may not import the report or post-processing code (imports only go down), so the
methods look their implementation up here by name, and the package root (the top layer, which
every ``import dpmatrix...`` runs first) registers it. The same work is the top-level function
(:func:`dpmatrix.report`, :func:`dpmatrix.postprocess`); the methods are aliases of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["call", "register"]

_HOOKS: dict[str, Callable[..., Any]] = {}


def register(name: str, fn: Callable[..., Any]) -> None:
    """Make ``fn`` the implementation of hook ``name`` (the last registration wins)."""
    _HOOKS[name] = fn


def call(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run hook ``name``; a ``LookupError`` names it if no upper layer registered it."""
    try:
        fn = _HOOKS[name]
    except KeyError:
        raise LookupError(f"no implementation of {name!r} is registered (import dpmatrix registers it)") from None
    return fn(*args, **kwargs)
