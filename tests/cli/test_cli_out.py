"""``--out`` names what a command writes — a file (report, synth, infer-domain; ``plan --save``
and ``--report`` likewise) or a folder (release, demo, postprocess) — and the same rule holds
for all: an existing output is replaced only with ``--overwrite``, an output of the wrong kind
(a folder where a file is written, a file where a folder is) is refused in one line with a
non-zero exit, before any work, and nothing is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix.cli import main

ADULT = Path(dm.__file__).parent / "data" / "adult.csv"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("out")
    data = pd.read_csv(ADULT, usecols=["sex", "race", "income>50K"]).head(2000)
    data.to_csv(d / "adult.csv", index=False)
    dom = dm.Domain.from_dict({"sex": 2, "race": 5, "income>50K": 2})
    (d / "domain.json").write_text(json.dumps(dom.to_dict()))
    meas = dm.plan(dm.Workload.marginals(dom, 2, upto=True), rho=0.5).measure(data, rng=np.random.default_rng(1))
    rel = dm.write_release(meas, d / "rel")
    return d, rel


def _file_commands(d: Path, rel: Path, out: Path) -> dict[str, list[str]]:
    plan = ["plan", "--domain", str(d / "domain.json"), "-w", "all:1", "--rho", "1"]
    return {
        "report": ["report", str(rel), "--out", str(out), "-q"],
        "synth": ["synth", str(rel), "--out", str(out), "--rows", "5", "-q"],
        "infer-domain": ["infer-domain", str(d / "adult.csv"), "--out", str(out), "-q"],
        "plan --save": plan + ["--save", str(out)],
        "plan --report": plan + ["--report", str(out)],
    }


@pytest.mark.parametrize("command", ["report", "synth", "infer-domain", "plan --save", "plan --report"])
def test_a_file_output_is_never_a_folder_and_never_replaced_silently(files, tmp_path, command, capsys):
    d, rel = files
    folder = tmp_path / "a-folder"
    folder.mkdir()
    argv = _file_commands(d, rel, folder)[command]
    assert main(argv + ["--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and "names the file to write" in err and err.count("\n") == 1
    assert list(folder.iterdir()) == []

    existing = tmp_path / "mine.txt"
    existing.write_text("mine")
    argv = _file_commands(d, rel, existing)[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "--overwrite" in err and err.count("\n") == 1
    assert existing.read_text() == "mine"
    assert main(argv + ["--overwrite"]) == 0
    assert existing.read_text() != "mine"

    missing = tmp_path / "no-such-folder" / "x.out"
    assert main(_file_commands(d, rel, missing)[command]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not missing.parent.exists()


def test_a_folder_output_is_never_a_file(files, tmp_path, capsys):
    d, rel = files
    existing = tmp_path / "mine.txt"
    existing.write_text("mine")
    for argv in (
        ["release", str(d / "adult.csv"), "--domain", str(d / "domain.json"), "-w", "all:1", "--rho", "1",
         "--no-ledger", "-q", "--out", str(existing), "--overwrite"],
        ["postprocess", str(rel), "--out", str(existing), "--overwrite", "-q"],
    ):  # fmt: skip
        assert main(argv) == 2
        assert "not a folder" in capsys.readouterr().err
        assert existing.read_text() == "mine"


def test_help_says_what_out_names(capsys):
    """Each command's --help states whether --out is a file or a folder."""
    for command, word in [("report", "file"), ("synth", "file"), ("infer-domain", "file"),
                          ("release", "folder"), ("demo", "folder"), ("postprocess", "folder")]:  # fmt: skip
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        entry = re.findall(r"--out [A-Z][\w.-]* (?!\[)(.{0,100})", text)[-1]  # in the options list
        assert word in entry, (command, entry)
