"""Compatibility with releases of format ``dpmatrix.release/1``: one Parquet and one CSV file per
marginal under ``marginals/`` (dpmatrix before the dataset layout). Format-1 manifests are read by
:mod:`dpmatrix.release._manifest` (files listed per marginal, no digests) and their saved tables
here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._workload import AttrSet
from ..errors import ReleaseError
from ..protocols import HasClosure

if TYPE_CHECKING:
    import pandas as pd

    from ._reader import Release


def table_v1(rel: Release, key: AttrSet, e: dict, format: str) -> pd.DataFrame:
    """A table of a format-1 release (one file per marginal and format), as
    :meth:`Release.table <dpmatrix.release.Release.table>` returns it."""
    import pandas as pd

    from .._reconstruct.measurements import query_labels

    if format not in e["files"]:
        raise ReleaseError(f"this release has no {format} tables (it has {sorted(e['files'])})")
    path = rel.file(e["files"][format])
    try:
        df = pd.read_parquet(path) if format == "parquet" else pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise ReleaseError(f"cannot read {str(path)!r}: {exc}") from None
    if not isinstance(rel.plan, HasClosure):
        return df  # a plan that lists its mechanisms: labels as written
    wk = rel.plan.workload
    i = wk.index(key)
    for a, t in zip(key, wk.types(i)):
        attr = rel.domain.attributes[a]
        if t == "identity" and attr.labels is None and attr.bins is None:
            continue  # plain integer codes
        # the row labels of this attribute's queries (cells: value labels), in order
        cats = query_labels(attr, t, None if t == "identity" else wk.query_matrix(a, t))
        df[attr.name] = pd.Categorical(df[attr.name].astype(str), categories=cats)
    return df
