"""Size of a release computed from the workload alone, before any data is read.

For a workload of marginals ``M`` with attribute sizes ``n_i``:

* table rows: ``Σ_M q(M)`` (``q`` = queries of the marginal; its cells ``Π_{i∈M} n_i`` if plain);
* noisy values: at most ``Σ_M Π_{i∈M} n_i`` — the residuals of a marginal's closure hold
  ``Σ_{A⊆M} Π_{i∈A}(n_i − 1) = Π_{i∈M} n_i`` numbers, and marginals share residuals, so the sum
  is an upper bound (exact for disjoint marginals);
* bytes written ≈ 8 per noisy value + 48 per table row per format (five float64 columns and the
  label codes; CSV text is of the same order);
* peak memory ≈ 8 per noisy value held in memory (0 with the on-disk store) + 64 per row of the
  largest table (its five columns and temporaries) + 16 per cell of the largest counted marginal.

These are estimates for refusing hopeless runs early (60 attributes × 1000 values, all 3-way:
3.4·10¹³ cells), not exact accounting.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._bytesize import format_bytes
from .errors import DPMatrixError

__all__ = ["DEFAULT_MAX_CELLS", "ReleaseSize", "SizeError", "check_size", "estimate_size"]

#: default limit on table rows + noisy values (5·10⁸ ≈ 4 GB of float64 numbers)
DEFAULT_MAX_CELLS = 500_000_000


class SizeError(DPMatrixError, ValueError):
    """The release would be larger than the allowed number of cells."""


@dataclass(frozen=True)
class ReleaseSize:
    """Estimated size of a release (see the module docstring)."""

    table_rows: int
    noisy_values: int
    bytes_written: int
    peak_memory: int

    @property
    def cells(self) -> int:
        """Table rows plus noisy values: what ``max_cells`` limits."""
        return self.table_rows + self.noisy_values


def estimate_size(workload, *, formats: int = 2, spill: bool = False) -> ReleaseSize:
    """Estimate the size of releasing ``workload`` (no data, no plan needed).

    Parameters
    ----------
    workload : Workload
    formats : int
        Number of table formats written.
    spill : bool
        The noisy values are kept on disk (not counted in peak memory).

    Returns
    -------
    ReleaseSize
    """
    cells = np.asarray(workload.cells, dtype=float)
    rows = np.asarray(workload.n_queries, dtype=float)
    noisy = float(cells.sum())
    table_rows = float(rows.sum())
    written = 8 * noisy + 48 * table_rows * max(int(formats), 1)
    peak = (0 if spill else 8 * noisy) + 64 * float(rows.max(initial=1)) + 16 * float(cells.max(initial=1))
    big = lambda x: int(min(x, 2**62))  # noqa: E731
    return ReleaseSize(big(table_rows), big(noisy), big(written), big(peak))


def describe_size(size: ReleaseSize) -> str:
    """One line: rows, noisy values, bytes written, peak memory."""
    return (
        f"size estimate: {size.table_rows:,} table rows, at most {size.noisy_values:,} noisy values, "
        f"~{format_bytes(size.bytes_written)} written, peak memory ~{format_bytes(size.peak_memory)}"
    )


def check_size(size: ReleaseSize, max_cells: int | None = DEFAULT_MAX_CELLS) -> None:
    """Raise :class:`SizeError` if ``size.cells`` exceeds ``max_cells`` (``None``: no limit)."""
    if max_cells is None:
        return
    if size.cells > max_cells:
        raise SizeError(
            f"this release is too large: {describe_size(size)}; that is {size.cells:,} cells, above "
            f"the limit of {int(max_cells):,}. Choose fewer or smaller marginals (e.g. coarser "
            "bins), or raise the limit with --max-cells (max_cells=) if the machine can hold it"
        )
