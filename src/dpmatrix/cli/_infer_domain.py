"""``dpmatrix infer-domain``: derive a domain file from data (opt-in; weakens privacy, see its
warning)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ._common import CLIError, check_out_file
from ._engine import _na_values
from ._options import _add_quiet
from ._output import Out


def cmd_infer_domain(args: argparse.Namespace) -> int:
    from ..engines._infer import infer_domain_report

    path = Path(args.data)
    if not path.exists():
        raise CLIError(f"data file {args.data!r} does not exist")
    cols = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    if args.bins < 1:
        raise CLIError(f"--bins must be at least 1, got {args.bins}")
    if args.max_categories < 1:
        raise CLIError(f"--max-categories must be at least 1, got {args.max_categories}")
    check_out_file(args.out, args.overwrite)  # before the data is read
    na_values = _na_values(args.na_values)
    found = infer_domain_report(str(path), cols, max_labels=args.max_labels, n_bins=args.bins,
                                binning=args.binning, na_values=na_values,
                                max_categories=args.max_categories, delimiter=args.delimiter,
                                date_period=args.date_period,
                                date_format=_date_format(args.date_format))  # warns
    dom = found.domain
    out = Path(args.out)
    try:
        out.write_text(json.dumps(dom.to_dict(), indent=1) + "\n")
    except OSError as exc:
        raise CLIError(f"cannot write {args.out!r}: {exc.strerror or exc}") from None
    say = Out(args.quiet)
    binned = [a for a in dom.attributes if a.bins is not None]
    for a in binned:
        edges = ", ".join(f"{e:g}" for e in a.bins)
        say(f"{a.name}: {a.size} {args.binning} bins, edges [{edges}] (more than {args.max_labels} "
            "distinct values or fractions; change with --bins, --binning width|quantile, "
            "--max-labels, or edit the edges)")
    for a in dom.attributes:
        if a.dates is not None:
            first, last = a.labels[0], a.labels[a.dates.n_bins - 1]
            say(f"{a.name}: {a.dates.n_bins} {a.dates.period} bins {first} .. {last} (dates written "
                f"{a.dates.fmt}; a release reads that form and YYYY-MM-DD)")
    for line in found.messages():
        say(line)
    dated = sum(a.dates is not None for a in dom.attributes)
    by_period = f", {dated} dates by {args.date_period}" if dated else ""
    say(f"wrote a domain of {len(dom)} attributes ({len(binned)} binned{by_period}) to {args.out}: review it "
        "(and remove anything that reveals individual records) before using it with --domain")
    return 0


def _date_format(text: str | None) -> str | dict[str, str] | None:
    """``--date-format``: one format for every date column, or ``COL=FMT,COL2=FMT2``."""
    if not text:
        return None
    if "=" not in text:
        return text.strip()
    out: dict[str, str] = {}
    for item in text.split(","):
        col, eq, fmt = item.partition("=")
        if not eq or not col.strip() or not fmt.strip():
            raise CLIError(f"--date-format: bad entry {item!r}; write FORMAT or COLUMN=FORMAT, e.g. date=%d/%m/%Y")
        out[col.strip()] = fmt.strip()
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``infer-domain`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    i = sub.add_parser("infer-domain", help="derive a domain file from data (weakens privacy: read the warning)",
                       description="Derive a domain from the data. Which values occur is information "
                       "about individual records that the privacy guarantee does NOT cover: prefer a "
                       "domain written from public knowledge; review the file before use.")
    i.add_argument("data", metavar="DATA", help="CSV or Parquet file")
    i.add_argument("--out", required=True, metavar="D.json", help="domain file to write")
    i.add_argument("--columns", metavar="A,B,...", help="columns to include (default: all)")
    i.add_argument("--max-labels", type=int, default=50, help="integer columns with at most this many values get labels")
    i.add_argument("--bins", type=int, default=10,
                   help="number of bins for other numeric columns (default 10)")
    i.add_argument("--binning", choices=["width", "quantile"], default="width",
                   help="bin edges: equal width between the minimum and maximum (default), or the "
                   "data's quantiles (about equal counts); both are derived from the data and leak")
    i.add_argument("--na-values", metavar="M1,M2", default="",
                   help="text markers that mean a missing value besides empty cells (e.g. 'NA,?'); "
                   "columns with missing values get \"missing\": \"category\" (give the same "
                   "--na-values to release)")
    i.add_argument("--max-categories", type=int, default=100,
                   help="text columns with more distinct values (identifiers, dates, free text) are "
                   "left out with a message (default 100)")
    i.add_argument("--date-period", choices=["year", "quarter", "month", "week", "day"],
                   help="bin date columns by this calendar period (labels 2015, 2015-Q4, 2015-12, 2015-W49, "
                   "2015-12-01), covering the first to the last date; without it, date columns with many "
                   "values are left out with a message")
    i.add_argument("--date-format", metavar="FMT|COL=FMT",
                   help="how dates are written when the data cannot tell (day/month order): one of %%Y-%%m-%%d, "
                   "%%m/%%d/%%Y, %%d/%%m/%%Y, %%d.%%m.%%Y, ..., for every date column or per column "
                   "(date=%%d/%%m/%%Y); recorded in the domain file")
    i.add_argument("--delimiter", help="CSV field delimiter (default: detected)")
    i.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    _add_quiet(i)
    i.set_defaults(func=cmd_infer_domain)
