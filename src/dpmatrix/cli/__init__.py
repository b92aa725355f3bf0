"""Command-line interface: ``dpmatrix <command>`` (also ``python -m dpmatrix``).

Commands:

* ``plan``    — accuracy before data: domain + workload + budget -> per-marginal variances and
  the privacy guarantee; reads no data.
* ``release`` — plan, measure a CSV/Parquet file (DuckDB by default) and write a release folder.
* ``query``   — print one marginal (with confidence intervals) from a release folder.
* ``report``  — write the HTML report of a release folder (``release`` writes one by default).
* ``demo``    — ``release`` on the shipped UCI Adult data, then show one marginal.
* ``infer-domain`` — derive a domain file from data (opt-in; weakens privacy, see its warning).
* ``ledger``  — the privacy-budget ledger: ``show`` totals per dataset, ``set-cap`` a dataset's cap.

Every release is charged to the ledger (:mod:`dpmatrix._ledger`; ``--ledger PATH`` or
``$DPMATRIX_LEDGER``) before any noise is drawn, under ``--dataset NAME`` (default: the data
file's name without suffix). Every option is checked before any data is read.

Every user mistake prints one line ``dpmatrix: error: ...`` on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from ..errors import DPMatrixError

__all__ = ["main"]

from ._common import (
    EXIT_USAGE,
    SEED_WARNING,
    CLIError,
    _budget_kwargs,
    _is_pure,
    _make_plan,
    _plan_from_targets,
    _read_domain,
    _report_delta,
    _workload,
)
from ._compare import cmd_compare
from ._demo import cmd_demo, shipped_adult
from ._engine import _on_unknown
from ._infer_domain import cmd_infer_domain
from ._ledger import cmd_ledger_set_cap, cmd_ledger_show
from ._options import _add_budget, _add_ledger, _add_noise, _add_quiet, _add_round, _add_targets, _add_workload
from ._output import (
    EPSILON_WARNING_ABOVE,
    Out,
    _describe_plan,
    _describe_targets,
    _is_terminal,
    _negative_note,
    _say_negatives,
    _showwarning,
    cli_wording,
    error_text,
    fmt_optimality,
    fmt_privacy,
    one_line,
    warn_large_epsilon,
    warn_line,
)
from ._parser import build_parser
from ._plan import _print_pure_plan, _write_plan_report, cmd_plan
from ._query import _marginal_header, _marginal_names, _print_columns, _print_saved, cmd_query
from ._release import _check_options, _dataset_name, cmd_release, run_release
from ._report import cmd_report, write_release_report_into
from ._synth import cmd_synth

# Each command imports what it needs inside its handler: building the parser and answering
# ``dpmatrix query`` for a saved table load no numerical library beyond NumPy and Arrow
# (tests/cli/test_cli_imports.py checks which modules a query imports).


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    given = sys.argv[1:] if argv is None else [str(a) for a in argv]
    _check_command_name(parser, given)
    _check_option_names(parser, given)
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unknown_options(parser, args, extras)
    with warnings.catch_warnings():
        # every warning (values remapped on request, inferred domain, --seed) is shown, each on
        # one line, even when the same warning was already shown earlier in the process
        warnings.simplefilter("always")
        warnings.showwarning = _showwarning
        return _run(args)


def _subcommand(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.ArgumentParser, int]:
    """The (innermost) subcommand parser named in ``argv`` and the position after its name."""
    target, pos = parser, 0
    while True:
        subs = [a for a in target._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return target, pos
        for i in range(pos, len(argv)):
            if argv[i] in subs[0].choices:
                target, pos = subs[0].choices[argv[i]], i + 1
                break
        else:
            return target, pos


def _check_command_name(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse a misspelt command with the nearest command names (``dpmatrix releas``: did you
    mean ``release``?) rather than argparse's list of every choice alone."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return
    choices = list(subs[0].choices)
    for tok in argv:
        if tok.startswith("-"):  # the top-level options take no value
            continue
        if tok in choices:
            return
        import difflib  # a misspelt command only

        close = difflib.get_close_matches(tok, choices, n=2, cutoff=0.6)
        if close:
            parser.error(f"unknown command {tok!r} (did you mean {' or '.join(close)}?)")
        return


def _check_option_names(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse an unknown ``--option`` of a subcommand before anything else is checked (argparse
    would first complain about a missing required option), with the subcommand's usage and the
    nearest option names."""
    target, pos = _subcommand(parser, argv)
    if target is parser:
        return
    options = [o for a in target._actions for o in a.option_strings if o.startswith("--")]
    for tok in argv[pos:]:
        if tok == "--":
            break
        if not tok.startswith("--"):
            continue
        name = tok.split("=", 1)[0]
        if name in options:  # whole names only: the parsers take no prefixes (allow_abbrev=False)
            continue
        import difflib  # an unknown option only

        close = difflib.get_close_matches(name, options, n=2, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        target.error(f"unrecognized option {name}{hint}")


def _unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> None:
    """Exit (status 2) with the usage of the subcommand that was given the unknown arguments,
    suggesting the nearest option names (``--worklaod``: did you mean ``--workload``?)."""
    import difflib

    target = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            target = action.choices.get(getattr(args, "command", None), parser)
            for sub in target._actions:  # a command with its own subcommands (ledger)
                if isinstance(sub, argparse._SubParsersAction):
                    for name, p in sub.choices.items():
                        if getattr(args, "ledger_command", None) == name or p.get_default("func") is getattr(args, "func", None):
                            target = p
    options = [o for a in target._actions for o in a.option_strings if o.startswith("--")]
    hints = []
    for x in extras:
        if x.startswith("-"):
            close = difflib.get_close_matches(x.split("=", 1)[0], options, n=2, cutoff=0.6)
            if close:
                hints.append(f"{x}: did you mean {' or '.join(close)}?")
    msg = f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else "")
    target.error(msg)


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``dpmatrix query ... | head``): exit quietly. stdout is
    pointed at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        rc = int(args.func(args) or 0)
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except DPMatrixError as exc:
        if args.debug:
            raise
        print(f"dpmatrix: error: {error_text(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError) as exc:  # files, permissions, malformed input caught late
        if args.debug:
            raise
        msg = f"{exc.strerror}: {exc.filename!r}" if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"dpmatrix: error: {one_line(msg)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("dpmatrix: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line, traceback with --debug
        if args.debug:
            raise
        print(
            f"dpmatrix: internal error: {type(exc).__name__}: {one_line(str(exc))} "
            "(rerun with --debug for the traceback, and please report it)",
            file=sys.stderr,
        )
        return 1
