"""``measurements.parquet``: the noisy answers of a release, written row group by row group and
read back on demand (residual answers of a ResidualPlanner plan; one row per mechanism for a
plan that lists its mechanisms)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .._domain import Domain
from .._workload import AttrSet
from ..errors import DPMatrixError, ReleaseError
from ..protocols import HasClosure, NamesMechanisms
from ._manifest import sha256_file

if TYPE_CHECKING:
    from .._reconstruct.measurements import Measurements


# noisy numbers per Parquet row group of measurements.parquet
_ROW_GROUP_VALUES = 1 << 20


# measurements of a plan that lists its mechanisms (QuerySmasher, pure ε-DP, ...): one row per
# mechanism, its key as JSON, complex outputs (WFF's Fourier coefficients) as (re, im) pairs
_MECH_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("attributes", pa.list_(pa.string())),
        ("shape", pa.list_(pa.int64())),
        ("complex", pa.bool_()),
        ("values", pa.list_(pa.float64())),
    ]
)


_MEAS_SCHEMA = pa.schema(
    [
        ("attributes", pa.list_(pa.string())),
        ("shape", pa.list_(pa.int64())),
        ("values", pa.list_(pa.float64())),
    ]
)


def _key_json(key: Any) -> str:
    """A mechanism key (nested tuples / ints / strings) as canonical JSON."""
    def plain(k):
        return [plain(v) for v in k] if isinstance(k, (tuple, list)) else (int(k) if isinstance(k, (int, np.integer)) else k)
    return json.dumps(plain(key), separators=(",", ":"))


def _write_mechanism_outputs(meas: Measurements, path: Path) -> tuple[int, int]:
    """One row per mechanism of a plan that lists them (keys in the plan's order)."""
    names = meas.plan.domain.names
    rows: dict[str, list] = {k: [] for k in _MECH_SCHEMA.names}
    n_values = 0
    for key, w in meas.noisy.items():
        w = np.asarray(w)
        cplx = np.iscomplexobj(w)
        flat = np.ascontiguousarray(w, dtype=complex if cplx else np.float64).reshape(-1)
        rows["key"].append(_key_json(key))
        rows["attributes"].append([names[a] for a in (key if isinstance(key, tuple) and all(
            isinstance(a, (int, np.integer)) for a in key) else ())])
        rows["shape"].append(list(w.shape))
        rows["complex"].append(bool(cplx))
        rows["values"].append(flat.view(np.float64) if cplx else flat)
        n_values += w.size
    pq.write_table(pa.table(rows, schema=_MECH_SCHEMA), str(path))
    return len(rows["key"]), n_values


def _read_mechanism_outputs(path: Path, plan, noise: str, digest: str | None) -> dict:
    """The noisy outputs written by :func:`_write_mechanism_outputs`, checked against the
    plan's mechanisms (same keys)."""
    try:
        if digest is not None and sha256_file(path) != digest:
            raise ReleaseError(
                f"{path.name} was modified after the release was written (SHA-256 mismatch); "
                "refusing to use it (--no-verify / verify=False skips the check)"
            )
        t = pq.ParquetFile(str(path)).read().to_pydict()  # read_table (datasets) imports pandas
    except (OSError, pa.lib.ArrowException, KeyError) as exc:
        raise ReleaseError(f"cannot read the measurements {str(path)!r}: {exc}") from None
    keys = (plan.mechanism_keys(noise=noise) if isinstance(plan, NamesMechanisms)
            else [m.key for m in plan.mechanisms(noise=noise)[1]])
    want = {_key_json(k): k for k in keys}
    out = {}
    for k, shape, cplx, vals in zip(t["key"], t["shape"], t["complex"], t["values"]):
        if k not in want or want[k] in out:
            raise ReleaseError(f"measurements of an unknown or repeated mechanism {k} in {path.name}")
        arr = np.asarray(vals, dtype=np.float64)
        if cplx:
            arr = arr.view(complex)
        if arr.size != math.prod(shape):
            raise ReleaseError(f"measurements of {k}: {arr.size} values for shape {list(shape)}")
        out[want[k]] = arr.reshape(shape)
    if len(out) != len(want):
        raise ReleaseError(f"measurements do not match the plan: {len(want) - len(out)} mechanism(s) missing")
    return out


def _write_measurements(meas: Measurements, path: Path, progress: bool) -> tuple[int, int]:
    from tqdm.auto import tqdm

    plan = meas.plan
    if not isinstance(plan, HasClosure):
        return _write_mechanism_outputs(meas, path)
    names = plan.domain.names
    n_sets = n_values = 0
    with pq.ParquetWriter(str(path), _MEAS_SCHEMA) as writer:
        rows: dict[str, list] = {"attributes": [], "shape": [], "values": []}
        pending = 0
        keys = [s for s in plan.closure.sets if s in meas.noisy]
        for key in tqdm(keys, desc="writing measurements", unit="residual", disable=not progress):
            w = np.asarray(meas.noisy[key], dtype=np.float64)
            rows["attributes"].append([names[a] for a in key])
            rows["shape"].append(list(w.shape))
            rows["values"].append(w.reshape(-1))
            pending += w.size
            n_sets += 1
            n_values += w.size
            if pending >= _ROW_GROUP_VALUES:
                writer.write_table(pa.table(rows, schema=_MEAS_SCHEMA))
                rows = {k: [] for k in rows}
                pending = 0
        if rows["attributes"] or n_sets == 0:
            writer.write_table(pa.table(rows, schema=_MEAS_SCHEMA))
    return n_sets, n_values


class _ParquetResiduals(Mapping):
    """The noisy residual answers of ``measurements.parquet``, read on demand:
    opening checks the file's digest and reads only the ``attributes`` and ``shape``
    columns; a residual's values are read from its row group when asked for, so answering one
    marginal decodes only the row groups of its subsets."""

    def __init__(self, path: Path, domain: Domain, digest: str | None):
        self._path = path
        try:
            if digest is not None and sha256_file(path) != digest:
                raise ReleaseError(
                    f"{path.name} was modified after the release was written (SHA-256 mismatch); "
                    "refusing to use it (--no-verify / verify=False skips the check)"
                )
            self._pf = pq.ParquetFile(str(path))
            index: dict[AttrSet, tuple[int, int, tuple[int, ...]]] = {}
            for g in range(self._pf.num_row_groups):
                t = self._pf.read_row_group(g, columns=["attributes", "shape"]).to_pydict()
                for r, (names, shape) in enumerate(zip(t["attributes"], t["shape"])):
                    try:
                        key = domain.resolve(names)
                    except DPMatrixError as exc:
                        raise ReleaseError(f"measurements of an unknown residual set: {exc}") from None
                    if key in index:
                        raise ReleaseError(f"measurements of {tuple(names)} appear twice in {path.name}")
                    index[key] = (g, r, tuple(int(s) for s in shape))
        except (OSError, pa.lib.ArrowException, KeyError) as exc:
            raise ReleaseError(f"cannot read the measurements {str(path)!r}: {exc}") from None
        self._index = index
        self._group: tuple[int, Any] | None = None

    def shape(self, key: AttrSet) -> tuple[int, ...]:
        return self._index[key][2]

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, key: AttrSet) -> np.ndarray:
        g, r, shape = self._index[key]
        try:
            if self._group is None or self._group[0] != g:
                self._group = (g, self._pf.read_row_group(g, columns=["values"]).column(0))
            arr = _float_values(self._group[1][r].values)
        except (OSError, pa.lib.ArrowException) as exc:
            raise ReleaseError(f"cannot read the measurements {str(self._path)!r}: {exc}") from None
        if arr.size != math.prod(shape):
            raise ReleaseError(f"measurements of {key}: {arr.size} values for shape {list(shape)}")
        return arr.reshape(shape)


def _float_values(values: pa.Array) -> np.ndarray:
    """A float64 Arrow array as a (read-only) NumPy view of its data buffer, without Arrow's
    ``to_numpy``, which imports pandas on first use; other types and arrays with nulls through
    ``to_numpy``."""
    if pa.types.is_float64(values.type) and values.null_count == 0:
        return np.frombuffer(values.buffers()[1], dtype=np.float64, count=len(values), offset=values.offset * 8)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
