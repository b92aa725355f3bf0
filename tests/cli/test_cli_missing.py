"""CLI: a pandas-written CSV with gaps, infer-domain -> release -> query without edits, and the
missing-value options (--missing, --na-values). Expected counts are made by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_run import run
from dpmatrix.release import load_release

ROWS = pd.DataFrame({
    "childs": [0.0, 1.0, np.nan, 2.0, 1.0, np.nan, 0.0, 1.0],  # float-coded integers with gaps
    "union": ["yes", "no", "yes", "?", "no", "yes", "no", "no"],  # "?" marks a missing value
    "Income": [np.nan] * 8,  # never used by the release below
})  # fmt: skip


@pytest.fixture
def csv(tmp_path):
    p = tmp_path / "gss.csv"
    ROWS.to_csv(p, index=False)
    return p


def test_infer_release_query_round_trip_with_missing_values(capsys, csv, tmp_path):
    dom = tmp_path / "d.json"
    rc, out, err = run(capsys, "infer-domain", csv, "--out", dom, "--na-values", "?")
    assert rc == 0, err
    assert "childs: 2 missing value(s)" in out and "union: 1 missing value(s)" in out
    assert "Income: left out" in out
    spec = json.loads(dom.read_text())
    assert spec["childs"]["labels"] == ["0", "1", "2", "(missing)"] and spec["childs"]["missing"] == "category"
    rel = tmp_path / "rel"
    rc, out, err = run(capsys, "release", csv, "--domain", dom, "--na-values", "?", "-w", "all:<=2",
                       "--rho", "1e8", "--seed", "1", "--no-ledger", "--no-report", "--out", rel, "--quiet")
    assert rc == 0, err
    meas = load_release(rel).measurements
    assert meas.query({"childs": 1}).estimate == pytest.approx(3, abs=0.05)
    assert meas.query({"childs": "(missing)", "union": "yes"}).estimate == pytest.approx(2, abs=0.05)
    manifest = json.loads((rel / "manifest.json").read_text())
    assert "category" in json.dumps(manifest)
    rc, out, err = run(capsys, "query", rel, "--marginal", "childs", "--format", "csv")
    assert rc == 0 and "(missing)" in out


def test_missing_option_drop_and_error(capsys, csv, tmp_path):
    dom = tmp_path / "d.json"
    dom.write_text(json.dumps({"childs": {"labels": ["0", "1", "2"]}, "union": {"labels": ["no", "yes"]},
                               "Income": {"labels": ["low", "high"]}}))
    base = ["release", csv, "--domain", dom, "-w", "childs,union", "--rho", "1e8", "--seed", "1",
            "--no-ledger", "--no-report", "--quiet"]
    rc, out, err = run(capsys, *base, "--out", tmp_path / "r1")
    assert rc == 2 and not (tmp_path / "r1").exists()
    assert "'childs': 2 rows with a missing value" in err and "--missing childs=category" in err
    assert "'union': 1 row with a value that matches no label: '?' (1 row)" in err
    assert "Income" not in err  # not used: not read
    rc, out, err = run(capsys, *base, "--na-values", "?", "--missing", "drop", "--out", tmp_path / "r2")
    assert rc == 0, err
    meas = load_release(tmp_path / "r2").measurements
    # rows kept: childs and union present -> rows 0, 1, 4, 6, 7
    assert meas.query({"union": "no"}).estimate == pytest.approx(4, abs=0.05)
    assert meas.query({"childs": 0}).estimate == pytest.approx(2, abs=0.05)
    rc, out, err = run(capsys, *base, "--missing", "skip", "--out", tmp_path / "r3")
    assert rc == 2 and "--missing must be one of" in err


def test_header_case_did_you_mean_on_the_cli(capsys, csv, tmp_path):
    dom = tmp_path / "d.json"
    dom.write_text(json.dumps({"income": {"labels": ["a", "b"]}, "union": {"labels": ["no", "yes", "?"]}}))
    rc, out, err = run(capsys, "release", csv, "--domain", dom, "-w", "all:1", "--rho", "1", "--no-ledger",
                       "--out", tmp_path / "r", "--quiet")
    assert rc == 2 and "did you mean 'Income'?" in err

