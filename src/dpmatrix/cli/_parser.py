"""The ``dpmatrix`` argument parser, assembled from each command module's ``add_parser``."""

from __future__ import annotations

import argparse

from .._version import __version__
from . import _compare, _demo, _infer_domain, _ledger, _plan, _postprocess, _query, _release, _report, _synth


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpmatrix",
        description="Differentially private marginals with optimal matrix mechanisms (ResidualPlanner).",
        epilog="Run 'dpmatrix COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"dpmatrix {__version__}")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for module in (_plan, _compare, _release, _postprocess, _synth, _query, _report, _demo, _infer_domain):
        module.add_parser(sub)
    lsub = _ledger.add_parser(sub)
    for command in [*sub.choices.values(), *lsub.choices.values()]:
        # --debug after the command too; SUPPRESS keeps a --debug given before it
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show Python tracebacks on errors")
    return parser
