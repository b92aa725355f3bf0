"""Every code block of dev/notes/data27.md ("Release your own CSV") runs as written, in order,
in an empty folder: ```python blocks share one namespace; ```bash lines run in-process
(``dpmatrix.cli.main``) and must succeed."""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

from dpmatrix.cli import main

NOTE = Path(__file__).resolve().parents[1] / "dev" / "notes" / "data27.md"
BLOCKS = re.findall(r"^```(python|bash)\n(.*?)^```", NOTE.read_text(), flags=re.S | re.M)


def test_walkthrough_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPMATRIX_LEDGER", str(tmp_path / "ledger.sqlite3"))
    assert len(BLOCKS) >= 8
    ns: dict = {"__name__": "walkthrough"}
    for lang, code in BLOCKS:
        if lang == "python":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(code, f"data27.md:{code.splitlines()[0]}", "exec"), ns)
            continue
        for line in code.strip().splitlines():
            argv = shlex.split(line)
            assert argv[0] == "dpmatrix", line
            rc = main(argv[1:])
            out, err = capsys.readouterr()
            assert rc == 0, f"{line}: {err}"
            if argv[1] == "infer-domain":
                assert "wages: 3278 missing value(s)" in out and "language: 121 missing value(s)" in out
    assert (tmp_path / "slid-release" / "report.html").exists() or (tmp_path / "slid-release").exists()
