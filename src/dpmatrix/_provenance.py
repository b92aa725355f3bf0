"""Where a set of measurements came from: the privacy-budget ledger entry it was charged to (or
"not in any ledger") and the source of its noise. Carried by
:class:`~dpmatrix._reconstruct.measurements.Measurements` itself, so that every release written
from it (manifest, report) states the same thing wherever the measurements travel."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["NOT_IN_LEDGER", "Provenance"]

#: how measurements made outside the release workflow (no ledger charged) are described
NOT_IN_LEDGER = "not in any ledger"


@dataclass(frozen=True)
class Provenance:
    """The ledger entry and the randomness source of a set of measurements.

    ``dpmatrix.measure`` records ``ledger = "not in any ledger"``; the release workflow
    (:func:`dpmatrix.publish`) replaces it with the ledger entry it charged
    (:meth:`dpmatrix.Ledger.anchor`: ledger id, path, entry, sequence number, hash).

    Parameters
    ----------
    ledger : str or mapping
        :data:`NOT_IN_LEDGER`, or the ledger anchor (kept read-only).
    randomness : str
        Where the noise came from (``"os_csprng"``, ``"numpy_generator"``, ``"seeded_insecure"``).

    Examples
    --------
    >>> p = Provenance(randomness="os_csprng")
    >>> p.ledger, p.in_ledger, p.manifest_ledger()
    ('not in any ledger', False, {'status': 'not in any ledger'})
    >>> Provenance({"ledger": "ab12", "entry": 3}, "os_csprng").manifest_ledger()["entry"]
    3
    """

    ledger: Mapping[str, Any] | str = NOT_IN_LEDGER
    randomness: str = field(default="numpy_generator")

    def __post_init__(self) -> None:
        if isinstance(self.ledger, Mapping):
            object.__setattr__(self, "ledger", MappingProxyType(dict(self.ledger)))
        elif not isinstance(self.ledger, str):
            raise TypeError(f"ledger must be a ledger anchor (mapping) or a status text, got {type(self.ledger).__name__}")

    @property
    def in_ledger(self) -> bool:
        """Charged to a ledger entry."""
        return isinstance(self.ledger, Mapping)

    def manifest_ledger(self) -> dict[str, Any]:
        """The manifest's ``ledger`` object: the anchor, or ``{"status": ...}``."""
        return dict(self.ledger) if isinstance(self.ledger, Mapping) else {"status": self.ledger}

    @classmethod
    def from_manifest(cls, ledger: Any, randomness: str) -> Provenance:
        """The provenance a release's manifest states (``ledger`` its ``ledger`` object; an
        older manifest without one reads as not in any ledger)."""
        if isinstance(ledger, Mapping) and "ledger" in ledger:
            return cls(ledger, randomness)
        if isinstance(ledger, Mapping) and isinstance(ledger.get("status"), str):
            return cls(ledger["status"], randomness)
        return cls(NOT_IN_LEDGER, randomness)
