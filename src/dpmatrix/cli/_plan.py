"""``dpmatrix plan``: accuracy before data: domain + workload + budget -> per-marginal variances
and the privacy guarantee; reads no data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .._statement import privacy_summary
from ..errors import DPMatrixError
from ..protocols import HasComparison
from ._common import CLIError, _budget_kwargs, _is_pure, _make_plan, _read_domain, _report_delta, check_out_file
from ._options import _add_budget, _add_privacy_unit, _add_targets, _add_workload
from ._output import (
    Out,
    _describe_plan,
    _describe_targets,
    continuous_claim_line,
    plan_privacy,
    warn_large_epsilon,
    warn_mu_not_claimed,
)


def cmd_plan(args: argparse.Namespace) -> int:
    say = Out(False)
    check_out_file(args.save, args.overwrite, "--save")
    check_out_file(args.report, args.overwrite, "--report")
    delta = _report_delta(args)
    if not args.target:
        _budget_kwargs(args)
    domain = _read_domain(args.domain)
    plan = _make_plan(args, domain)
    if _is_pure(plan):
        return _print_pure_plan(plan, args, say)
    privacy = plan_privacy(plan, delta, args)  # the default release's guarantee
    warn_large_epsilon(privacy["epsilon"], delta)
    warn_mu_not_claimed(args, privacy)
    table = plan.marginal_table()
    table["marginal"] = table["marginal"].replace("", "total")  # named as in query's output
    if plan.is_plain:
        table = table.rename(columns={"queries": "cells"})
    if args.save:
        try:
            plan.to_json(args.save)
        except OSError as exc:
            raise CLIError(f"cannot write {args.save!r}: {exc.strerror or exc}") from None
    if args.report:
        _write_plan_report(plan, args.report, delta)
    if args.format == "json":
        out = _json_with_privacy(plan, privacy)
        if privacy["mu"] is None:  # beside it, labelled: the continuous noise's claim
            out["privacy_if_continuous_noise"] = privacy_summary(plan, noise="gaussian", delta=delta)
        out["marginal_table"] = json.loads(table.to_json(orient="records"))
        try:
            out["lower_bound"] = plan.lower_bound_facts()
        except DPMatrixError:
            pass
        print(json.dumps(out, indent=1))
        return 0
    if args.format == "csv":
        print(table.to_csv(index=False), end="")
        return 0
    _describe_plan(plan, say, delta, privacy=privacy)
    if privacy["mu"] is None:
        say(continuous_claim_line(plan, delta))
    say("")
    say(table.to_string(index=False))
    if args.target:
        say("")
        _describe_targets(plan, say)
    if args.save:
        say(f"\nplan saved to {args.save} (use it with: dpmatrix release DATA --plan {args.save} ...)")
    if args.report:
        say(f"report written to {args.report} (open it in a browser)")
    return 0


def _json_with_privacy(plan, privacy: dict) -> dict:
    """``plan --format json``: the plan file (:meth:`~dpmatrix.Plan.saved_dict`, what ``--save``
    writes) with its ``privacy`` block (made when the file has none) completed by the statement of the default release's noise.

    ``privacy`` is per record, as in the file: it states the ρ the noise scales spend, which a
    plan file is checked against when it is read back, so this output is a valid plan file too.
    Under a privacy unit the per-person statement (the budget the person is protected with) is
    ``privacy_per_person`` beside it, never written over the per-record one."""
    out = plan.saved_dict()
    per_person = privacy if "record" in privacy else None
    out.setdefault("privacy", {}).update(privacy["record"] if per_person is not None else privacy)
    if per_person is not None:
        out["privacy_per_person"] = {k: v for k, v in per_person.items() if k != "record"}
    return out


def _print_pure_plan(plan, args: argparse.Namespace, say: Out) -> int:
    """``dpmatrix plan --epsilon E --delta 0``: the strategy groups with their ε shares and
    variances, and the strategies compared by ``auto``."""
    import pandas as pd

    table = plan.table()
    if args.report:
        _write_plan_report(plan, args.report, 0.0)
    if args.save:
        try:
            Path(args.save).write_text(json.dumps(plan.saved_dict(), indent=1) + "\n")
        except OSError as exc:
            raise CLIError(f"cannot write {args.save!r}: {exc.strerror or exc}") from None
    if args.format == "json":
        out = _json_with_privacy(plan, plan_privacy(plan, 0.0))
        out["groups_table"] = json.loads(table.to_json(orient="records"))
        print(json.dumps(out, indent=1))
        return 0
    if args.format == "csv":
        print(table.to_csv(index=False), end="")
        return 0
    _describe_plan(plan, say, 0.0)
    say("")
    say(table.to_string(index=False))
    if isinstance(plan, HasComparison) and plan.comparison:
        say("\nstrategies compared (auto):")
        say(pd.DataFrame(list(plan.comparison)).to_string(index=False))
    if args.save:
        say(f"\nplan saved to {args.save} (use it with: dpmatrix release DATA --plan {args.save} ...)")
    if args.report:
        say(f"report written to {args.report} (open it in a browser)")
    return 0


def _write_plan_report(plan, path: str, delta: float) -> None:
    from .._report import write_plan_report

    try:
        write_plan_report(plan, path, delta=delta)
    except OSError as exc:
        raise CLIError(f"cannot write the report {path!r}: {exc.strerror or exc}") from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``plan`` command and its options, added to the ``dpmatrix`` parser's subcommands."""
    p = sub.add_parser("plan", help="accuracy and privacy of a workload before any data (reads no data)",
                       description="Print per-marginal cell variances / std and the privacy guarantee "
                       "of the optimal plan for a workload and budget. Reads no data.")
    p.add_argument("--domain", required=True, metavar="D.json", help="domain file ({attr: size} or the rich form)")
    _add_workload(p)
    _add_budget(p)
    _add_targets(p)
    _add_privacy_unit(p)
    p.add_argument("--save", metavar="PLAN.json", help="also save the plan (for release --plan; it keeps the "
                   "--privacy-id unit, which the release then uses)")
    p.add_argument("--report", metavar="PLAN.html",
                   help="also write an HTML report of the plan (privacy, accuracy, fairness, strategy)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --save or --report file")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    p.set_defaults(func=cmd_plan)
