"""The one measurement executor: any plan's mechanism records in, noisy answers out.

A plan lists what to run (``plan.mechanisms(noise=...)`` → ``(plan measured, records)``, each a
:class:`~dpmatrix.protocols.MechanismRecord`: the marginal it reads, its noise family and its
:class:`~dpmatrix.protocols.MechanismKind`). :func:`execute`

1. groups the records by the marginal (attribute set) they read;
2. counts every needed table once: only the maximal sets go to the engine, many per engine call,
   smaller tables are sums of a counted one (:func:`~dpmatrix._measure.counting.counted_batches`);
3. applies each record's query and noise through its kind, drawing every noise value through the
   one registered noise-family object of the record's family
   (:mod:`dpmatrix._mechanisms.noise_families`);
4. writes the noisy answers, keyed by ``record.key``, in the plan's order.

Noise is drawn in the plan's order of records (per family, in the registry's order of families):
a record is measured once it and every record before it are counted. A family whose draws split
(``family.splits``) is drawn batch by batch as the counts arrive — plans that list their records
in count order (the residual plans) hold one batch of tables at a time; a family drawn in one
vectorized call (discrete Laplace) waits for every count.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .._mechanisms.noise_families import NoiseFamily, noise_family, noise_family_names
from .._reconstruct.store import MeasurementStore
from ..engines import maximal_sets
from ..errors import DataError, PlanError
from ..protocols import MechanismRecord
from .counting import counted_batches

__all__ = ["check_records", "execute", "noise_name"]


def check_records(records: Sequence[Any]) -> dict[str, NoiseFamily]:
    """Refuse records that are not :class:`~dpmatrix.protocols.MechanismRecord` or share a key;
    return the noise-family object of every family they use."""
    for kind_of_record in {type(r) for r in records}:
        sample = next(r for r in records if type(r) is kind_of_record)
        if not isinstance(sample, MechanismRecord):
            raise PlanError(f"plan.mechanisms() must give mechanism records (key, attrs, family, kind), "
                            f"got {kind_of_record.__name__}")  # fmt: skip
    keys = {r.key for r in records}
    if len(keys) != len(records):
        raise PlanError("the plan lists two mechanisms with the same key")
    return {name: noise_family(name) for name in dict.fromkeys(r.family for r in records)}


def noise_name(families: Iterable[str], asked: str | None) -> str | None:
    """The one noise name a measurement states: its records' family (``asked`` when none)."""
    families = set(families)
    if len(families) == 1:
        return next(iter(families))
    if not families:
        return asked
    raise DataError(f"a plan mixing noise families {sorted(families)} cannot be described by one noise name")


def _ready_end(counted: list[Any], start: int) -> int:
    end = start
    while end < len(counted) and counted[end] is not None:
        end += 1
    return end


def _runs(records: Sequence[Any], idx: list[int]) -> Iterable[list[int]]:
    """Consecutive runs of ``idx`` whose records share one kind."""
    run: list[int] = []
    for j in idx:
        if run and records[run[-1]].kind is not records[j].kind:
            yield run
            run = []
        run.append(j)
    if run:
        yield run


def _measure(records: Sequence[Any], counted: list[Any], lo: int, hi: int, families: dict[str, NoiseFamily],
             rng: Any) -> dict[int, np.ndarray]:
    """Noisy outputs of records ``lo..hi-1`` (all counted): per family in the registry's order,
    each run of one kind in one call of its ``outputs``."""
    out: dict[int, np.ndarray] = {}
    for name in noise_family_names():
        if name not in families:
            continue
        idx = [j for j in range(lo, hi) if records[j].family == name]
        for run in _runs(records, idx):
            got = records[run[0]].kind.outputs([records[j] for j in run], [counted[j][0] for j in run],
                                               [counted[j][1] for j in run], families[name], rng)
            out.update(zip(run, got))
    return out


def _write(sink: MutableMapping[Any, Any], records: Sequence[Any], outputs: dict[int, np.ndarray],
           sizes: Sequence[int]) -> None:
    """Write ``outputs`` in record order; a disk store gets them by size and shape, then in record
    order (reconstruction reads the marginals of one shape in long runs)."""
    order = sorted(outputs)
    if isinstance(sink, MeasurementStore):
        order.sort(key=lambda j: (-len(records[j].attrs), tuple(sizes[a] for a in records[j].attrs), j))
    for j in order:
        sink[records[j].key] = outputs[j]


def execute(domain: Any, records: Sequence[Any], engine: Any, rng: Any, *, sink: MutableMapping[Any, Any],
            progress: bool = False) -> MutableMapping[Any, Any]:
    """Measure ``records`` on the data counted by ``engine`` into ``sink`` (module docstring).

    Parameters
    ----------
    domain : Domain
    records : sequence of MechanismRecord
        In the plan's order (the order noise is drawn in).
    engine : engine
        Counts attribute sets (``engine.count(sets)``).
    rng : numpy.random.Generator or None
        Passed to every noise family (``None``: the families' secure default).
    sink : mutable mapping
        Receives ``record.key → noisy output`` (a dict, or a residual plan's stacked or on-disk
        store).
    progress : bool
        A bar of the maximal marginals counted.

    Returns
    -------
    mutable mapping
        ``sink``.

    Examples
    --------
    >>> import numpy as np, dpmatrix as dm
    >>> from dpmatrix.engines import NumpyEngine
    >>> from dpmatrix._mechanisms.linear import LinearMechanism
    >>> dom = dm.Domain({"a": 2, "b": 2})
    >>> eng = NumpyEngine(np.array([[0, 1], [1, 1], [1, 0]]), dom)
    >>> recs = [LinearMechanism.dense("b", (1,), np.eye(2), 1e-30), LinearMechanism.dense("ab", (0, 1), np.ones((1, 4)), 1e-30)]
    >>> out = execute(dom, recs, eng, np.random.default_rng(0), sink={})
    >>> {k: v.round(6).tolist() for k, v in out.items()}
    {'b': [1.0, 2.0], 'ab': [3.0]}
    """
    families = check_records(records)
    splits = all(f.splits for f in families.values())
    by_attrs: dict[tuple[int, ...], list[int]] = {}
    for j, r in enumerate(records):
        by_attrs.setdefault(tuple(r.attrs), []).append(j)
    counted: list[tuple[np.ndarray, tuple[int, ...]] | None] = [None] * len(records)
    top = maximal_sets(by_attrs)
    done = 0
    with tqdm(total=len(top), desc="measuring", unit="marginal", disable=not progress) as bar:
        for batch, items in counted_batches(domain, by_attrs, engine, top=top):
            for sub, table, source in items:
                for j in by_attrs[sub]:
                    counted[j] = (table, source)
            if splits:
                done = _flush(sink, records, counted, done, families, rng, domain.sizes)
            bar.update(len(batch))
    _flush(sink, records, counted, done, families, rng, domain.sizes)
    return sink


def _flush(sink: MutableMapping[Any, Any], records: Sequence[Any], counted: list[Any], start: int,
           families: dict[str, NoiseFamily], rng: Any, sizes: Sequence[int]) -> int:
    """Measure the counted records from ``start`` on (up to the first one not counted yet), free
    their tables and return where the next flush starts."""
    end = _ready_end(counted, start)
    if end > start:
        _write(sink, records, _measure(records, counted, start, end, families, rng), sizes)
        for j in range(start, end):
            counted[j] = ()  # measured: its table is released
    return end
