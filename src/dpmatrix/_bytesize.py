"""Byte counts as text, in decimal SI units (1 kB = 1000 B, 1 MB = 10⁶ B, ...): the one
formatter of every size the library prints (release size estimates, memory checks, model sizes)."""

from __future__ import annotations

_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")


def format_bytes(n: float) -> str:
    """``n`` bytes to three significant digits in the largest SI unit that keeps the number
    below 1000 (powers of 1000, not 1024: ``kB``, ``MB``, ``GB``, ...; ``EB`` beyond).

    Parameters
    ----------
    n : float
        A number of bytes (non-negative).

    Returns
    -------
    str

    Examples
    --------
    >>> format_bytes(160), format_bytes(1536), format_bytes(8 * 10**7), format_bytes(2 * 10**9)
    ('160 B', '1.54 kB', '80 MB', '2 GB')
    """
    for unit in _UNITS:
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} EB"
