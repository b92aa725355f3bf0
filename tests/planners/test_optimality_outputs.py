"""The distance to the lower bound where users see it: ``dpmatrix plan`` (text and JSON)
and the release manifest's ``lower_bound`` entry. Expected values: for plain marginals under
sum_var the singular value bound equals the plan's total (ResidualPlanner is optimal, ratio 1);
the dense bound is recomputed with numpy's SVD on the explicit workload."""

import json

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix.cli import main
from oracle import marginal_query


def dense_bound(sizes, sets, pcost):
    W = np.vstack([marginal_query(sizes, s) for s in sets])
    s = np.linalg.svd(W, compute_uv=False).sum()
    return s * s / (W.shape[1] * pcost)


def test_cli_plan_prints_and_writes_the_ratio(tmp_path, capsys):
    (tmp_path / "d.json").write_text(json.dumps({"a": 4, "b": 3, "c": 5}))
    base = ["plan", "--domain", str(tmp_path / "d.json"), "--workload", "all:2", "--rho", "0.5"]
    assert main(base + ["--objective", "sum_var"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("optimality:"))
    ref = dense_bound((4, 3, 5), [(0, 1), (0, 2), (1, 2)], 1.0)
    assert f"singular value bound {ref:.6g}" in line and line.endswith("ratio 1")
    assert main(base + ["--format", "json"]) == 0  # max_var (the CLI's default objective)
    lb = json.loads(capsys.readouterr().out)["lower_bound"]
    assert lb["total"] == pytest.approx(ref, rel=1e-10) and lb["exact"] is True
    assert lb["objective"] == "max_var" and lb["value"] == pytest.approx(ref / 47, rel=1e-10)
    assert lb["ratio"] == pytest.approx(lb["plan_value"] / lb["value"], rel=1e-12) and lb["ratio"] >= 1


def test_release_manifest_has_lower_bound(tmp_path):
    dom = dm.Domain({"a": 4, "b": 3})
    wk = dm.Workload(dom, [("a", "b"), ("a",)])
    plan = dm.plan(wk, rho=0.5, objective="sum_var")
    gen = np.random.default_rng(3)
    df = pd.DataFrame({"a": gen.integers(0, 4, 200), "b": gen.integers(0, 3, 200)})
    dm.write_release(plan.measure(df, rng=gen), tmp_path / "rel")
    entry = json.loads((tmp_path / "rel" / "manifest.json").read_text())["lower_bound"]
    ref = dense_bound((4, 3), [(0, 1), (0,)], 1.0)
    assert entry["total"] == pytest.approx(ref, rel=1e-10)
    assert entry["rmse"] == pytest.approx(np.sqrt(ref / 16), rel=1e-10)
    assert entry["exact"] is True and entry["ratio"] == pytest.approx(1.0, abs=1e-9)


def test_cli_compare(tmp_path, capsys):
    (tmp_path / "d.json").write_text(json.dumps({"a": 4, "b": 3, "c": 5}))
    assert main(["compare", "--domain", str(tmp_path / "d.json"), "--workload", "all:2", "--rho", "0.5",
                 "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    got = {r["strategy"]: r for r in rows if r["planner"] == "explicit"}
    ref = dense_bound((4, 3, 5), [(0, 1), (0, 2), (1, 2)], 1.0)
    # identity strategy: σ² = 1 per cell of the 60-cell table, each 2-way cell sums 5, 3 or 4 cells
    assert got["identity"]["total_variance"] == pytest.approx(12 * 5 + 20 * 3 + 15 * 4)
    assert got["identity"]["ratio"] == pytest.approx(180 / ref)
    rp = next(r for r in rows if r["planner"] == "ResidualPlanner")
    assert rp["ratio"] == pytest.approx(1.0, abs=1e-9) and rows[0]["ratio"] == pytest.approx(1.0, abs=1e-9)
