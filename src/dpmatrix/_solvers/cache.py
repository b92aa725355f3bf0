"""A bounded least-recently-used cache of solver results, keyed on the bytes of the input arrays."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

import numpy as np

__all__ = ["LRUCache", "array_digest"]

V = TypeVar("V")


def array_digest(*arrays: np.ndarray) -> str:
    """A 160-bit BLAKE2b digest of the bytes of ``arrays`` (C order), for cache keys."""
    h = hashlib.blake2b(digest_size=20)
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


class LRUCache(Generic[V]):
    """At most ``maxsize`` entries; a hit makes its entry the most recent, an insert beyond
    ``maxsize`` evicts the least recent one."""

    def __init__(self, maxsize: int):
        if maxsize < 1:
            raise ValueError(f"maxsize must be positive, got {maxsize}")
        self.maxsize = int(maxsize)
        self._items: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: Hashable, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.maxsize:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
