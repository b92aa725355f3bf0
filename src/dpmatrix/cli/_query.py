"""``dpmatrix query``: print one marginal (with confidence intervals) from a release folder.

A saved table is printed from its file and the manifest alone, without pandas or the planners
(tests/cli/test_cli_imports.py checks which modules a query imports)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from .._jsonfile import loads_strict
from ._common import CLIError
from ._options import _add_quiet
from ._output import Out, _say_negatives, fmt_privacy


def _print_columns(cols, kinds, values, fmt: str) -> None:
    """A table given as columns (``(columns, kinds, values)``, see :mod:`dpmatrix._table_text`)
    printed as text (what pandas' ``to_string`` prints), CSV or JSON records, without pandas."""
    from .._table_text import to_csv, to_json, to_string

    if fmt == "csv":
        print(to_csv(cols, kinds, values), end="")  # no spreadsheet formulas in labels
    elif fmt == "json":
        print(to_json(cols, kinds, values))
    else:
        print(to_string(cols, kinds, values))


def _print_saved(table, fmt: str) -> None:
    """A saved table (:class:`~dpmatrix.release.SavedTable`) printed by :func:`_print_columns`."""
    _print_columns(table.columns, table.kinds, table.values, fmt)


def _marginal_header(label: str, source: str, level: float) -> str:
    return f"marginal {label} ({source}); estimate, variance, std, {level:.0%} confidence interval [lower, upper]"


def _asks_count(args: argparse.Namespace) -> bool:
    return bool(args.where or args.by or args.contrast)


def cmd_count(args: argparse.Namespace, say: Out) -> int:
    """``--where`` / ``--by`` / ``--contrast``: one count (or one per group) with the exact
    variance of the reconstruction, from the saved measurements (no data, no budget)."""
    from .._reconstruct.linear_query import parse_where
    from ..errors import DPMatrixError
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

        if by is None:
            print(json.dumps(_answer_row(ans), indent=1))
            return 0
        cols, _, values = ans.columns()
        rows = [dict(zip(cols, r)) for r in zip(*values)]
        print(json.dumps({"by": by, "rows": rows}, indent=1))
        return 0
    say(f"count of {question}{' by ' + ','.join(by) if by else ''}; estimate, exact variance (from the "
        f"covariance of the reconstruction, not a sum of cell variances), std, {level:.0%} confidence "
        "interval [lower, upper]")
    say(fmt_privacy(rel.privacy))
    if by is None:  # one row, printed as pandas prints it, without importing pandas
        row = _answer_row(ans)
        _print_columns(list(row), ["float"] * len(row), [[v] for v in row.values()], args.format)
        return 0
    _print_columns(*ans.columns(), args.format)
    return 0


_ANSWER_COLUMNS = ("estimate", "variance", "std", "lower", "upper", "level")


def _answer_row(ans) -> dict[str, float]:
    """One count's tidy row (the columns of ``QueryAnswer.to_frame``) as plain floats."""
    return {c: float(getattr(ans, c)) for c in _ANSWER_COLUMNS}


def cmd_query(args: argparse.Namespace) -> int:
    from ..release import load_release, read_checked_manifest, read_saved_table

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
    if names is None:  # the listing: from the checked manifest, without the plan
        m = read_checked_manifest(args.release, verify=verify)
        say(f"{Path(args.release)}: dpmatrix {m['library']['version']} release created {m['created']}")
        say(fmt_privacy(m["privacy"]))
        entries = m["marginals"]
        say(f"{len(entries)} saved marginals (any marginal of their closure can be queried):")
        _print_columns(("marginal", "cells", "max_variance"), ("text", "int", "float"),
                       ([",".join(e["attributes"]) or "total" for e in entries], [e["cells"] for e in entries],
                        [e["max_variance"] for e in entries]), args.format)
        return 0
    rel = load_release(args.release, verify=verify)
    p = rel.privacy
    key = rel.domain.resolve(names)
    level = rel.level if args.level is None else args.level
    # reconstructed from the measurements (not saved at this level), printed without pandas
    cols, kinds, values = rel.marginal_columns(key, level)
    label = ",".join(rel.domain.names_of(key)) or "total"
    say(_marginal_header(label, "reconstructed from the saved measurements", level))
    say(fmt_privacy(p))
    _print_columns(cols, kinds, values, args.format)
    _say_negatives(sum(1 for v in values[cols.index("estimate")] if v < 0), say)
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
