"""Every byte count the library prints goes through one formatter, in decimal SI units
(1 kB = 1000 B): the release size estimate, the memory check and the post-processing model size
state the same unit for the same number. Expected strings are hand conversions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dpmatrix._bytesize import format_bytes
from dpmatrix._sizing import ReleaseSize, describe_size

SRC = Path(__file__).resolve().parents[2] / "src" / "dpmatrix"


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (999, "999 B"), (1000, "1 kB"), (1536, "1.54 kB"), (8 * 10**6, "8 MB"),
     (2**30, "1.07 GB"), (2 * 10**9, "2 GB"), (3 * 10**12, "3 TB"), (4 * 10**18, "4 EB")],
)  # fmt: skip
def test_bytes_are_printed_in_powers_of_1000_with_si_names(n, text):
    assert format_bytes(n) == text


def test_the_size_estimate_uses_it():
    line = describe_size(ReleaseSize(10, 10, 1536, 2**30))
    assert line.endswith("~1.54 kB written, peak memory ~1.07 GB")


def test_there_is_one_byte_formatter():
    """No module defines its own (two copies once disagreed: one divided by 1024 and printed KB)."""
    found = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node, "name", "") if isinstance(node, ast.FunctionDef) else ""
            if "bytes" in name and ("fmt" in name or "format" in name):
                found.append(f"{path.relative_to(SRC)}:{name}")
    assert found == ["_bytesize.py:format_bytes"]
