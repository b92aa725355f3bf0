"""The size is checked before counting, and a query reads only what it needs."""

from __future__ import annotations

import json

import pytest

import dpmatrix as dm
from dpmatrix._sizing import SizeError, check_size, estimate_size
from dpmatrix.release import load_release

from ._support import NO_REPORT, assert_one_line_error, release_args, run


def test_estimate_by_hand():
    dom = dm.Domain.from_dict({"a": 2, "b": 3, "c": 4})
    wk = dm.Workload(dom, [("a", "b"), ("c",), ("a", "b", "c")])
    s = estimate_size(wk, formats=2)
    # tables: 6 + 4 + 24 rows; noisy values at most the same sum (34)
    assert (s.table_rows, s.noisy_values, s.cells) == (34, 34, 68)
    assert s.bytes_written == 8 * 34 + 48 * 34 * 2
    assert s.peak_memory == 8 * 34 + 64 * 24 + 16 * 24
    check_size(s, 68)
    with pytest.raises(SizeError, match="68 cells, above the limit of 67"):
        check_size(s, 67)


def test_huge_workload_refused_before_data(tmp_path, capsys):
    # 60 attributes x 1000 values, all 3-way = C(60,3) * 1e9 = 3.4e13 cells
    (tmp_path / "d.json").write_text(json.dumps({f"x{i}": 1000 for i in range(60)}))
    (tmp_path / "data.csv").write_text("nothing,useful\n1,2\n")  # would fail if read
    rc, _, err = run(capsys, "release", tmp_path / "data.csv", "--domain", tmp_path / "d.json", "-w", "all:3",
                     "--rho", "1", "--out", tmp_path / "o", "--ledger", tmp_path / "l.sqlite3")  # fmt: skip
    assert_one_line_error(rc, err, "too large", "34,220,000,000,000 table rows", "--max-cells")
    assert not (tmp_path / "o").exists() and not (tmp_path / "l.sqlite3").exists()


def test_max_cells_override(small, capsys):
    rc, _, err = run(capsys, *release_args(small, small / "a", "--max-cells", "10"))
    assert_one_line_error(rc, err, "above the limit of 10")
    rc, _, err = run(capsys, *release_args(small, small / "b", "--max-cells", "100000", NO_REPORT))
    assert rc == 0, err


def test_saved_table_query_does_not_touch_measurements(small, capsys):
    out = small / "rel"
    rc, _, err = run(capsys, *release_args(small, out, NO_REPORT))
    assert rc == 0, err
    (out / "measurements.parquet").write_bytes(b"gone")  # would fail verification if opened
    rc, text, err = run(capsys, "query", out, "--marginal", "sex")
    assert rc == 0, err
    rc, _, err = run(capsys, "query", out, "--marginal", "sex", "--level", "0.9")  # needs them
    assert_one_line_error(rc, err, "measurements.parquet")


def test_reconstruction_reads_only_the_subsets(small, capsys):
    out = small / "rel"
    rc, _, err = run(capsys, *release_args(small, out, NO_REPORT))
    assert rc == 0, err
    rel = load_release(out)
    noisy = rel.measurements.noisy
    read: list = []
    real = type(noisy).__getitem__

    def spy(self, key):
        read.append(key)
        return real(self, key)

    type(noisy).__getitem__ = spy
    try:
        rel.marginal(("age", "sex"), level=0.9)
    finally:
        type(noisy).__getitem__ = real
    dom = rel.domain
    key = dom.resolve(("age", "sex"))
    assert read and all(set(k) <= set(key) for k in read)
    assert len(noisy) > len(set(read))  # other residuals exist and were not read
