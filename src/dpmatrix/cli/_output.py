"""Human-facing output of the commands: messages on stdout (silenced by ``--quiet``), one-line
warnings on stderr, the privacy and optimality lines and the description of a plan."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from .._statement import privacy_line, privacy_summary, pure_summary
from ..errors import DPMatrixError
from ._common import _draws_continuous_noise, _is_pure

if TYPE_CHECKING:
    import pandas as pd


class Out:
    """Human-facing messages on stdout (silenced by --quiet); warnings always go to stderr.
    Progress bars (on stderr) only when stderr is a terminal, never into a log file."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    @property
    def progress(self) -> bool:
        return not self.quiet and _is_terminal(sys.stderr)

    def __call__(self, *args: Any) -> None:
        if not self.quiet:
            print(*args, flush=True)

    def note(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


#: ε above this (at the reported δ) is legal but protects little: warned, never refused
EPSILON_WARNING_ABOVE = 10.0


def plan_privacy(plan, delta: float, args: argparse.Namespace | None = None) -> dict:
    """THE privacy statement of a plan before any noise is drawn: that of the noise its release
    will draw (``--noise``/``--seed``, else the secure default), by the function that writes the
    manifest's (:func:`dpmatrix._statement.privacy_summary`). The ε-above-10 warning, the plan's
    console line and the ledger note all print this one number; the manifest states the same
    function of the noise actually drawn (σ rounded up, so never more)."""
    if plan.budget.is_pure:
        return _per_person(pure_summary(plan), plan, "discrete_laplace", delta)
    from .._measure.secure import resolve_noise

    if args is not None and _draws_continuous_noise(args):
        noise = "gaussian"
    else:
        noise = resolve_noise(plan, getattr(args, "noise", None) or "auto")
    return _per_person(privacy_summary(plan, noise=noise, delta=delta), plan, noise, delta)


def _per_person(privacy: dict, plan, noise: str, delta: float) -> dict:
    """A plan with a privacy unit is stated (and its ε warned about) per person."""
    unit = plan.privacy_unit
    if unit is None:
        return privacy
    from .._unit import unit_privacy

    stated = unit_privacy(privacy, unit, noise=noise, delta=delta)["unit"]
    return {**stated["per_person"], "record": privacy, "unit": stated}  # printed per person, naming the unit


def continuous_claim_line(plan, delta: float) -> str:
    """The continuous Gaussian's claim for a plan, labelled as such: it holds only for a release
    measured with ``--noise gaussian_float`` (exact analytic curve, μ-GDP)."""
    c = privacy_summary(plan, noise="gaussian", delta=delta)
    return (f"continuous-Gaussian claim (only with --noise gaussian_float): epsilon = {c['epsilon']:.6g} at "
            f"delta = {delta:.3g}, mu = {c['mu']:.6g} (Gaussian DP)")


def warn_mu_not_claimed(args: argparse.Namespace, privacy: dict) -> None:
    """A --mu budget whose noise has no proven μ-GDP: say what is stated instead."""
    if getattr(args, "mu", None) is not None and privacy.get("mu") is None and privacy.get("pure_epsilon") is None:
        warn_line(f"--mu {args.mu:g}: mu-GDP is proven for continuous Gaussian noise only; this release's "
                  f"discrete noise is stated as rho = mu^2/2 = {args.mu ** 2 / 2:.6g} zCDP (use --noise "
                  "gaussian_float for a mu-GDP statement)")


def warn_large_epsilon(epsilon: float, delta: float) -> None:
    if epsilon > EPSILON_WARNING_ABOVE:
        warn_line(
            f"epsilon = {epsilon:.4g} at delta = {delta:.3g} is above {EPSILON_WARNING_ABOVE:g}: a "
            "guarantee this weak protects little (published practice is about 0.1 to 10); "
            "check the budget (--rho / --epsilon / --mu)"
        )


def one_line(text: str) -> str:
    """Collapse a (possibly multi-line) message into one line: list items are joined with ';',
    a following sentence with '.'."""
    out: list[str] = []
    for p in (p.strip() for p in str(text).splitlines()):
        if not p:
            continue
        if p.startswith("- "):
            p = p[2:]
        if out and not out[-1].endswith((":", ";", ".", ",")):
            out[-1] += "." if p[:1].isupper() else ";"
        out.append(p)
    return " ".join(out)


_API_TO_CLI = [
    ("with on_unknown='other' (CLI --on-unknown", "with (--on-unknown"),
    ("with on_unknown='clip' (CLI --on-unknown", "with (--on-unknown"),
    ("in the domain (CLI --missing", "in the domain file (or --missing"),
    ("declared na_values marker", "--na-values marker"),
    ("or na_values if", "or --na-values if"),
    ("on_unknown='clip'", "--on-unknown clip"),
    ("on_unknown='other'", "--on-unknown other"),
    ("per column as {column: policy}", "per column as --on-unknown col=policy[,col=policy]"),

    ("(plan.measure(data, encoding='raw'))", ""),
    ("encoding='raw'", "--encoding raw"),
    ("encoding='codes'", "--encoding codes"),
]


#: Lines a data error may take on the terminal (each problem: what, the valid values, the fix).
MAX_ERROR_LINES = 16


def error_text(exc: BaseException) -> str:
    """The text after ``dpmatrix: error:``: one line, except for data that do not match the
    domain, which get a few readable lines (one problem per item, its valid values and fix)."""
    from ..errors import DataError

    message = cli_wording(str(exc))
    if not isinstance(exc, DataError) or "\n" not in message:
        return one_line(message)
    lines = [ln.rstrip() for ln in message.splitlines() if ln.strip()]
    if len(lines) > MAX_ERROR_LINES:
        lines = lines[: MAX_ERROR_LINES - 1] + [f"  ... ({len(lines) - MAX_ERROR_LINES + 1} more lines; --debug shows all)"]
    return "\n".join(lines)


def cli_wording(message: str) -> str:
    """Library messages name Python arguments; say the command-line option instead."""
    for api, cli in _API_TO_CLI:
        message = message.replace(api, cli)
    return message


def warn_line(message: str) -> None:
    print(f"dpmatrix: warning: {one_line(message)}", file=sys.stderr, flush=True)


def _showwarning(message, category, filename, lineno, file=None, line=None) -> None:
    warn_line(str(message))


def fmt_privacy(privacy: dict) -> str:
    """The privacy line: :func:`dpmatrix._statement.privacy_line` (the one function every command
    uses, fed with the manifest's own ``privacy`` object after a release)."""
    return privacy_line(privacy)


def _negative_note(df: pd.DataFrame, say: Out) -> None:
    """Say what negative estimates mean when a printed table has some."""
    if "estimate" in df:
        _say_negatives(int((df["estimate"] < 0).sum()), say)


def _say_negatives(count: int, say: Out) -> None:
    from ..release import NEGATIVE_ESTIMATES

    if count:
        say(f"note: {count} negative estimate(s). {NEGATIVE_ESTIMATES}")


def _describe_targets(plan, say: Out) -> None:
    cert = plan.certificate()
    if cert["problem"] == "least_privacy":
        say(f"least privacy cost meeting every target: pcost {plan.pcost:.6g} (certified lower bound "
            f"{cert['pcost_lower_bound']:.6g}, relative gap {cert['gap']:.1e}, {cert['status']})")
    else:
        say(f"at this budget the largest variance/target is {cert['max_ratio']:.6g} (certified lower "
            f"bound {cert['max_ratio_lower_bound']:.6g}, relative gap {cert['gap']:.1e}, {cert['status']}); "
            f"every target is met at pcost {cert['needed_pcost']:.6g}")
    say("targets (variances; worst query of each marginal):")
    say(plan.target_table().to_string(index=False))


def _describe_plan(plan, say: Out, delta: float, describe_privacy: bool = True,
                   privacy: dict | None = None) -> None:
    wk = plan.workload
    if _is_pure(plan):
        say(f"workload: {len(wk)} marginals, {int(wk.cells.sum()):,} cells; pure epsilon-DP strategy "
            f"{plan.strategy!r} ({plan.budgeting} budgets), {len(plan.groups)} groups")
        if describe_privacy:
            say(fmt_privacy(plan_privacy(plan, 0.0)))
        say(f"accuracy (data-independent): RMSE {plan.rmse():.6g}, max cell variance "
            f"{plan.max_variance():.6g} (std {math.sqrt(plan.max_variance()):.6g})")
        return
    kept = "" if plan.is_plain else f" ({plan.construction} residual construction)"
    say(
        f"workload: {len(wk)} marginals, {int(wk.cells.sum()):,} cells, objective "
        f"{plan.objective}; {int(plan.measured.sum())} residual mechanisms{kept}"
    )
    if describe_privacy:
        say(fmt_privacy(privacy if privacy is not None else plan_privacy(plan, delta)))
    say(
        f"accuracy (data-independent): RMSE {plan.rmse():.6g}, max cell variance "
        f"{plan.max_variance():.6g} (std {math.sqrt(plan.max_variance()):.6g})"
    )
    say(fmt_optimality(plan))


def fmt_optimality(plan) -> str:
    """One line: the plan against the singular value bound."""
    try:
        o = plan.optimality()
    except DPMatrixError as exc:
        return f"lower bound: not available ({one_line(str(exc))})"
    if o.objective == "max_var":
        what = (f"lower bound {o.bound:.6g} (singular value bound / {o.svd.n_queries:.0f} queries; "
                "usually not attainable)")
    else:
        what = f"singular value bound {o.bound:.6g} (1 = optimal among Gaussian matrix mechanisms)"
    loose = "" if o.exact else "; the bound is valid but not exact, so the true gap may be smaller"
    return f"optimality: {o.quantity} {o.value:.6g}, {what}: ratio {o.ratio:.6g}{loose}"
