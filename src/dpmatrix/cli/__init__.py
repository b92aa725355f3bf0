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

Every release is charged to the ledger (:mod:`dpmatrix.ledger`; ``--ledger PATH`` or
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
    fmt_optimality,
    fmt_privacy,
    one_line,
    warn_large_epsilon,
    warn_line,
)
from ._parser import build_parser
from ._plan import _print_pure_plan, _write_plan_report, cmd_plan
from ._query import _marginal_header, _marginal_names, _print_saved, _print_table, cmd_query
from ._release import _check_options, _dataset_name, cmd_release, run_release
from ._report import cmd_report, write_release_report_into
from ._synth import cmd_synth

# Each command imports what it needs inside its handler: building the parser and answering
# ``dpmatrix query`` for a saved table load no numerical library beyond NumPy and Arrow
# (tests/cli/test_cli_imports.py checks which modules a query imports).


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        # every warning (values remapped on request, inferred domain, --seed) is shown, each on
        # one line, even when the same warning was already shown earlier in the process
        warnings.simplefilter("always")
        warnings.showwarning = _showwarning
        return _run(args)


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
        print(f"dpmatrix: error: {one_line(cli_wording(str(exc)))}", file=sys.stderr)
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
