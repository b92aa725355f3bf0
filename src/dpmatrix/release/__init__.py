"""Release artifacts: what a data curator publishes, written to and read back from a folder.

Layout of a release folder (format ``dpmatrix.release/2``)::

    manifest.json            format, library version, creation time (UTC), domain, workload,
                             objective, per-residual noise scales (sigma2), privacy (rho, pcost,
                             mu, epsilon at a stated delta, reproducible), confidence level, one
                             entry per released marginal (attributes, its ``key``, cells, variance,
                             where its table is), ``tables`` (layout, column types, per-part
                             integrity records) and ``files``: the SHA-256 of every other file
    manifest.sha256          SHA-256 of manifest.json (written last: its presence marks a complete
                             release)
    measurements.parquet     the noisy residual answers ω_A, one row per measured residual set
                             (columns: attributes, shape, values) — with the manifest, enough to
                             reconstruct any marginal of the workload's closure later
    tables/part-*.parquet    every marginal's tidy table in one Parquet dataset: columns
                             ``marginal`` (the key, e.g. ``age,sex``), one per attribute (labels
                             or codes; null where the marginal lacks it), estimate, variance, std,
                             lower, upper; row groups of whole marginals (see
                             :mod:`dpmatrix._release_tables`, which also gives the one-call DuckDB /
                             pandas / pyarrow reads)
    marginals/<slug>-<hash>.csv
                             only on request (``formats=("parquet", "csv")``): one CSV per
                             marginal, ``<hash>`` the first 12 hex digits of the SHA-256 of the
                             names' JSON list, so distinct marginals never share a file
    README.txt               what the table columns mean

Releases of format ``dpmatrix.release/1`` (one Parquet and one CSV file per marginal under
``marginals/``, dpmatrix before the dataset layout) are still read; any other format is refused
with a message naming it.

Nothing derived from the data other than noisy answers is written: no record, no record count,
no data path, no random seed.

The package's modules, one idea each: ``_layout`` (output paths, the write lock, recovery
of interrupted writes, the atomic swap), ``_manifest`` (the manifest, digests and integrity
checks), ``_measurements`` (``measurements.parquet``), ``_writer`` (:func:`write_release`),
``_reader`` (:func:`load_release`, :class:`Release`, :func:`read_saved_table`) and ``_compat``
(tables of format-1 releases).
"""

from __future__ import annotations

from .._release_tables import table_stem
from ._layout import (
    _HELD,
    _HELD_GUARD,
    LEFTOVER_MEANING,
    LeftoverWarning,
    _acquire,
    _existing_folder,
    _fallback_folder,
    _prepare_target,
    _siblings,
    _swap_into_place,
    check_target,
    output_lock,
    recover_output,
    sibling_path,
)
from ._manifest import (
    DERIVED_PATHS,
    MANIFEST,
    MANIFEST_DIGEST,
    MEASUREMENTS,
    READABLE_FORMATS,
    RELEASE_FORMAT,
    _check_privacy_consistent,
    _checked_file,
    _checked_plan,
    _format_note,
    _inside,
    _library_version,
    _listed_files,
    _read_manifest,
    _residual_plan,
    _stated_digest,
    digest_list,
    dump_json,
    is_release,
    release_problem,
    sha256_file,
    verify_files,
    write_digest_list,
)
from ._measurements import (
    _MEAS_SCHEMA,
    _MECH_SCHEMA,
    _ROW_GROUP_VALUES,
    _key_json,
    _ParquetResiduals,
    _read_mechanism_outputs,
    _write_measurements,
    _write_mechanism_outputs,
)
from ._reader import (
    Release,
    SavedTable,
    _dataset_table,
    _label_columns,
    _open_measurements,
    _plain_columns,
    load_release,
    read_checked_manifest,
    read_saved_table,
)
from ._writer import (
    DEFAULT_DELTA,
    DEFAULT_FORMATS,
    FORMATS,
    MARGINALS_DIR,
    NEGATIVE_ESTIMATES,
    NOT_IN_LEDGER,
    NOT_PRIVATE_README,
    TABLES_README,
    _lower_bound_entry,
    _stage_digests,
    _table_entry,
    _tables_section,
    _write_stage,
    _write_stage_listed,
    _write_synced,
    check_formats,
    tables_readme,
    write_release,
)

# every name of the former single module stays importable from ``dpmatrix.release``

file_stem = table_stem  # former name

__all__ = [
    "RELEASE_FORMAT",
    "LeftoverWarning",
    "Release",
    "SavedTable",
    "load_release",
    "output_lock",
    "read_checked_manifest",
    "read_saved_table",
    "recover_output",
    "write_release",
]
