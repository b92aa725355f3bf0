"""The release's tables as one Parquet dataset (dpmatrix._release_tables).

Every expected value comes from outside the code under test: the tables are compared with
``Measurements.marginal`` (the reconstruction, computed without the writer), and the dataset is
read by DuckDB, pandas and pyarrow's own filters, never by dpmatrix's reader alone.
"""

from __future__ import annotations

import io
import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import dpmatrix as dm
from dpmatrix import _release_tables as release_tables
from dpmatrix._release_tables import marginal_key
from dpmatrix.cli import main
from dpmatrix.release import load_release, write_release

SRC = Path(__file__).resolve().parents[2] / "src"
V1 = Path(__file__).resolve().parent / "data" / "release_v1"
STATS = ["estimate", "variance", "std", "lower", "upper"]

DOM = dm.Domain.from_dict({
    "age": {"bins": [0, 20, 40, 60, 120]},  # labelled by its bins
    "sex": {"labels": ["F", "M"]},
    "x": 3,  # plain codes
    "y": 4,
    "z": 2,
})  # fmt: skip


def _all_upto(dom, k):
    return [s for r in range(k + 1) for s in itertools.combinations(dom.names, r)]


@pytest.fixture(scope="module")
def meas():
    rng = np.random.default_rng(11)
    data = pd.DataFrame({n: rng.integers(0, s, 500) for n, s in zip(DOM.names, DOM.sizes)})
    plan = dm.plan(dm.Workload(DOM, _all_upto(DOM, 3)), rho=1.0, objective="sum_var")
    return plan.measure(data, rng=np.random.default_rng(3), encoding="codes")


@pytest.fixture()
def small_groups(monkeypatch):
    """Row groups of at most 40 rows and parts of at most 100: many groups, several parts."""
    monkeypatch.setattr(release_tables, "ROW_GROUP_ROWS", 40)
    monkeypatch.setattr(release_tables, "PART_ROWS", 100)


def _entry(folder, names):
    m = json.loads((Path(folder) / "manifest.json").read_text())
    return next(e for e in m["marginals"] if e["attributes"] == list(names))


# -- round trip ------------------------------------------------------------------------------------
def test_every_table_reads_back_as_the_reconstruction(meas, tmp_path, small_groups):
    out = write_release(meas, tmp_path / "rel", formats=("parquet", "csv"))
    parts = sorted(p.name for p in (out / "tables").iterdir())
    assert len(parts) > 2 and all(p.startswith("part-") and p.endswith(".parquet") for p in parts)
    groups = sum(pq.ParquetFile(out / "tables" / p).num_row_groups for p in parts)
    rel = load_release(out)
    assert groups >= 10 and len(rel.marginals) == len(meas.plan.workload)
    for names in rel.marginals:
        want = meas.marginal(names)  # the reconstruction, not the writer
        pd.testing.assert_frame_equal(rel.table(names), want, check_exact=True)  # same bits
        pd.testing.assert_frame_equal(rel.table(names, "csv"), want, check_exact=True)  # float text round-trips
        t = rel.read_table(names)  # pyarrow, no pandas
        assert t.column_names == [*names, *STATS]
        np.testing.assert_array_equal(t.column("estimate").to_numpy(), want["estimate"].to_numpy())
    # a table never straddles two row groups: its rows are one slice of one group
    for e in rel.manifest["marginals"]:
        loc = e["table"]
        md = pq.ParquetFile(out / loc["file"]).metadata
        assert loc["row"] + loc["rows"] <= md.row_group(loc["row_group"]).num_rows


def test_rounded_release_rounds_the_saved_tables_only(meas, tmp_path):
    rel = load_release(write_release(meas, tmp_path / "rel", round=1))
    for names in [("age", "sex"), ("x", "y", "z"), ()]:
        want = meas.marginal(names)
        got = rel.table(names)
        for c in STATS:
            np.testing.assert_array_equal(got[c].to_numpy(), np.round(want[c].to_numpy(), 1))
        np.testing.assert_array_equal(rel.marginal(names)["estimate"], want["estimate"])  # exact


# -- one call from other tools ---------------------------------------------------------------------
@pytest.mark.parametrize("names", [("age", "sex"), ("x", "y", "z"), ("y",), ()])
def test_duckdb_pandas_and_pyarrow_read_a_table_in_one_call(meas, tmp_path, small_groups, names):
    out = write_release(meas, tmp_path / "rel")
    key = marginal_key(names, "comma")
    assert key == (",".join(names) or "total")
    want = meas.marginal(names)
    cols = [*names, *STATS]
    dd = duckdb.sql(f"SELECT * FROM '{out}/tables/*.parquet' WHERE marginal = '{key}'").df()
    pdf = pd.read_parquet(out / "tables", filters=[("marginal", "==", key)])
    arw = pq.read_table(out / "tables", filters=[("marginal", "==", key)]).to_pandas()
    for got in (dd, pdf, arw):
        assert len(got) == len(want)
        others = [c for c in got.columns if c not in cols and c != "marginal"]
        assert got[others].isna().all().all()  # attributes the marginal lacks are null
        for c in STATS:
            np.testing.assert_array_equal(got[c].to_numpy(dtype=float), want[c].to_numpy())
        for n in names:  # labels as text, plain codes as integers
            np.testing.assert_array_equal(got[n].astype(str).to_numpy(), want[n].astype(str).to_numpy())


# -- keys --------------------------------------------------------------------------------------------
ODD = {"a,b": 2, "a": 2, "b": 2, "total": 2, "x y": 3, 'q"t': 2, "é;": 2}


def test_keys_are_collision_free_with_odd_names(tmp_path):
    rng = np.random.default_rng(5)
    dom = dm.Domain(ODD)
    sets = _all_upto(dom, 2)
    meas = dm.plan(dm.Workload(dom, sets), rho=1.0, objective="sum_var").measure(
        pd.DataFrame({n: rng.integers(0, s, 200) for n, s in ODD.items()}), rng=rng, encoding="codes")
    out = write_release(meas, tmp_path / "rel", formats=("parquet", "csv"))
    m = json.loads((out / "manifest.json").read_text())
    assert m["tables"]["key"] == "json"
    keys = [e["key"] for e in m["marginals"]]
    assert len(set(keys)) == len(keys) == len(sets)
    for e in m["marginals"]:  # the JSON key decodes to the exact names: injective by construction
        assert json.loads(e["key"]) == e["attributes"]
    csvs = [e["files"]["csv"] for e in m["marginals"]]
    assert len({c.lower() for c in csvs}) == len(csvs)
    rel = load_release(out)
    for names in [("a,b",), ("a", "b"), ("total",), (), ("x y", 'q"t'), ("é;", "a,b")]:
        want = meas.marginal(names)
        pd.testing.assert_frame_equal(rel.table(names), want, check_exact=True)
        pd.testing.assert_frame_equal(rel.table(names, "csv"), want, check_exact=True)
        key = json.dumps(list(rel.domain.names_of(rel.domain.resolve(names))), ensure_ascii=False)  # domain order
        got = pd.read_parquet(out / "tables", filters=[("marginal", "==", key)])
        np.testing.assert_array_equal(got["estimate"].to_numpy(), want["estimate"].to_numpy())


def test_comma_keys_when_names_allow():
    assert release_tables.key_style(["age", "sex"]) == "comma"
    assert release_tables.key_style(["a,b", "c"]) == "json"
    assert release_tables.key_style(["total", "c"]) == "json"  # "total" is the 0-way key
    names = ["age", "sex", "race"]
    keys = {marginal_key(s, "comma") for r in range(4) for s in itertools.combinations(names, r)}
    assert len(keys) == 8 and "total" in keys and "age,sex,race" in keys


def test_attribute_named_like_a_column_is_refused(tmp_path):
    dom = dm.Domain({"estimate": 2, "b": 2})
    meas = dm.plan(dm.Workload(dom, [("estimate", "b")]), rho=1.0).measure(
        pd.DataFrame({"estimate": [0, 1], "b": [1, 1]}), rng=np.random.default_rng(0), encoding="codes")
    with pytest.raises(dm.ReleaseError, match="'estimate'.*column names"):
        write_release(meas, tmp_path / "rel")
    assert not (tmp_path / "rel").exists()


# -- integrity -----------------------------------------------------------------------------------------
def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_tampered_row_group_is_refused_by_name_and_only_where_it_matters(meas, tmp_path, small_groups):
    out = write_release(meas, tmp_path / "rel")
    m = json.loads((out / "manifest.json").read_text())
    a, b = _entry(out, ("x", "y", "z")), _entry(out, ("age",))
    assert (a["table"]["file"], a["table"]["row_group"]) != (b["table"]["file"], b["table"]["row_group"])
    rel_file = a["table"]["file"]
    offset, length, _ = m["tables"]["parts"][rel_file]["row_groups"][a["table"]["row_group"]]
    _flip(out / rel_file, offset + length // 2)
    with pytest.raises(dm.ReleaseError, match=f"{rel_file}.*modified"):
        load_release(out).table(("x", "y", "z"))
    pd.testing.assert_frame_equal(load_release(out).table(("age",)), meas.marginal(("age",)), check_exact=True)
    load_release(out, verify=False).read_table(("x", "y", "z"))  # --no-verify reads what is there


def test_tampered_footer_or_size_is_refused(meas, tmp_path):
    out = write_release(meas, tmp_path / "rel")
    part = out / "tables" / "part-00000.parquet"
    m = json.loads((out / "manifest.json").read_text())
    footer = m["tables"]["parts"]["tables/part-00000.parquet"]["footer"][0]
    _flip(part, footer + 10)
    with pytest.raises(dm.ReleaseError, match="part-00000.parquet.*modified"):
        load_release(out).table(("age",))
    _flip(part, footer + 10)  # undone
    load_release(out).table(("age",))
    with open(part, "ab") as f:
        f.write(b"x")
    with pytest.raises(dm.ReleaseError, match="part-00000.parquet.*modified"):
        load_release(out).table(("age",))


def test_one_table_reads_one_row_group(meas, tmp_path, small_groups, monkeypatch):
    out = write_release(meas, tmp_path / "rel")
    rel = load_release(out)
    read_groups, hashed = [], []
    real_group, real_range = pq.ParquetFile.read_row_group, release_tables._digest_range
    monkeypatch.setattr(pq.ParquetFile, "read_row_group",
                        lambda self, i, *a, **k: read_groups.append(i) or real_group(self, i, *a, **k))
    monkeypatch.setattr(pq.ParquetFile, "read", lambda *a, **k: pytest.fail("read the whole file"))
    monkeypatch.setattr(release_tables, "_digest_range",
                        lambda f, o, n: hashed.append((o, n)) or real_range(f, o, n))
    e = _entry(out, ("x", "y", "z"))
    rel.read_table(("x", "y", "z"))
    assert read_groups == [e["table"]["row_group"]]
    rec = rel.manifest["tables"]["parts"][e["table"]["file"]]
    size = rec["bytes"]
    # the footer and the table's row group: a small part of the file
    assert hashed == [(rec["footer"][0], size - rec["footer"][0]), tuple(rec["row_groups"][e["table"]["row_group"]][:2])]


# -- formats -----------------------------------------------------------------------------------------
def test_csv_files_only_on_request(meas, tmp_path):
    out = write_release(meas, tmp_path / "default")
    assert not (out / "marginals").exists() and (out / "tables").is_dir()
    assert all("files" not in e for e in json.loads((out / "manifest.json").read_text())["marginals"])
    both = write_release(meas, tmp_path / "both", formats=("parquet", "csv"))
    csvs = sorted((both / "marginals").glob("*.csv"))
    assert len(csvs) == len(meas.plan.workload)
    text = (both / _entry(both, ("age", "x"))["files"]["csv"]).read_text()
    assert text.splitlines()[0] == "age,x,estimate,variance,std,lower,upper"
    got = pd.read_csv(io.StringIO(text))
    want = meas.marginal(("age", "x"))
    assert got["age"].tolist() == want["age"].astype(str).tolist()
    for c in STATS:
        np.testing.assert_array_equal(got[c].to_numpy(), want[c].to_numpy())
    only = write_release(meas, tmp_path / "csv", formats=("csv",))
    assert not (only / "tables").exists()
    pd.testing.assert_frame_equal(load_release(only).table(("sex", "y")), meas.marginal(("sex", "y")), check_exact=True)


def test_cli_tables_option(meas, tmp_path, capsys):
    rng = np.random.default_rng(1)
    pd.DataFrame({n: rng.integers(0, s, 100) for n, s in zip(DOM.names, DOM.sizes)}).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "dom.json").write_text(json.dumps({n: s for n, s in zip(DOM.names, DOM.sizes)}))
    base = ["release", str(tmp_path / "d.csv"), "--domain", str(tmp_path / "dom.json"), "-w", "all:<=2", "--rho", "1",
            "--no-ledger", "--no-report", "-q", "--seed", "1", "--encoding", "codes"]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    assert main([*base, "--out", str(tmp_path / "b"), "--tables", "parquet,csv"]) == 0
    capsys.readouterr()
    assert not (tmp_path / "a" / "marginals").exists()
    assert len(list((tmp_path / "b" / "marginals").glob("*.csv"))) == 1 + 5 + 10


# -- the query path ------------------------------------------------------------------------------------
def test_cli_query_prints_the_saved_table_exactly(meas, tmp_path, capsys, small_groups):
    out = write_release(meas, tmp_path / "rel")
    for names in [("age", "sex"), ("x", "y", "z")]:
        assert main(["query", str(out), "--marginal", ",".join(names), "--format", "csv"]) == 0
        got = pd.read_csv(io.StringIO(capsys.readouterr().out))
        want = meas.marginal(names)
        assert list(got.columns) == list(want.columns)
        for c in STATS:
            np.testing.assert_array_equal(got[c].to_numpy(), want[c].to_numpy())
    assert main(["query", str(out), "--marginal", "age,sex"]) == 0
    text = capsys.readouterr().out
    assert "saved table" in text and "[20, 40)" in text
    assert main(["query", str(out), "--marginal", "x", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["x"] for r in rows] == [0, 1, 2]
    # (JSON as pandas writes it: 10 significant digits)
    np.testing.assert_allclose([r["estimate"] for r in rows], meas.marginal(("x",))["estimate"].to_numpy(), rtol=1e-9)


def test_saved_table_read_path_is_pandas_free(meas, tmp_path):
    """read_saved_table (what ``dpmatrix query`` prints a saved table with) reads the dataset's
    row group and prints it without importing pandas: run in a fresh interpreter."""
    out = write_release(meas, tmp_path / "rel")
    code = (
        "import sys\n"
        "from dpmatrix.release import read_saved_table\n"
        "from dpmatrix._table_text import to_csv\n"
        f"t = read_saved_table({str(out)!r}, ['sex', 'age'])\n"
        "print(to_csv(t.columns, t.kinds, t.values), end='')\n"
        "print('pandas' in sys.modules)\n"
    )  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "False"
    got = pd.read_csv(io.StringIO("\n".join(lines[:-1])))
    want = meas.marginal(("age", "sex"))
    assert list(got.columns) == list(want.columns)
    for c in STATS:
        np.testing.assert_array_equal(got[c].to_numpy(), want[c].to_numpy())


# -- format 1 ----------------------------------------------------------------------------------------
def test_format_1_release_still_loads(tmp_path, capsys):
    """A release written by dpmatrix before the dataset layout (commit b65d2cc; one Parquet and
    one CSV file per marginal) loads, verifies, and its saved tables equal the marginals
    reconstructed from its own measurements."""
    old = tmp_path / "v1"
    shutil.copytree(V1, old)
    rel = load_release(old)
    assert rel.manifest["format"] == "dpmatrix.release/1" and len(rel.marginals) == 7
    for names in rel.marginals:
        want = rel.marginal(names)
        for fmt in ("parquet", "csv"):
            got = rel.table(names, fmt)
            np.testing.assert_allclose(got["estimate"].to_numpy(), want["estimate"].to_numpy(), rtol=1e-15)
        # saved by b65d2cc's kernel, recomputed by today's: equal up to the summation order
        np.testing.assert_allclose(rel.read_table(names).column("estimate").to_numpy(), want["estimate"].to_numpy(),
                                   rtol=1e-14)
    assert main(["query", str(old), "--marginal", "age,sex", "--format", "csv"]) == 0
    assert len(pd.read_csv(io.StringIO(capsys.readouterr().out))) == 3 * 2
    # and it is a release that a new one may replace
    rng = np.random.default_rng(0)
    new = dm.plan(dm.Workload(rel.domain, [("sex",)]), rho=1.0).measure(
        pd.DataFrame({"age": rng.integers(0, 3, 50), "sex": rng.integers(0, 2, 50), "n": rng.integers(0, 3, 50)}),
        rng=rng, encoding="codes")
    write_release(new, old, overwrite=True)
    assert load_release(old).manifest["format"] == "dpmatrix.release/2"


def test_unknown_format_is_refused_naming_it(tmp_path):
    folder = tmp_path / "v9"
    shutil.copytree(V1, folder)
    m = json.loads((folder / "manifest.json").read_text())
    m["format"] = "dpmatrix.release/9"
    (folder / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(dm.ReleaseError, match="dpmatrix.release/9.*reads dpmatrix.release/1, dpmatrix.release/2"):
        load_release(folder, verify=False)


def test_generalized_marginals_round_trip(tmp_path):
    """ResidualPlanner+ (prefix and range queries): the saved rows are the workload's queries,
    read back as Measurements.answer gives them (query labels, exact numbers)."""
    rng = np.random.default_rng(8)
    wk = dm.Workload(DOM, [("age", "x"), ("y", "z"), ("x",)], query_types={"age": "prefix", "y": "range"})
    meas = dm.plan(wk, rho=1.0, objective="sum_var").measure(
        pd.DataFrame({n: rng.integers(0, s, 300) for n, s in zip(DOM.names, DOM.sizes)}), rng=rng, encoding="codes")
    rel = load_release(write_release(meas, tmp_path / "rel", formats=("parquet", "csv")))
    for names in rel.marginals:
        want = meas.answer(names)
        for fmt in ("parquet", "csv"):
            pd.testing.assert_frame_equal(rel.table(names, fmt), want, check_exact=True)
    assert "0..3" in rel.read_table(("y", "z")).column("y").to_pylist()  # a range row, by its label


def test_cli_refuses_a_column_name_clash_before_reading_data(tmp_path, capsys, monkeypatch):
    (tmp_path / "d.csv").write_text("std,b\n0,1\n1,0\n")
    (tmp_path / "dom.json").write_text(json.dumps({"std": 2, "b": 2}))
    import dpmatrix._workflow

    monkeypatch.setattr(dpmatrix._workflow, "open_source", lambda *a, **k: pytest.fail("the data were opened"))
    rc = main(["release", str(tmp_path / "d.csv"), "--domain", str(tmp_path / "dom.json"), "-w", "all:<=2",
               "--rho", "1", "--out", str(tmp_path / "rel"), "--ledger", str(tmp_path / "l.sqlite3"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "'std'" in err and "column names" in err and err.count("dpmatrix: error:") == 1
    assert not (tmp_path / "rel").exists()
    from dpmatrix._ledger import Ledger

    assert Ledger(tmp_path / "l.sqlite3").rows() == []  # nothing charged
