"""On-disk store of the noisy residual answers, for plans whose measurements do not fit in RAM.

A plan on Synth-10^200 with all ≤3-way marginals releases 1,313,400 × 9³ + … ≈ 0.96 × 10⁹ noisy
numbers (7.7 GB as float64). With ``measure(..., store=...)`` every noisy vector ``ω_A`` is
appended to one binary file (little-endian float64, C order) as soon as it is drawn, and an
index (byte offset per closure position) says where it is. Reads use positioned reads
(``pread``) into fresh arrays, so the data pass through the operating system's page cache and
never accumulate in the process: the resident memory of measurement and of a full
reconstruction pass stays bounded by the batch sizes, whatever the number of marginals.

Within a measurement batch the vectors are written in closure order (sizes ascending, then
lexicographic), so the stacked reads of a reconstruction batch — marginals of one shape in
workload order — are mostly one contiguous read.

Files in the store folder: ``noisy.f64`` (the values) and, once measurement is complete,
``index.npy`` (int64 offsets, −1 where nothing was measured) and ``meta.json`` (kind of noise
and where it came from). A folder given by the user is
kept; ``store=True`` uses a temporary folder removed when the store is garbage collected.
Nothing in the store is more than the noisy answers (no counts, no records): it is as safe to
keep as the release's ``measurements.parquet``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from .._workload import AttrSet
from ..errors import DataError

__all__ = ["MeasurementStore", "open_store"]

VALUES = "noisy.f64"
INDEX = "index.npy"
META = "meta.json"
_F64 = np.dtype("<f8")


class MeasurementStore(Mapping):
    """``{attribute set: noisy vector ω_A}`` kept in a file (see the module docstring).

    Behaves as a read-only mapping once :meth:`seal` has been called (``measure`` does it);
    before that, ``store[key] = ω`` appends. Values come back as fresh, writable arrays of the
    residual mechanism's output shape.
    """

    def __init__(self, plan, folder: str | Path | bool | None = True):
        self._plan = plan
        temporary = folder is True or folder is None
        if temporary:
            path = Path(tempfile.mkdtemp(prefix="dpmatrix-store-"))
        else:
            path = Path(folder)
            if path.exists() and not path.is_dir():
                raise DataError(f"measurement store {str(path)!r} exists and is not a folder")
            if (path / VALUES).exists() or (path / INDEX).exists():
                raise DataError(
                    f"measurement store folder {str(path)!r} already holds measurements; choose an "
                    "empty folder (nothing is overwritten)"
                )
            path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.temporary = temporary
        self._offsets = np.full(len(plan.closure), -1, dtype=np.int64)
        self._size = 0  # bytes written
        self._count = 0
        self._file = open(path / VALUES, "w+b")  # noqa: SIM115 - closed by close()/finalizer
        self._dirty = False
        self._sealed = False
        self.meta: dict = {}
        self._finalizer = weakref.finalize(self, _cleanup, self._file, path if temporary else None)

    # -- writing ----------------------------------------------------------------------------
    def __setitem__(self, key: AttrSet, value: np.ndarray) -> None:
        if self._sealed:
            raise DataError("the measurement store is sealed: measurements cannot be added or replaced")
        i = self._plan.closure.index(tuple(key))
        if self._offsets[i] >= 0:
            raise DataError(f"{self._plan.domain.names_of(key)} was already measured into this store")
        arr = np.asarray(value, dtype=_F64)  # (not ascontiguousarray: it makes 0-d arrays 1-d)
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")
        if arr.shape != self._shape(key):
            raise DataError(
                f"noisy vector of {self._plan.domain.names_of(key)} has shape {arr.shape}, the plan "
                f"expects {self._shape(key)}"
            )
        self._file.write(arr.reshape(-1).data)
        self._offsets[i] = self._size
        self._size += arr.nbytes
        self._count += 1
        self._dirty = True

    def seal(self, meta: dict | None = None) -> MeasurementStore:
        """End of measurement: flush the values, write the index (and ``meta``, e.g. the kind of
        noise, as ``meta.json``); the store becomes read-only."""
        if not self._sealed:
            self.meta = dict(meta or {})
            (self.path / META).write_text(json.dumps(self.meta))
            self._flush()
            if not self.temporary:  # a kept store must survive a crash after measure() returns
                os.fsync(self._file.fileno())
            np.save(self.path / INDEX, self._offsets)
            self._sealed = True
        return self

    def _flush(self) -> None:
        if self._dirty:
            self._file.flush()
            self._dirty = False

    # -- reading ----------------------------------------------------------------------------
    def _shape(self, key: AttrSet) -> tuple[int, ...]:
        bases = self._plan.bases
        return tuple(bases[a].r for a in key)

    def _read(self, out: np.ndarray, offset: int) -> None:
        view = memoryview(out.reshape(-1)).cast("B")
        fd = self._file.fileno()
        done = 0
        while done < len(view):  # pread may return fewer bytes than asked
            got = os.preadv(fd, [view[done:]], offset + done)
            if got <= 0:
                raise DataError(f"measurement store {str(self.path)!r} is truncated")
            done += got

    def __getitem__(self, key: AttrSet) -> np.ndarray:
        try:
            i = self._plan.closure.index(tuple(key))
        except (KeyError, TypeError):
            raise KeyError(key) from None
        if self._offsets[i] < 0:
            raise KeyError(key)
        self._flush()
        out = np.empty(self._shape(tuple(key)), dtype=_F64)
        self._read(out, int(self._offsets[i]))
        return out

    def stack(self, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        """The noisy vectors of the closure members at ``positions`` (all of one shape), stacked
        along a new first axis; runs that lie back to back in the file are read at once."""
        pos = np.asarray(positions, dtype=np.int64).reshape(-1)
        if pos.size == 0:
            raise DataError("stack() needs at least one closure position")
        sets = self._plan.closure.sets
        shape = self._shape(sets[int(pos[0])])
        offs = self._offsets[pos]
        if np.any(offs < 0):
            missing = sets[int(pos[np.flatnonzero(offs < 0)[0]])]
            raise KeyError(missing)
        self._flush()
        out = np.empty((pos.size,) + shape, dtype=_F64)
        item = out[0].nbytes if pos.size else 0
        breaks = np.flatnonzero(np.diff(offs) != item) + 1
        starts = np.concatenate([[0], breaks])
        stops = np.concatenate([breaks, [pos.size]])
        for a, b in zip(starts.tolist(), stops.tolist()):
            self._read(out[a:b], int(offs[a]))
        return out

    def __contains__(self, key) -> bool:
        try:
            i = self._plan.closure.index(tuple(key))
        except (KeyError, TypeError):
            return False
        return bool(self._offsets[i] >= 0)

    def __iter__(self) -> Iterator[AttrSet]:
        sets = self._plan.closure.sets
        for i in np.flatnonzero(self._offsets >= 0).tolist():
            yield sets[i]

    def __len__(self) -> int:
        return self._count

    @property
    def n_values(self) -> int:
        """Number of noisy numbers stored."""
        return self._size // _F64.itemsize

    def close(self) -> None:
        """Close the file (and delete a temporary store's folder)."""
        self._finalizer()

    def __repr__(self) -> str:
        kind = "temporary" if self.temporary else "kept"
        return f"MeasurementStore({str(self.path)!r}, {kind}, {self._count} residual sets, {self.n_values} values)"


def _cleanup(file, folder: Path | None) -> None:
    try:
        file.close()
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def open_store(folder: str | Path, plan) -> MeasurementStore:
    """Re-open a sealed store written by ``measure(plan, data, store=folder)`` for the same plan.

    The folder holds only noisy answers and their index; the plan (``plan.to_json()``) is what
    gives them meaning and must be the one they were measured with (their shapes are checked).
    """
    path = Path(folder)
    if not (path / VALUES).is_file() or not (path / INDEX).is_file():
        raise DataError(f"{str(path)!r} is not a sealed measurement store (needs {VALUES} and {INDEX})")
    offsets = np.load(path / INDEX)
    if offsets.shape != (len(plan.closure),) or offsets.dtype != np.int64:
        raise DataError(f"the store in {str(path)!r} was written for another plan (index of {offsets.shape[0]} entries)")
    store = MeasurementStore.__new__(MeasurementStore)
    store._plan = plan
    store.path = path
    store.temporary = False
    store._offsets = offsets
    store._file = open(path / VALUES, "rb")  # noqa: SIM115 - closed by close()/finalizer
    store._size = os.fstat(store._file.fileno()).st_size
    store._count = int(np.count_nonzero(offsets >= 0))
    store._dirty = False
    store._sealed = True
    meta_path = path / META
    store.meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    store._finalizer = weakref.finalize(store, _cleanup, store._file, None)
    expected = plan.measured
    if not np.array_equal(offsets >= 0, expected):
        raise DataError(f"the store in {str(path)!r} does not hold exactly the plan's measured residual sets")
    sizes = np.array([int(np.prod(store._shape(s))) for s in plan.closure.sets], dtype=np.int64)
    if int(sizes[expected].sum()) * _F64.itemsize != store._size:
        raise DataError(f"the store in {str(path)!r} does not match the plan (size differs)")
    return store
