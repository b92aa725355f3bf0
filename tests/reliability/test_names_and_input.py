"""Collision-free table files, names with any characters addressable
from the CLI; CSV values read as text by both engines, identically."""

from __future__ import annotations

import csv
import io
import itertools
import json

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._encode import encode_frame, read_csv_text
from dpmatrix.engines import DuckDBEngine, NumpyEngine
from dpmatrix.release import load_release, table_stem

from ._support import run


def test_table_stems_are_distinct_where_slugs_collide():
    names = [("x?",), ("x!",), ("x_",), ("x_-2",), ("a,b",), ("a", "b"), ("a__b",), ()]
    stems = [table_stem(n) for n in names]
    assert len(set(s.lower() for s in stems)) == len(stems)
    assert stems[0].startswith("x_-") and stems[-1].startswith("total-")


WEIRD = {"x?": 2, "x!": 2, "x_-2": 3, "a,b": 2, "c;d": 2}


def test_weird_names_release_and_query(tmp_path, capsys):
    rng = np.random.default_rng(3)
    df = pd.DataFrame({n: rng.integers(0, s, 300) for n, s in WEIRD.items()})
    df.to_csv(tmp_path / "w.csv", index=False)
    (tmp_path / "w.json").write_text(json.dumps(WEIRD))
    out = tmp_path / "rel"
    rc, _, err = run(capsys, "release", tmp_path / "w.csv", "--domain", tmp_path / "w.json", "--workload-file",
                     _workload_file(tmp_path), "--rho", "1", "--out", out, "--ledger", tmp_path / "l.sqlite3", "-q",
                     "--tables", "parquet,csv")  # fmt: skip
    assert rc == 0, err
    m = json.loads((out / "manifest.json").read_text())
    files = [e["files"]["csv"] for e in m["marginals"]]
    assert len(set(f.lower() for f in files)) == len(files) == len(m["marginals"])
    keys = [e["key"] for e in m["marginals"]]  # the dataset's marginal column: JSON lists here
    assert len(set(keys)) == len(keys) and [json.loads(k) for k in keys] == [e["attributes"] for e in m["marginals"]]
    rel = load_release(out)
    for attrs in (["x?"], ["x!"], ["x_-2"], ["a,b", "c;d"]):
        rc, text, err = run(capsys, "query", out, "--marginal-json", json.dumps(attrs), "--format", "json")
        assert rc == 0, err
        got = pd.DataFrame(json.loads(text))
        want = rel.marginal(attrs)  # reconstructed from the measurements: the same numbers
        np.testing.assert_allclose(got["estimate"].to_numpy(), want["estimate"].to_numpy(), rtol=1e-9, atol=1e-9)
        assert len(got) == int(np.prod([WEIRD[a] for a in attrs]))


def _workload_file(tmp_path):
    p = tmp_path / "wk.json"
    p.write_text(json.dumps({"marginals": [["x?"], ["x!"], ["x_-2"], ["a,b", "c;d"]]}))
    return p


# yes/no, T/F (sniffed as booleans by DuckDB), "NA"/"None"/"null" (turned into missing by pandas),
# "01" (turned into 1): all ordinary labels here
LABELS = {
    "answer": ["yes", "no"],
    "flag": ["T", "F"],
    "code": ["NA", "None", "null", "01", "1"],
}


def test_both_engines_read_text_identically(tmp_path):
    rng = np.random.default_rng(11)
    rows = [{k: v[rng.integers(len(v))] for k, v in LABELS.items()} for _ in range(500)]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(LABELS))
    w.writeheader()
    w.writerows(rows)
    path = tmp_path / "labels.csv"
    path.write_text(buf.getvalue())
    dom = dm.Domain.from_dict({k: {"labels": v} for k, v in LABELS.items()})
    # the expected counts, by hand from the rows written (no dpmatrix, no pandas)
    sets = [s for k in (1, 2, 3) for s in itertools.combinations(range(3), k)]
    names = list(LABELS)
    expect = {}
    for s in sets:
        t = np.zeros([len(LABELS[names[a]]) for a in s])
        for r in rows:
            t[tuple(LABELS[names[a]].index(r[names[a]]) for a in s)] += 1
        expect[s] = t
    numpy_counts = NumpyEngine(encode_frame(read_csv_text(str(path), dom), dom), dom).count(sets)
    with DuckDBEngine(path, dom, encoding="raw") as de:
        duck_counts = de.count(sets)
    for s in sets:
        assert np.array_equal(numpy_counts[s].reshape(expect[s].shape), expect[s]), s
        assert np.array_equal(duck_counts[s].reshape(expect[s].shape), expect[s]), s


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_cli_engines_accept_text_labels(tmp_path, capsys, engine):
    path = tmp_path / "l.csv"
    path.write_text("answer,flag\n" + "yes,T\nno,F\nyes,F\n" * 50)
    (tmp_path / "d.json").write_text(json.dumps({"answer": {"labels": ["yes", "no"]}, "flag": {"labels": ["T", "F"]}}))
    rc, _, err = run(capsys, "release", path, "--domain", tmp_path / "d.json", "-m", "answer,flag", "--rho", "1",
                     "--out", tmp_path / engine, "--engine", engine, "--ledger", tmp_path / "l.sqlite3", "-q")  # fmt: skip
    assert rc == 0, err
