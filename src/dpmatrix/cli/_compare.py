"""``dpmatrix compare``: every applicable strategy and planner against the singular value
bound; reads no data."""

from __future__ import annotations

import argparse

from ._common import _budget_kwargs, _read_domain, _workload
from ._options import _add_budget, _add_workload


def cmd_compare(args: argparse.Namespace) -> int:
    """Every applicable strategy / planner against the singular value bound (dm.compare)."""
    import pandas as pd

    from ..planners._compare import compare as compare_all

    budget = _budget_kwargs(args)
    wk = _workload(args, _read_domain(args.domain))
    df = compare_all(wk, **budget)
    if args.format == "csv":
        print(df.to_csv(index=False), end="")
        return 0
    if args.format == "json":
        print(df.to_json(orient="records", indent=1))
        return 0
    b = df.attrs["lower_bound"]
    print(f"lower bound (weighted total variance): {b.total:.6g}"
          + ("" if b.exact else " (valid, not exact)") + "; ratio = weighted total variance / bound")
    with pd.option_context("display.width", 200, "display.max_colwidth", 70):
        print(df.drop(columns=["bound_exact"]).to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``compare`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    c = sub.add_parser("compare", help="every strategy and planner against the lower bound (reads no data)",
                       description="One row per classic strategy (small domains), LSA, ResidualPlanner/RP+, "
                       "QuerySmasher and the pure epsilon-DP planner: total / max variance and the ratio "
                       "to the singular value bound (Li & Miklau). Reads no data.")
    c.add_argument("--domain", required=True, metavar="D.json", help="domain file ({attr: size} or the rich form)")
    _add_workload(c)
    _add_budget(c)
    c.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    c.set_defaults(func=cmd_compare)
