"""Every code block of README.md runs as written (in a temporary working directory), so the
README cannot drift from the API and the command line:

* every ```python block is executed;
* every ```bash line that starts with ``dpmatrix`` is run in-process (``dpmatrix.cli.main``), in
  order, in a folder holding a raw-valued ``DATA.csv`` and the ```json domain block as ``D.json``;
* the two install commands are checked to be the venv one-liner and ``bash dev/test.sh`` (both
  are run from a fresh clone by ``.ci/run``), and the ``dpmatrix demo`` they end with is run;
* any other shell line must be one of the few long-running commands listed here.
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

from dpmatrix.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"^```python\n(.*?)^```", TEXT, flags=re.S | re.M)
SHELL = re.findall(r"^```bash\n(.*?)^```", TEXT, flags=re.S | re.M)
JSON = re.findall(r"^```json\n(.*?)^```", TEXT, flags=re.S | re.M)

INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/dpmatrix demo --out demo-release"
TESTS = "bash dev/test.sh"
# long-running commands (minutes), run by hand or by .ci/run, not here
NOT_RUN = {
    "python benchmarks/run.py --out benchmarks/results.md",
    "python benchmarks/run.py --quick",
}


def _lines(block: str) -> list[str]:
    out = []
    for line in block.splitlines():
        line = line.split("  #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if line:
            out.append(line)
    return out


def test_readme_has_python_blocks():
    assert BLOCKS, "README.md has no ```python block"


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i + 1}" for i in range(len(BLOCKS))])
def test_readme_block_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md:{code.splitlines()[0]}", "exec"), {"__name__": "readme"})


def test_install_commands_need_no_system_pip():
    first = _lines(SHELL[0])
    assert first == [INSTALL, TESTS], first
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash dev/test.sh" in ci
    script = (ROOT / "dev" / "test.sh").read_text()
    assert "python3 -m venv .venv" in script and ".venv/bin/python -m pytest" in script


def test_every_shell_line_is_run_or_listed():
    for block in SHELL:
        for line in _lines(block):
            ok = line.startswith("dpmatrix ") or line in (INSTALL, TESTS) or line in NOT_RUN
            assert ok, f"README shell line neither run by tests/test_readme.py nor listed: {line!r}"


def test_readme_shell_lines_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPMATRIX_LEDGER", str(tmp_path / "ledger.sqlite3"))
    from dpmatrix.ledger import Ledger

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
    assert len(commands) >= 9
    assert INSTALL.split(" && ")[-1].removeprefix(".venv/bin/") in commands  # command 1's demo
    for line in commands:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # infer-domain's privacy warning is expected
            rc = main(shlex.split(line)[1:])
        captured = capsys.readouterr()
        assert rc == 0, f"{line!r} failed: {captured.err}"
    assert (tmp_path / "DIR" / "README.txt").exists() and (tmp_path / "DIR" / "tables").is_dir()
    assert (tmp_path / "demo-release" / "report.html").exists()
    assert json.loads((tmp_path / "inferred.json").read_text())["wage"]["bins"]
