"""Command-line interface: ``dpmatrix <command>`` (also ``python -m dpmatrix``)."""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from .domain import Domain
from .errors import DPMatrixError
from .plan.plan import plan as make_plan
from .workload import Workload


def shipped_adult() -> tuple[Domain, Path]:
    """The Adult data shipped with the package (see dpmatrix/data/README.md for attribution)."""
    base = files("dpmatrix") / "data"
    return Domain.from_json(base / "adult-domain.json"), Path(str(base / "adult.csv"))


def cmd_demo(args: argparse.Namespace) -> int:
    dom, path = shipped_adult()
    df = pd.read_csv(path)
    wk = Workload.marginals(dom, args.k, upto=True)
    plan = make_plan(wk, rho=args.rho, objective=args.objective)
    say = print if not args.quiet else (lambda *a, **k: None)
    say(f"dpmatrix {__version__} demo: UCI Adult, {len(df):,} records, {len(dom)} attributes")
    say(f"workload: all marginals on at most {args.k} attributes ({len(wk)} marginals, "
        f"{int(wk.cells.sum()):,} cells), objective {args.objective}")
    say(f"privacy: rho = {plan.rho:.4g} (zCDP), epsilon = {plan.epsilon(1e-9):.4g} at delta = 1e-9, "
        f"mu = {plan.mu:.4g} (GDP)")
    say(f"accuracy before seeing data: RMSE {plan.rmse():.4f}, max cell variance {plan.max_variance():.4f}")
    rng = np.random.default_rng(args.seed)  # None: fresh OS entropy
    meas = plan.measure(df, rng=rng, progress=not args.quiet)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for names, table in meas.iter_marginals(progress=not args.quiet):
        stem = "__".join(names) if names else "total"
        table.to_csv(out / f"{stem}.csv", index=False)
        n += 1
    plan.to_json(out / "plan.json")
    say(f"wrote {n} marginal tables and plan.json to {out}/")
    show = ("sex", "income>50K")
    say(f"\nmarginal {show} with 95% confidence intervals:")
    say(meas.marginal(show).to_string(index=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpmatrix", description=__doc__)
    parser.add_argument("--version", action="version", version=f"dpmatrix {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="plan, measure and write a demo release of the shipped Adult data")
    demo.add_argument("--out", default="demo-release", help="output folder (default: demo-release)")
    demo.add_argument("--k", type=int, default=2, help="all marginals on at most k attributes (default 2)")
    demo.add_argument("--rho", type=float, default=0.5, help="zCDP budget (default 0.5)")
    demo.add_argument("--objective", choices=["sum_var", "max_var"], default="max_var",
                      help="max_var (default) keeps small tables accurate; sum_var minimizes total variance")
    demo.add_argument("--seed", type=int, default=None,
                      help="seed for reproducible noise (testing only: a real release must not fix it)")
    demo.add_argument("--quiet", action="store_true", help="no progress bars or summaries")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except DPMatrixError as exc:
        print(f"dpmatrix: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
