"""MkDocs hooks of the documentation site (``mkdocs.yml``: ``hooks:``).

``on_page_content`` renders the Sphinx cross-reference roles of the docstrings
(``:class:`~dpmatrix._privacy.Budget```, ``:func:``, ``:meth:``, …), which mkdocstrings shows
verbatim, as code with the short name (``Budget``), the way Sphinx would print them.

``on_files`` adds ``reference/cli.md``, generated from the command line's own argument parser
(:func:`dpmatrix.cli.build_parser`), so the CLI reference can never drift from the options the
program accepts: every command and subcommand, its usage line, its description and one row per
option (flags, metavariable, default, help text).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "src") not in sys.path:  # the tree's own dpmatrix, installed or not
    sys.path.insert(0, str(ROOT / "src"))

CLI_PAGE = "reference/cli.md"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if a.help == argparse.SUPPRESS:
            continue
        flags = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.metavar or a.dest}`"
        if a.option_strings and a.nargs != 0:
            flags += f" `{a.metavar or a.dest.upper()}`"
        if a.choices and not isinstance(a, argparse._SubParsersAction):
            flags += " (" + " \\| ".join(f"`{c}`" for c in a.choices) + ")"
        default = a.default
        shown = "" if default in (None, False, argparse.SUPPRESS) or a.nargs == 0 else f"`{default}`"
        rows.append(f"| {flags} | {shown} | {_cell(a.help or '')} |")
    return rows


def _usage(parser: argparse.ArgumentParser) -> str:
    usage = parser.format_usage().strip().removeprefix("usage: ")
    return "```text\n" + usage + "\n```"


def _section(name: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    out = [f"{'#' * level} `{name}`", "", _usage(parser), ""]
    if parser.description:
        out += [_cell(parser.description), ""]
    rows = _option_rows(parser)
    if rows:
        out += ["| option | default | meaning |", "|---|---|---|", *rows, ""]
    if parser.epilog:
        out += [_cell(parser.epilog), ""]
    for sub_name, sub in _subcommands(parser):
        out += _section(f"{name} {sub_name}", sub, level + 1)
    return out


def cli_markdown() -> str:
    """The CLI reference page, as Markdown, from :func:`dpmatrix.cli.build_parser`."""
    import os

    from dpmatrix.cli import build_parser

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # the usage lines wrap the same way on every machine
    try:
        parser = build_parser()
        usage = _usage(parser)
        sections = [line for name, sub in _subcommands(parser)
                    for line in _section(f"dpmatrix {name}", sub, 2)]
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    out = [
        "# Command-line reference",
        "",
        "Generated at build time from the program's own argument parser "
        "(`dpmatrix.cli.build_parser`), so it lists exactly the options `dpmatrix` accepts. "
        "`dpmatrix COMMAND --help` prints the same text in a terminal; `python -m dpmatrix` "
        "is the same program. Every user mistake prints one line `dpmatrix: error: ...` and "
        "exits with status 2 (`--debug` shows the traceback).",
        "",
        usage,
        "",
        "| option | default | meaning |",
        "|---|---|---|",
        *_option_rows(parser),
        "",
    ]
    out += sections
    return "\n".join(out) + "\n"


def on_files(files, config):  # noqa: D103  (MkDocs hook)
    from mkdocs.structure.files import File

    files.append(File.generated(config, CLI_PAGE, content=cli_markdown()))
    return files


_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([^<]*)</code>")


def _role(m: re.Match) -> str:
    name = m.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if m.group(1) else name}</code>"


def on_page_content(html, page, config, files):  # noqa: D103  (MkDocs hook)
    return _ROLE.sub(_role, html)
