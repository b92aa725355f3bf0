"""The short README.md runs as written (in a temporary working directory):

* its ```python block runs statement by statement, and a statement ending in ``# -> TEXT``
  prints exactly ``TEXT`` (the rules of the documentation pages, ``tests/docs/test_docs.py``);
* its two install commands are the venv one-liner and ``bash dev/test.sh`` (both are run from a
  fresh clone by ``.ci/run``), and the ``dpmatrix demo`` the first ends with is run;
* every ``dpmatrix`` line of its command-line block is run in-process (``dpmatrix.cli.main``), in
  order, in a folder holding a raw-valued ``DATA.csv`` and its ```json domain block as ``D.json``;
* every relative link points at a file of the repository (the documentation pages).

The long-form documentation moved to ``docs/`` (tested by ``tests/docs/``).
"""

from __future__ import annotations

import json
import re
import shlex
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from docs.test_docs import Block, run_python
from dpmatrix.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"^```python\n(.*?)^```", TEXT, flags=re.S | re.M)
SHELL = re.findall(r"^```bash\n(.*?)^```", TEXT, flags=re.S | re.M)
JSON = re.findall(r"^```json\n(.*?)^```", TEXT, flags=re.S | re.M)

INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/dpmatrix demo --out demo-release"
TESTS = "bash dev/test.sh"


def _lines(block: str) -> list[str]:
    out = []
    for line in block.splitlines():
        line = line.split("  #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if line:
            out.append(line)
    return out


def test_readme_is_short():
    assert len(TEXT.splitlines()) <= 150, "the README is the front door: details go to docs/"


def test_readme_library_example_prints_what_it_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert len(BLOCKS) == 1, "README.md shows one ```python block"
    code = BLOCKS[0]
    assert "rng=" not in code and "seed" not in code, "the README example must be secure by default"
    assert "# ->" in code, "the README example shows what it prints"
    run_python(Block("python", None, code, 1), {"__name__": "readme"}, "README.md")


def test_install_commands_need_no_system_pip():
    first = _lines(SHELL[0])
    assert first == [INSTALL, TESTS], first
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash dev/test.sh" in ci
    script = (ROOT / "dev" / "test.sh").read_text()
    assert "python3 -m venv .venv" in script and ".venv/bin/python -m pytest" in script
    assert '".[test,docs]"' in script, "dev/test.sh installs the docs extra (the site is built)"


def test_every_shell_line_is_run_or_an_install_command():
    for block in SHELL:
        for line in _lines(block):
            ok = line.startswith("dpmatrix ") or line in (INSTALL, TESTS)
            assert ok, f"README shell line neither run by tests/test_readme.py nor listed: {line!r}"
            assert "--seed" not in line, "README commands are secure by default"


def test_readme_shell_lines_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPMATRIX_LEDGER", str(tmp_path / "ledger.sqlite3"))
    from dpmatrix._ledger import Ledger

    Ledger.create()  # a configured ledger must exist ('dpmatrix ledger init')
    assert len(JSON) == 1, "README.md should show one ```json domain file"
    spec = json.loads(JSON[0])
    (tmp_path / "D.json").write_text(JSON[0])
    rng = np.random.default_rng(0)
    n = 3000
    pd.DataFrame({
        "age": rng.integers(0, 100, n),
        "sex": rng.choice(spec["sex"]["labels"], n),
        "race": rng.choice(spec["race"]["labels"], n),
        "wage": np.round(rng.uniform(0, 4999, n), 2),
    }).to_csv(tmp_path / "DATA.csv", index=False)  # fmt: skip
    commands = [line for block in SHELL for line in _lines(block) if line.startswith("dpmatrix ")]
    assert len(commands) >= 5
    commands.append(INSTALL.split(" && ")[-1].removeprefix(".venv/bin/"))  # command 1's demo
    for line in commands:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rc = main(shlex.split(line)[1:])
        captured = capsys.readouterr()
        assert rc == 0, f"{line!r} failed: {captured.err}"
    assert (tmp_path / "DIR" / "README.txt").exists() and (tmp_path / "DIR" / "tables").is_dir()
    assert (tmp_path / "report.html").exists()
    assert (tmp_path / "demo-release" / "report.html").exists()


@pytest.mark.parametrize("target", sorted(set(re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", TEXT))))
def test_readme_links_point_at_files(target):
    assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
