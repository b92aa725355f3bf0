"""``dpmatrix report``: the HTML report of a release folder (``release`` writes one by default)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import CLIError, check_out_file
from ._options import _add_quiet
from ._output import Out


def write_release_report_into(out: Path) -> Path:
    """Write ``report.html`` into a release folder (verified first; inside its lock; its digest
    joins the digest list): :func:`dpmatrix._report.into.write_report_into`."""
    from .._report.into import write_report_into

    return write_report_into(out)


def cmd_report(args: argparse.Namespace) -> int:
    from .._report import REPORT_FILE
    from .._report.into import write_report_into

    say = Out(args.quiet)
    folder = Path(args.release)
    check_out_file(args.out, args.overwrite)
    if say.progress:  # on a terminal only, as the progress bars
        say.note(f"writing the HTML report of {folder} ...")
    try:
        path = write_report_into(folder, args.out, fairness=not args.no_fairness)
    except OSError as exc:
        target = args.out or str(folder / REPORT_FILE)
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
    h.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out file (the default report.html of the release is a "
                   "derived file and always rewritten)")
    h.add_argument("--no-fairness", action="store_true",
                   help="skip the sum_var / max_var comparison (it plans the workload a second time)")
    _add_quiet(h)
    h.set_defaults(func=cmd_report)
