"""``dpmatrix query``: print one marginal (with confidence intervals) from a release folder.

A saved table is printed from its file and the manifest alone, without pandas or the planners
(tests/cli/test_cli_imports.py checks which modules a query imports)."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from ..jsonfile import loads_strict
from ._common import CLIError
from ._options import _add_quiet
from ._output import Out, _negative_note, _say_negatives, fmt_privacy

if TYPE_CHECKING:
    import pandas as pd


def _print_table(df: pd.DataFrame, fmt: str) -> None:
    import pandas as pd

    if fmt == "csv":
        from ..csv_cells import escape_frame

        print(escape_frame(df).to_csv(index=False), end="")  # no spreadsheet formulas in labels
    elif fmt == "json":
        print(df.to_json(orient="records", indent=1))
    else:
        with pd.option_context("display.max_rows", None, "display.width", 200):
            print(df.to_string(index=False))


def _print_saved(table, fmt: str) -> None:
    """A saved table (:class:`~dpmatrix.release.SavedTable`) printed as :func:`_print_table`
    prints its DataFrame, without pandas for the table and CSV formats."""
    from ..table_text import to_csv, to_string

    if fmt == "csv":
        print(to_csv(table.columns, table.kinds, table.values), end="")
    elif fmt == "json":
        _print_table(table.to_pandas(), fmt)
    else:
        print(to_string(table.columns, table.kinds, table.values))


def _marginal_header(label: str, source: str, level: float) -> str:
    return f"marginal {label} ({source}); estimate, variance, std, {level:.0%} confidence interval [lower, upper]"


def _asks_count(args: argparse.Namespace) -> bool:
    return bool(args.where or args.by or args.contrast)


def cmd_count(args: argparse.Namespace, say: Out) -> int:
    """``--where`` / ``--by`` / ``--contrast``: one count (or one per group) with the exact
    variance of the reconstruction, from the saved measurements (no data, no budget)."""
    from ..errors import DPMatrixError
    from ..reconstruct.linear_query import parse_where
    from ..release import load_release

    rel = load_release(args.release, verify=not args.no_verify)
    dom = rel.domain
    try:
        where = parse_where(dom, args.where or [], args.encoding)
        contrast = None
        if args.contrast:
            contrast = tuple(parse_where(dom, [c for c in side.split("&") if c.strip()], args.encoding)
                             for side in args.contrast)
        by = [b.strip() for b in args.by.split(",")] if args.by else None
        level = rel.level if args.level is None else args.level
        ans = rel.count(where, by=by, contrast=contrast, level=level)
    except DPMatrixError as exc:
        raise CLIError(str(exc)) from None
    question = " & ".join(args.where or []) or "all records"
    if contrast is not None:
        question = f"({question}) & ({args.contrast[0]}) minus ({question}) & ({args.contrast[1]})"
    if args.format == "json":
        import json

        rows = ans.to_frame().to_dict("records")
        out = rows[0] if by is None else rows
        print(json.dumps(out if by is None else {"by": by, "rows": rows}, indent=1, default=float))
        return 0
    say(f"count of {question}{' by ' + ','.join(by) if by else ''}; estimate, exact variance (from the "
        f"covariance of the reconstruction, not a sum of cell variances), std, {level:.0%} confidence "
        "interval [lower, upper]")
    say(fmt_privacy(rel.privacy))
    _print_table(ans.to_frame(), args.format)
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    from ..release import load_release, read_saved_table

    say = Out(args.quiet or args.format != "table")
    if args.level is not None and not (math.isfinite(args.level) and 0 < args.level < 1):
        raise CLIError(f"--level must be strictly between 0 and 1, got {args.level!r}")
    if _asks_count(args):
        if args.marginal is not None or args.marginal_json is not None:
            raise CLIError("give --marginal (a whole table) or --where/--by/--contrast (a count), not both")
        return cmd_count(args, say)
    names = _marginal_names(args)  # checked before the release is read
    verify = not args.no_verify
    if names is not None:  # a saved table is printed from its file and the manifest alone
        saved = read_saved_table(args.release, names, verify=verify, level=args.level)
        if saved is not None:
            say(_marginal_header(",".join(saved.attributes) or "total", "saved table", saved.level))
            say(fmt_privacy(saved.privacy))
            _print_saved(saved, args.format)
            if "estimate" in saved.columns:
                _say_negatives(sum(1 for v in saved.column("estimate") if v < 0), say)
            return 0
    rel = load_release(args.release, verify=verify)
    p = rel.privacy
    if names is None:
        import pandas as pd

        say(f"{rel.path}: dpmatrix {rel.manifest['library']['version']} release created {rel.manifest['created']}")
        say(fmt_privacy(p))
        rows = pd.DataFrame(
            {
                "marginal": [",".join(e["attributes"]) or "total" for e in rel.manifest["marginals"]],
                "cells": [e["cells"] for e in rel.manifest["marginals"]],
                "max_variance": [e["max_variance"] for e in rel.manifest["marginals"]],
            }
        )
        say(f"{len(rows)} saved marginals (any marginal of their closure can be queried):")
        _print_table(rows, args.format)
        return 0
    key = rel.domain.resolve(names)
    level = rel.level if args.level is None else args.level
    df = rel.marginal(key, level)  # not saved at this level: reconstructed
    label = ",".join(rel.domain.names_of(key)) or "total"
    say(_marginal_header(label, "reconstructed from the saved measurements", level))
    say(fmt_privacy(p))
    _print_table(df, args.format)
    _negative_note(df, say)
    return 0


def _marginal_names(args: argparse.Namespace) -> list[str] | None:
    """Attribute names from --marginal (comma-separated) or --marginal-json (a JSON list of
    names: any characters, e.g. '["a,b", "c;d"]'); ``None`` when neither is given."""
    if args.marginal is not None and args.marginal_json is not None:
        raise CLIError("give --marginal or --marginal-json, not both")
    if args.marginal_json is not None:
        names = loads_strict(args.marginal_json, CLIError, "--marginal-json")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CLIError(f"--marginal-json must be a JSON list of attribute names, got {args.marginal_json!r}")
        return names
    if args.marginal is None:
        return None
    text = args.marginal.strip()
    return [] if text.lower() in ("total", "()", "") else [n.strip() for n in text.split(",")]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``query`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    q = sub.add_parser("query", help="print a marginal, or any count or range, with confidence intervals, from a release folder",
                       description="Print one marginal of a release with its confidence intervals "
                       "(--marginal), or any count over its cells with the exact interval (--where, "
                       "--by, --contrast); without either, list the release's marginals and privacy "
                       "guarantee. Everything is answered from the saved measurements: no data, no "
                       "privacy budget. Do not add cells and their variances by hand: the cells' "
                       "errors are correlated; --where gives the exact variance.",
                       epilog="examples:\n"
                       "  dpmatrix query REL --where 'age=25..54' --where 'income=>50K'\n"
                       "  dpmatrix query REL --where 'race=White,Black' --by sex --format json\n"
                       "  dpmatrix query REL --where 'age=25..54' --contrast sex=Male sex=Female",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("release", metavar="DIR", help="release folder")
    q.add_argument("--marginal", metavar="A,B", help="attributes of the marginal, e.g. age,sex ('total' for the count)")
    q.add_argument("--marginal-json", metavar="JSON",
                   help='attributes as a JSON list, for names with any characters: \'["a,b", "c;d"]\'')
    q.add_argument("--no-verify", action="store_true",
                   help="skip the SHA-256 checks of the release's files (paths and the stated privacy are always checked)")
    q.add_argument("--where", action="append", metavar="ATTR=SEL",
                   help="a condition (repeat to AND them): ATTR=VALUE, ATTR=V1,V2 (a set), ATTR=LO..HI "
                   "(an inclusive range of an ordinal or binned attribute; bin edges for binned ones)")
    q.add_argument("--by", metavar="ATTR[,ATTR]", help="one count per value of these attributes")
    q.add_argument("--contrast", nargs=2, metavar=("A", "B"),
                   help="the difference count(where & A) - count(where & B), each side conditions "
                   "joined by '&' (e.g. --contrast sex=Male sex=Female)")
    q.add_argument("--encoding", choices=["labels", "codes"], default="labels",
                   help="values in --where/--contrast are labels or raw numbers (default), or codes 0..n-1")
    q.add_argument("--level", type=float, help="confidence level (default: the release's)")
    q.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    _add_quiet(q)
    q.set_defaults(func=cmd_query)
