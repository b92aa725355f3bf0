"""The ``dpmatrix`` argument parser, assembled from each command module's ``add_parser``."""

from __future__ import annotations

import argparse
from typing import Any

from .._version import __version__
from . import _compare, _demo, _infer_domain, _ledger, _plan, _postprocess, _query, _release, _report, _synth


class _WholeOptionNames(argparse.ArgumentParser):
    """An argument parser that takes option names whole (``allow_abbrev=False``): a prefix such
    as ``--overwrit`` is an unknown option (told the nearest names by ``main``), never silently
    ``--overwrite``. Its subcommand parsers are of the same class (argparse makes them with
    ``type(self)``), so every parser of the command line is one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _WholeOptionNames(
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
