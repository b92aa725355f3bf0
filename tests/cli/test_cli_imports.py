"""End to end: ``dpmatrix query`` of a saved table reads only what it needs.

Structural checks, no timing (timings: benchmarks/bench_query.py). A query runs in a fresh
Python process, which reports the modules it imported: printing a saved table must load neither
pandas nor SciPy nor any engine, plotting or solver library, nor dpmatrix's planners and
reconstruction; ``import dpmatrix`` and building the command-line parser load no numerical
library at all. The same harness shows that a reconstructed marginal does load them, so the
check can fail. The printed text is compared with the full path (``load_release(...).table``
printed by pandas), for labelled, binned, prefix-query, coded and QuerySmasher releases.
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
from dpmatrix.cli import main
from dpmatrix.release import load_release, read_saved_table

SRC = Path(__file__).resolve().parents[2] / "src"

#: third-party libraries a saved-table query must not import (whatever the release layout)
HEAVY = ("pandas", "scipy", "duckdb", "pyspark", "jax", "matplotlib", "cvxpy", "mbi", "tqdm", "sklearn")
#: dpmatrix's planning, measuring and reconstruction: not needed to print a saved table
PLANNING = ("dpmatrix.planners", "dpmatrix._reconstruct", "dpmatrix._measure", "dpmatrix._solvers",
            "dpmatrix.engines", "dpmatrix._report", "dpmatrix._postprocess")  # fmt: skip

DOMAIN = {
    "age": {"bins": [0, 20, 40, 60, 120]},
    "sex": {"labels": ["F", "M"]},
    "race": {"labels": ["White", "Black", "Asian-Pac-Islander", "Other"]},
    "n": 3,
    "k": 4,
}


def _modules_of(code: str, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``code`` in a fresh interpreter (this tree's dpmatrix first on the path); it prints
    the sorted module names as its last stdout line."""
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    *_, last = r.stdout.rstrip("\n").split("\n")
    return r, set(json.loads(last))


QUERY = (
    "import json, sys\n"
    "from dpmatrix.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "assert rc == 0, rc\n"
    "print(json.dumps(sorted(sys.modules)))\n"
)


def _loaded(modules: set[str], roots) -> list[str]:
    return sorted(r for r in roots if any(m == r or m.startswith(r + ".") for m in modules))


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory) -> Path:
    """A small release with labels, bins, plain codes and a prefix-query attribute."""
    d = tmp_path_factory.mktemp("imports")
    rng = np.random.default_rng(11)
    n = 400
    pd.DataFrame(
        {
            "age": rng.uniform(0, 119, n).round(1),
            "sex": rng.choice(["F", "M"], n),
            "race": rng.choice(["White", "Black", "Asian-Pac-Islander", "Other"], n),
            "n": rng.integers(0, 3, n),
            "k": rng.integers(0, 4, n),
        }
    ).to_csv(d / "data.csv", index=False)
    (d / "domain.json").write_text(json.dumps(DOMAIN))
    out = d / "rel"
    rc = main([
        "release", str(d / "data.csv"), "--domain", str(d / "domain.json"), "--workload", "all:<=2; k=prefix",
        "--rho", "0.5", "--out", str(out), "--seed", "3", "--quiet", "--no-ledger", "--no-report",
    ])  # fmt: skip
    assert rc == 0
    return out


def test_import_dpmatrix_loads_no_numerical_library():
    _, mods = _modules_of("import json, sys\nimport dpmatrix\nprint(json.dumps(sorted(sys.modules)))")
    assert _loaded(mods, HEAVY + ("numpy", "pyarrow")) == []
    assert sorted(m for m in mods if m.startswith("dpmatrix")) == ["dpmatrix", "dpmatrix._hooks", "dpmatrix._version"]


def test_building_the_parser_loads_no_numerical_library():
    code = ("import json, sys\nfrom dpmatrix.cli import build_parser\nbuild_parser()\n"
            "print(json.dumps(sorted(sys.modules)))")  # fmt: skip
    _, mods = _modules_of(code)
    assert _loaded(mods, HEAVY + ("numpy", "pyarrow") + PLANNING) == []


@pytest.mark.parametrize("fmt", ["table", "csv"])
@pytest.mark.parametrize("marginal", ["age,sex", "race,n", "total"])
def test_saved_table_query_loads_neither_pandas_nor_the_planners(release_dir, marginal, fmt):
    r, mods = _modules_of(QUERY, "query", str(release_dir), "--marginal", marginal, "--format", fmt)
    assert _loaded(mods, HEAVY) == []
    assert _loaded(mods, PLANNING) == []
    assert "estimate" in r.stdout and r.stdout.count("\n") >= 2


def test_reconstructed_marginal_does_load_them(release_dir):
    """The control: the same harness sees the reconstruction's modules when they are used (a
    reconstructed table, even as JSON, still needs no pandas: tests/cli/test_query_paths.py)."""
    r, mods = _modules_of(QUERY, "query", str(release_dir), "--marginal", "age,sex", "--level", "0.9",
                          "--format", "json")  # fmt: skip
    assert '"estimate"' in r.stdout
    assert "dpmatrix._reconstruct" in _loaded(mods, PLANNING)
    # a --seed release has float Gaussian noise: its stated epsilon (the analytic Gaussian
    # mechanism's) needs SciPy's log_ndtr and brentq; pandas is never needed
    assert _loaded(mods, HEAVY) == ["scipy"]


def _expected(rel_dir: Path, attrs, fmt: str, capsys) -> str:
    """What ``query`` prints through the full path: Release.table printed by pandas."""
    rel = load_release(rel_dir)
    df = rel.table(attrs, rel.manifest["tables"]["formats"][0])
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "json":  # the records pandas writes, every float in full (not pandas' 10 digits)
        return df
    with pd.option_context("display.max_rows", None, "display.width", 200):
        return df.to_string(index=False) + "\n"


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
@pytest.mark.parametrize("attrs", [("age", "sex"), ("race", "n"), ("k",), ("n", "k"), ()])
def test_saved_table_prints_what_the_full_path_prints(release_dir, attrs, fmt, capsys):
    rc = main(["query", str(release_dir), "--marginal-json", json.dumps(list(attrs)), "--format", fmt])
    out = capsys.readouterr().out
    assert rc == 0
    want = _expected(release_dir, attrs, fmt, capsys)
    if fmt == "json":
        rows = json.loads(out)
        assert rows == json.loads(want.to_json(orient="records", double_precision=15)) or all(
            r.keys() == w.keys() and all(r[k] == w[k] or r[k] == pytest.approx(w[k], rel=1e-14) for k in r)
            for r, w in zip(rows, json.loads(want.to_json(orient="records", double_precision=15)), strict=True))
        return
    assert out.endswith(want)
    if fmt == "table":  # the header lines too
        assert "(saved table)" in out.splitlines()[0]


def test_querysmasher_release_prints_what_the_full_path_prints(tmp_path, capsys):
    """Plans that list their mechanisms keep their tables' columns as written."""
    dom = dm.Domain.from_dict({"a": {"labels": ["x", "y", "z"]}, "b": 4})
    wk = dm.Workload(dom, [("a", "b"), ("b",)])
    plan = dm.plan(wk, rho=1.0, planner="querysmasher")
    data = pd.DataFrame({"a": ["x", "y", "z", "x"] * 20, "b": [0, 1, 2, 3] * 20})
    folder = dm.write_release(plan.measure(data, rng=np.random.default_rng(1)), tmp_path / "qs")
    assert "plan" in json.loads((folder / "manifest.json").read_text())
    for attrs in (("a", "b"), ("b",)):
        for fmt in ("table", "csv"):
            assert main(["query", str(folder), "--marginal", ",".join(attrs), "--format", fmt, "-q"]) == 0
            assert capsys.readouterr().out == _expected(folder, attrs, fmt, capsys)


def test_read_saved_table_checks_what_load_release_checks(release_dir, tmp_path):
    import shutil

    rel = tmp_path / "rel"
    shutil.copytree(release_dir, rel)
    t = read_saved_table(rel, ["sex", "age"])
    assert t.attributes == ("age", "sex") and t.kinds[:2] == ("text", "text") and t.level == 0.95
    assert t.privacy == json.loads((rel / "manifest.json").read_text())["privacy"]
    assert read_saved_table(rel, ["age", "sex"], level=0.9) is None  # another level: reconstruct
    assert read_saved_table(rel, ["age", "sex", "race"]) is None  # not saved
    with pytest.raises(dm.UnknownAttributeError):
        read_saved_table(rel, ["agee"])
    # an edited table is refused by name; --no-verify reads it
    path = rel / t.file
    df = pd.read_parquet(path)
    df["estimate"] += 1.0
    df.to_parquet(path, index=False)
    with pytest.raises(dm.ReleaseError, match="modified"):
        read_saved_table(rel, ["age", "sex"])
    rows = df[df["marginal"] == "age,sex"] if "marginal" in df else df  # the dataset: that table's rows
    assert read_saved_table(rel, ["age", "sex"], verify=False).column("estimate")[0] == rows["estimate"].iloc[0]
    # without digests, the stated privacy is checked against the noise scales (the plan is built)
    m = json.loads((rel / "manifest.json").read_text())
    m["privacy"]["rho"] = 0.01
    (rel / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(dm.ReleaseError, match="manifest.json"):
        read_saved_table(rel, ["race"])
    with pytest.raises(dm.ReleaseError, match="states rho = 0.01"):
        read_saved_table(rel, ["race"], verify=False)


def test_every_public_name_resolves_lazily():
    """Every name of ``dpmatrix.__all__`` in a fresh process, in order and reversed, is the
    object its defining module holds; ``dm.measure`` stays the function."""
    code = (
        "import importlib, json, sys, types\n"
        "import dpmatrix as dm\n"
        "names = list(dm.__all__)\n"
        "order = names if sys.argv[1] == 'forward' else names[::-1]\n"
        "for n in order:\n"
        "    obj = getattr(dm, n)\n"
        "    assert not isinstance(obj, types.ModuleType), n\n"
        "    home = importlib.import_module(obj.__module__)\n"
        "    assert getattr(home, obj.__name__) is obj, n\n"
        "import dpmatrix._measure\n"
        "assert callable(dm.measure) and dm.measure is sys.modules['dpmatrix._measure.measure_plan'].measure\n"
        "assert set(dm.__all__) <= set(dir(dm))\n"
        "ns = {}\n"
        "exec('from dpmatrix import *', ns)\n"
        "assert all(ns[n] is getattr(dm, n) for n in names)\n"
        "try:\n"
        "    dm.no_such_name\n"
        "except AttributeError as exc:\n"
        "    assert 'no_such_name' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    for order in ("forward", "reversed"):
        _, mods = _modules_of(code, order)
        assert "dpmatrix.planners._dispatch" in mods  # the names were really imported
