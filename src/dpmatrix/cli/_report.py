"""``dpmatrix report``: the HTML report of a release folder (``release`` writes one by default)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import CLIError
from ._options import _add_quiet
from ._output import Out


def write_release_report_into(out: Path) -> Path:
    """Write ``report.html`` into a finished release folder, under a temporary name first, so a
    failed report leaves the release as it was."""
    from ..report import REPORT_FILE, write_release_report

    tmp = out / f".{REPORT_FILE}.partial"
    try:
        write_release_report(out, tmp)  # in the release folder: its links stand after the rename
        tmp.replace(out / REPORT_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    return out / REPORT_FILE


def cmd_report(args: argparse.Namespace) -> int:
    from ..report import write_release_report

    say = Out(args.quiet)
    folder = Path(args.release)
    try:
        path = write_release_report(folder, args.out, fairness=not args.no_fairness)
    except OSError as exc:
        target = args.out or str(folder / "report.html")
        raise CLIError(f"cannot write the report {target!r}: {exc.strerror or exc}") from None
    say(f"report written to {path} (open it in a browser)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``report`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    h = sub.add_parser("report", help="write the HTML report of a release folder",
                       description="Write a self-contained HTML report of a release: the privacy "
                       "guarantee in every unit, the noise and its randomness source, accuracy, cell "
                       "fairness, the strategy's budget shares, and the small marginals as tables and "
                       "charts (larger ones linked). Reads the manifest and the saved tables only.")
    h.add_argument("release", metavar="DIR", help="release folder")
    h.add_argument("--out", metavar="REPORT.html",
                   help="file to write (default: report.html in the release folder; links to the "
                   "release's files are relative to it)")
    h.add_argument("--no-fairness", action="store_true",
                   help="skip the sum_var / max_var comparison (it plans the workload a second time)")
    _add_quiet(h)
    h.set_defaults(func=cmd_report)
