"""Run the ``dpmatrix`` command line in-process, as the CLI tests do."""

from __future__ import annotations

from dpmatrix.cli import main


def run(capsys, *argv) -> tuple[int, str, str]:
    """``dpmatrix ARGV...`` (every argument passed through ``str``): its exit code and what it
    printed on stdout and stderr (read from pytest's ``capsys``)."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err
