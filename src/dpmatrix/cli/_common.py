"""What every command shares: the command line's own error type and exit status, and the
privacy budget, domain, workload and plan read from the parsed options."""

from __future__ import annotations

import argparse
import math

from .._domain import Domain
from ..errors import DomainError, DPMatrixError

EXIT_USAGE = 2


SEED_WARNING = (
    "--seed makes the noise reproducible: for testing only. A real release must use fresh "
    "randomness (omit --seed); the seed is never written to the release."
)


class CLIError(DPMatrixError):
    """A mistake in the command line that no library call catches."""


def check_out_file(path: str | None, overwrite: bool, option: str = "--out") -> None:
    """The one rule for an output FILE (``report``, ``synth``, ``infer-domain``, ``plan --save /
    --report``): ``option`` names the file written; an existing file is replaced only with
    ``--overwrite``; a folder or a missing parent folder is refused — each in one line, before
    any work is done. (Commands that write a folder — ``release``, ``demo``, ``postprocess`` —
    apply the same rule to their ``--out`` folder.)"""
    if path is None:
        return
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        raise CLIError(f"{option} {path!r} is a folder; {option} names the file to write")
    if p.exists() and not overwrite:
        raise CLIError(f"{path!r} exists; choose another {option} or pass --overwrite")
    if not p.absolute().parent.is_dir():
        raise CLIError(f"cannot write {path!r}: the folder {str(p.parent)!r} does not exist")


def _budget_kwargs(args: argparse.Namespace) -> dict[str, float]:
    given = [n for n in ("rho", "epsilon", "mu") if getattr(args, n) is not None]
    if not given:
        raise CLIError("no privacy budget: give --rho, or --epsilon with --delta, or --mu")
    if len(given) > 1:
        raise CLIError(f"give exactly one privacy budget, got --{' and --'.join(given)}")
    pure = given[0] == "epsilon" and args.delta == 0
    for n in ("rho", "epsilon", "mu", "delta"):
        v = getattr(args, n)
        if n == "delta" and pure:
            continue
        if v is not None and not (math.isfinite(v) and v > 0):
            raise CLIError(f"--{n} must be a positive number, got {v!r}")
    if getattr(args, "strategy", None) is not None and not pure:
        raise CLIError("--strategy is an option of pure epsilon-DP plans (--epsilon E --delta 0)")
    if given[0] == "epsilon":
        if args.delta is None:
            raise CLIError("--epsilon needs --delta (e.g. --delta 1e-9, or --delta 0 for pure epsilon-DP)")
        if pure:
            if getattr(args, "noise", None) == "discrete_gaussian":
                raise CLIError("--noise discrete_gaussian is a zCDP option: pure epsilon-DP (--delta 0) "
                               "uses the exact discrete Laplace")
            extra = {"strategy": args.strategy} if getattr(args, "strategy", None) else {}
            return {"epsilon": args.epsilon, "delta": 0.0, **extra}
        if _draws_continuous_noise(args):  # the continuous Gaussian's own exact curve
            from .._privacy import Budget

            return {"budget": Budget.approx(args.epsilon, args.delta, noise="gaussian")}
        return {"epsilon": args.epsilon, "delta": args.delta}  # converted for the secure (discrete) noise
    return {given[0]: getattr(args, given[0])}


def _draws_continuous_noise(args: argparse.Namespace) -> bool:
    """The release will draw floating-point Gaussian noise: ``--noise gaussian_float`` (alias
    ``gaussian``), or ``--seed`` with the default noise (:func:`dpmatrix._measure.secure.resolve_noise`)."""
    noise = getattr(args, "noise", None) or "auto"
    return noise in ("gaussian", "gaussian_float") or (noise == "auto" and getattr(args, "seed", None) is not None)


def _is_pure(plan) -> bool:
    """A pure epsilon-DP plan (reports ``pure_epsilon``; no residual closure)."""
    return plan.budget.is_pure


def _report_delta(args: argparse.Namespace) -> float:
    from .._statement import check_delta
    from ..release import DEFAULT_DELTA

    d = getattr(args, "delta", None)
    if d is None:
        return DEFAULT_DELTA
    if d == 0 and getattr(args, "epsilon", None) is not None:
        return 0.0  # pure epsilon-DP
    return check_delta(d, name="--delta")


def _read_domain(path: str) -> Domain:
    try:
        return Domain.from_json(path)
    except DomainError as exc:
        msg = str(exc)
        if repr(str(path)) in msg:
            raise
        raise DomainError(f"domain file {str(path)!r}: {msg}") from None


def _workload(args: argparse.Namespace, domain: Domain):
    from .._workload_spec import parse_workload

    if args.workload is None and args.marginals is None and args.workload_file is None:
        raise CLIError('no workload: give --workload (e.g. "all:<=2"), --marginals or --workload-file')
    return parse_workload(
        domain,
        args.workload,
        marginals=args.marginals,
        query_types=args.query_types,
        file=args.workload_file,
        attributes=args.attributes,
    )


def unit_of_args(args: argparse.Namespace):
    """The :class:`~dpmatrix._unit.Unit` of ``--privacy-id COL --max-records K [--missing-ids]``,
    or ``None`` when neither is given (``plan`` and ``release`` read the same options)."""
    col, k = getattr(args, "privacy_id", None), getattr(args, "max_records", None)
    missing_ids = getattr(args, "missing_ids", None)
    if col is None and k is None:
        if missing_ids is not None:
            raise CLIError("--missing-ids applies to a privacy unit: give it with --privacy-id COL --max-records K")
        return None
    if col is None or k is None:
        raise CLIError("--privacy-id COL and --max-records K go together (the identifier column and the "
                       "number of records one person may contribute)")  # fmt: skip
    if k <= 0:
        raise CLIError(f"--max-records must be at least 1, got {k} (the records kept per person; 1 protects "
                       "single records)")  # fmt: skip
    from .._unit import Unit

    try:
        return Unit(col, int(k), missing_ids=missing_ids or "error")
    except DPMatrixError as exc:
        raise CLIError(str(exc)) from None


def _make_plan(args: argparse.Namespace, domain: Domain):
    from ..planners._dispatch import plan as make_plan

    unit = unit_of_args(args)
    wk = _workload(args, domain)
    if getattr(args, "target", None):
        if unit is not None:
            raise CLIError("--privacy-id plans for a person: give a per-person budget (--rho/--epsilon/--mu), "
                           "not --target")  # fmt: skip
        return _plan_from_targets(args, wk)
    return make_plan(wk, objective=args.objective, construction=getattr(args, "construction", "auto"),
                     privacy_unit=unit, **_budget_kwargs(args))  # fmt: skip


def _plan_from_targets(args: argparse.Namespace, wk):
    """The plan for ``--target`` specs: least budget, or least ratio at a budget."""
    from ..planners._dispatch import plan as make_plan
    from ..planners._targets import targets_from_specs

    given = [n for n in ("rho", "epsilon", "mu") if getattr(args, n) is not None]
    budget = _budget_kwargs(args) if given else {}
    try:
        targets = targets_from_specs(args.target)
    except DPMatrixError as exc:
        raise CLIError(f"--target: {exc}") from None
    return make_plan(wk, targets=targets, construction=getattr(args, "construction", "auto"), **budget)
