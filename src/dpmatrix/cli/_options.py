"""Option groups shared by several commands: workload, privacy budget, accuracy targets, noise,
rounding, quiet and the privacy-budget ledger."""

from __future__ import annotations

import argparse

from .._defaults import DEFAULT_OBJECTIVE


def _add_noise(p: argparse.ArgumentParser) -> None:
    p.add_argument("--noise", choices=["auto", "discrete_gaussian", "lattice_gaussian", "gaussian_float", "gaussian"],
                   default="auto",
                   help="auto (default): exact noise from the OS's secure random source: discrete "
                   "Gaussian for plain marginals, discrete Gaussian on a fine lattice for real-valued "
                   "strategies (sigma rounded up to a rational; the manifest reports the privacy "
                   "actually spent); gaussian_float (alias gaussian): floating-point noise from "
                   "NumPy's PCG64, not cryptographic, only on request; --seed always means "
                   "reproducible floating-point noise")


def _add_round(p: argparse.ArgumentParser) -> None:
    p.add_argument("--round", type=int, metavar="N",
                   help="round the published tables to N decimals (0: whole numbers; no privacy cost, "
                   "the saved measurements stay exact)")


def _add_privacy_unit(p: argparse.ArgumentParser) -> None:
    """``--privacy-id COL --max-records K [--missing-ids error|drop]``: the person a plan or a
    release protects (``release`` and ``plan`` take the same options)."""
    p.add_argument("--privacy-id", metavar="COL",
                   help="protect a person, not a record: the column identifying the person (with --max-records)")
    p.add_argument("--max-records", type=int, metavar="K",
                   help="records kept per person (a keyed pseudo-random choice); the budget is per person")
    p.add_argument("--missing-ids", choices=["error", "drop"], default=None,
                   help="records without an identifier: refuse the release (default) or leave them out (stated)")


def _add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars or summaries")


def _add_workload(p: argparse.ArgumentParser, required: bool = True) -> None:
    g = p.add_argument_group(
        "workload",
        "terms separated by ';': all:K (all K-way marginals), all:<=K or upto:K (at most K "
        "attributes, with the total), small:N (at most N cells), a,b (one marginal), total; "
        "append *W for a weight (age,sex*2); name=prefix|range|identity sets a query type. "
        "A .json file name is read as a workload file.",
    )
    g.add_argument("-w", "--workload", metavar="SPEC", help='e.g. "all:<=2" or "all:3; age,sex*2"')
    g.add_argument("-m", "--marginals", metavar="SPEC", help='e.g. "age,sex;race" (same syntax)')
    g.add_argument("--workload-file", metavar="FILE.json", help="a JSON workload file")
    g.add_argument(
        "--query-types", metavar="TYPES",
        help='per-attribute query types, e.g. "age=prefix,hours=range" (default: identity)',
    )  # fmt: skip
    g.add_argument(
        "--attributes", metavar="A,B,...",
        help="restrict the generators (all:K, small:N) to these attributes",
    )  # fmt: skip


def _add_budget(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("privacy budget (exactly one of --rho, --epsilon with --delta, --mu)")
    g.add_argument("--rho", type=float, help="zCDP budget rho")
    g.add_argument("--epsilon", type=float, help="(epsilon, delta)-DP budget: epsilon (needs --delta; "
                   "--delta 0 is pure epsilon-DP, planned by the pure planner with exact discrete Laplace noise)")
    g.add_argument(
        "--strategy", default=None,
        choices=["auto", "identity", "marginals", "fourier", "clustering", "optimized", "hierarchical", "haar",
                 "pidentity"],
        help="pure epsilon-DP (--delta 0) only: the strategy (default auto: plan all, keep the best; "
        "hierarchical / haar / marginals / auto for prefix and range query types)",
    )  # fmt: skip
    g.add_argument(
        "--delta", type=float,
        help="delta of the (epsilon, delta) budget; with --rho/--mu, the delta at which epsilon "
        "is reported (default 1e-9)",
    )  # fmt: skip
    g.add_argument("--mu", type=float, help="Gaussian-DP budget mu")
    p.add_argument(
        "--objective", choices=["max_var", "sum_var"], default=DEFAULT_OBJECTIVE,
        help=f"max_var: minimize the largest weighted cell variance, so small tables stay "
        f"accurate; sum_var: minimize the weighted total variance (default {DEFAULT_OBJECTIVE}, "
        "as in the library's dm.plan)",
    )  # fmt: skip
    p.add_argument(
        "--construction", choices=["auto", "centred", "split"], default="auto",
        help="residual construction for prefix/range queries: centred (the paper's Algorithm 4), "
        "split (each attribute's 1-D mechanism kept whole), or auto (default: plan both, keep "
        "the better); plain marginals are the same either way",
    )  # fmt: skip


def _add_targets(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target", action="append", metavar="SPEC",
        help="accuracy target instead of a budget (repeat it): 'age,sex=std<=10', 'race=var<=4', "
        "'age=moe<=50' (95%% margin of error), or 'var<=100' for every other marginal; with no "
        "budget the least privacy cost meeting every target is planned, with one the release "
        "missing its targets by the least factor",
    )  # fmt: skip


def _add_ledger(p: argparse.ArgumentParser, dataset: bool = True) -> None:
    g = p.add_argument_group("privacy-budget ledger")
    g.add_argument("--ledger", metavar="PATH",
                   help="ledger file (default: $DPMATRIX_LEDGER, else ~/.local/share/dpmatrix/_ledger.sqlite3)")
    if dataset:
        g.add_argument("--dataset", metavar="NAME",
                       help="name the spend is charged to (default: the data file's name without suffix)")
    g.add_argument("--no-ledger", action="store_true", help="do not record this release (warned)")
