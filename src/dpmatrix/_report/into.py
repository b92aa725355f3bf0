"""Re-render the HTML report of an existing release folder (``dpmatrix report``), verified and
under the folder's lock. Kept apart from :mod:`dpmatrix._workflow` (which re-exports it) so that
re-rendering a report imports neither the data readers nor the measuring engines."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_report_into"]


def write_report_into(folder: str | Path, path: str | Path | None = None, *, fairness: bool = True) -> Path:
    """Write the HTML report of a release after verifying every file it will read
    (:func:`dpmatrix.release.verify_files`: a swapped or edited table is refused, not rendered).
    Into the folder itself (the default): under the folder's output lock, through a temporary
    file, and with the report's SHA-256 written into the digest list, so the folder's report
    always describes the release beside it.

    Parameters
    ----------
    folder : str or Path
        A release folder.
    path : str or Path, optional
        Another place for the report (then nothing in the folder changes).
    fairness : bool
        As in :func:`dpmatrix._report.write_plan_report`.

    Returns
    -------
    Path
    """
    from ..release import digest_list, output_lock, sha256_file, verify_files, write_digest_list
    from . import REPORT_FILE, write_release_report

    folder = Path(folder)
    verify_files(folder, derived=False)  # the report itself is what gets rewritten
    if path is not None and Path(path).absolute() != (folder / REPORT_FILE).absolute():
        return write_release_report(folder, path, fairness=fairness)
    with output_lock(folder):
        verify_files(folder, derived=False)  # (again, now that no writer can change it)
        tmp = folder / f".{REPORT_FILE}.partial"
        try:
            write_release_report(folder, tmp, fairness=fairness)  # in the folder: its links stand
            derived = {k: v for k, v in list(digest_list(folder).items())[1:] if k != REPORT_FILE}
            derived[REPORT_FILE] = sha256_file(tmp)
            os.replace(tmp, folder / REPORT_FILE)
            write_digest_list(folder, derived)
        finally:
            tmp.unlink(missing_ok=True)
    return folder / REPORT_FILE
