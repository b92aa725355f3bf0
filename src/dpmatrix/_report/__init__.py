"""Self-contained HTML reports of a plan (before data) and of a release.

A report is one HTML file a privacy officer, a program manager or a demographer can open in any
browser, offline: the privacy guarantee in every unit with the ε(δ) curve, the noise and its
randomness source, the accuracy known before any data is read, the cell-fairness comparison of
the ResidualPlanner paper's §6.2, the strategy's budget shares and, for a release, every small
marginal as a table and a chart with its confidence intervals (larger ones as links to the
release's files). Figures are drawn with matplotlib and embedded as PNG.

* :func:`write_plan_report` — ``plan.report(path)``;
* :func:`write_release_report` — ``release.report(path)`` or a release folder;
* :mod:`~dpmatrix._report.content` gathers the numbers, :mod:`~dpmatrix._report.html` lays them out,
  :mod:`~dpmatrix._report.figures` draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..release import Release, load_release
from .content import Report, plan_content, plan_facts, release_content
from .html import render, write_report

__all__ = [
    "REPORT_FILE",
    "report",
    "Report",
    "plan_content",
    "plan_facts",
    "release_content",
    "render",
    "write_plan_report",
    "write_release_report",
    "write_report",
]

#: name of the report written into a release folder
REPORT_FILE = "report.html"


def report(what, path: str | Path | None = None, **options: Any) -> Path:
    """Write a self-contained HTML report of a plan or of a release.

    Parameters
    ----------
    what : Plan or Release
        A plan (privacy in every unit, accuracy before data, cell fairness, budget shares) or a
        release read back with :func:`dpmatrix.load_release` (its answers as well).
    path : str or Path, optional
        The HTML file. Required for a plan; for a release, ``report.html`` in its folder.
    **options
        ``delta``, ``level``, ``fairness`` for a plan; ``fairness`` for a release.

    Returns
    -------
    Path
        The file written.

    Examples
    --------
    >>> import dpmatrix as dm, tempfile, pathlib
    >>> p = dm.plan(dm.Workload(dm.Domain({"a": 2, "b": 3}), [("a", "b")]), rho=1.0)
    >>> dm.report(p, pathlib.Path(tempfile.mkdtemp()) / "plan.html").name
    'plan.html'
    """
    if isinstance(what, Release):
        return write_release_report(what, path, **options)
    if path is None:
        raise TypeError("dpmatrix.report(plan, path): a plan's report needs the file to write")
    return write_plan_report(what, path, **options)


def write_plan_report(plan, path: str | Path, *, delta: float = 1e-9, level: float = 0.95,
                      fairness: bool = True) -> Path:
    """Write the HTML report of a plan (no data involved).

    Parameters
    ----------
    plan : Plan or QuerySmasherPlan
    path : path
        The HTML file to write.
    delta : float, keyword-only
        δ at which ε is stated (default 1e-9).
    level : float, keyword-only
        Confidence level of the margins of error (default 0.95).
    fairness : bool, keyword-only
        Also plan the other objective (sum_var / max_var) at the same budget for the
        cell-fairness comparison (default True).

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import dpmatrix as dm
    >>> wk = dm.Workload.marginals(dm.Domain({"a": 3, "b": 4}), 1)
    >>> write_plan_report(dm.plan(wk, rho=0.5), "plan.html")  # doctest: +SKIP
    """
    return write_report(plan_content(plan, delta=delta, level=level, fairness=fairness), path)


def write_release_report(release, path: str | Path | None = None, *, fairness: bool = True) -> Path:
    """Write the HTML report of a release.

    Parameters
    ----------
    release : Release or path
        A :class:`~dpmatrix.release.Release` (from ``load_release``) or a release folder (only
        its manifest and saved tables are read).
    path : path, optional
        The HTML file to write; default ``report.html`` inside the release folder. Links to the
        release's files are relative to the page.
    fairness : bool, keyword-only
        As in :func:`write_plan_report`.

    Returns
    -------
    Path
        The path written.
    """
    manifest, plan, folder = _release_parts(release)
    out = Path(path) if path is not None else folder / REPORT_FILE
    content = release_content(manifest, plan, folder, report_dir=out.absolute().parent, fairness=fairness)
    return write_report(content, out)


def _release_parts(release) -> tuple[dict[str, Any], Any, Path]:
    """(manifest, plan, folder) of a Release or of a release folder (measurements not read:
    :func:`~dpmatrix.load_release` opens them lazily, and checks the manifest's integrity)."""
    if not isinstance(release, Release):
        release = load_release(release)
    return release.manifest, release.plan, Path(release.path)
