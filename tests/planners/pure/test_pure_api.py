"""Pure ε-DP end to end through the public API and the CLI:
``dm.plan(..., epsilon=, delta=0)`` / ``Budget.pure``, the one measurement path, releases,
the ledger, and typed errors for Gaussian-only options."""

from __future__ import annotations

import io
import itertools
import json
import math
from contextlib import redirect_stdout

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix.cli import main
from dpmatrix.planners._pure import PurePlan
from dpmatrix.planners._residual.plan import plan_residual

DOM = dm.Domain({"A": 2, "B": 3, "C": 2})
SETS = [("A", "B"), ("B", "C"), ("C",)]


def _wk():
    return dm.Workload(DOM, SETS)


def _data(n=120, seed=0):
    g = np.random.default_rng(seed)
    return pd.DataFrame({a: g.integers(0, s, n) for a, s in zip(DOM.names, DOM.sizes)})


def _cli(*argv) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(list(argv)) == 0
    return buf.getvalue()


def test_entry_points_and_budget():
    p = dm.plan(_wk(), epsilon=1, delta=0)
    q = dm.plan(_wk(), budget=dm.Budget.pure(1))
    assert isinstance(p, PurePlan) and isinstance(q, dm.PlanBase)
    assert p.strategy == q.strategy and p.budgets == q.budgets  # "auto" by default
    assert {r["strategy"] for r in p.comparison} >= {"identity", "marginals", "fourier"}
    f = dm.plan(_wk(), epsilon=0.5, delta=0, strategy="fourier")
    assert f.strategy == "fourier"
    # the privacy units: ε spent (≤ ε asked, rounding loses < 2^-20), δ = 0, ρ = ε²/2, no μ
    assert 1 - 2**-19 <= p.pure_epsilon <= 1
    assert p.budget.epsilon(1e-9) == p.pure_epsilon and p.rho == pytest.approx(p.pure_epsilon**2 / 2)
    assert p.budget.delta(p.pure_epsilon) == 0.0
    with pytest.raises(dm.BudgetError, match="mu"):
        p.budget.mu  # noqa: B018
    # the PlanBase protocol: variances shaped like the table, table of groups with ε shares
    assert p.variance(("A", "B")).shape == (2, 3)
    assert p.query_variance("C").shape == (2,)
    t = f.table()
    assert t["share"].sum() == pytest.approx(1.0, abs=1e-5)
    assert {"epsilon", "noise_variance", "cell_variance"} <= set(t.columns)
    assert p.total_variance() > 0 and p.rmse() > 0 and p.max_variance() > 0
    r = PurePlan.from_dict(p.to_dict())
    assert r.budgets == p.budgets and r.total_variance() == pytest.approx(p.total_variance())


@pytest.mark.parametrize("strategy", ["identity", "marginals", "fourier", "optimized"])
def test_privacy_against_the_explicit_definition(strategy):
    """ε-DP of the released mechanisms: neighbours differ by one record in some cell c; the
    integer outputs of mechanism j move by L_j(e_c) and its discrete Laplace noise has parameter
    ε_j, so the privacy loss is max_c Σ_j ε_j ‖L_j(e_c)‖₁ (max column L1 norm of the
    ε-scaled strategy). Computed here by running every mechanism's map on a one-record table."""
    p = dm.plan(_wk(), epsilon=0.7, delta=0, strategy=strategy)
    _, mechs = p.mechanisms()
    worst = 0.0
    for cell in itertools.product(*(range(n) for n in DOM.sizes)):
        loss = 0.0
        for m in mechs:
            assert m.family == "discrete_laplace"
            table = np.zeros(tuple(DOM.sizes[a] for a in m.attrs), dtype=np.int64)
            table[tuple(cell[a] for a in m.attrs)] = 1
            out = m.signal(table)
            assert out.dtype.kind == "i"  # integer rows: exact noise, no floating-point Laplace
            loss += float(m.scale) * float(np.abs(out).sum())
        worst = max(worst, loss)
    assert worst <= 0.7
    assert worst == pytest.approx(p.pure_epsilon, rel=1e-12)
    with pytest.raises(dm.PlanError, match="discrete Laplace"):
        p.mechanisms(noise="gaussian")


def test_measured_variances_by_simulation():
    """Unbiased answers with the plan's variances, by simulation through plan.measure (real
    discrete Laplace draws from a seeded generator); truth counted by pandas."""
    p = dm.plan(_wk(), epsilon=1.0, delta=0, strategy="marginals")
    df = _data()
    truth = {s: df.groupby(list(s)).size().reindex(
        pd.MultiIndex.from_product([range(DOM.sizes[DOM.index(a)]) for a in s]) if len(s) > 1
        else range(DOM.sizes[DOM.index(s[0])]), fill_value=0).to_numpy(dtype=float) for s in SETS}
    reps = 600
    gen = np.random.default_rng(11)
    errs = {s: [] for s in SETS}
    with pytest.warns(InsecureRandomnessWarning):
        for _ in range(reps):
            meas = p.measure(df, rng=gen)
            for s in SETS:
                errs[s].append(meas.estimate(s).reshape(-1) - truth[s])
    assert meas.randomness == "seeded_insecure" and meas.noise == "discrete_laplace"
    for s in SETS:
        e = np.array(errs[s])
        v = p.variance(s).reshape(-1)
        assert np.all(np.abs(e.mean(axis=0)) < 5 * np.sqrt(v / reps))
        s2 = e.var(axis=0)
        m4 = ((e - e.mean(axis=0)) ** 4).mean(axis=0)
        assert np.all(np.abs(s2 - v) < 5 * np.sqrt((m4 - s2**2) / reps))


def test_release_round_trip(tmp_path):
    p = dm.plan(_wk(), epsilon=1.0, delta=0, strategy="fourier")
    meas = p.measure(_data())  # OS CSPRNG by default
    assert meas.randomness == "os_csprng"
    assert all(np.asarray(v).dtype.kind == "i" for v in meas.noisy.values())
    out = dm.write_release(meas, tmp_path / "rel")
    rel = dm.load_release(out)
    priv = rel.privacy
    assert priv["pure_epsilon"] == pytest.approx(p.pure_epsilon) and priv["delta"] == 0.0
    assert priv["rho"] == pytest.approx(p.pure_epsilon**2 / 2) and priv["mu"] is None
    assert isinstance(rel.plan, PurePlan) and rel.plan.budgets == p.budgets
    for s in SETS:
        np.testing.assert_allclose(rel.marginal(s)["estimate"], meas.marginal(s)["estimate"], atol=1e-9)
        np.testing.assert_allclose(rel.table(s)["estimate"], meas.marginal(s)["estimate"], atol=1e-9)
    text = _cli("query", str(out), "--marginal", "A,B")
    assert "pure DP, delta = 0" in text
    html = rel.report(tmp_path / "r.html").read_text()
    assert "pure ε-DP" in html


def test_cli_plan_and_release_with_ledger(tmp_path):
    dom = tmp_path / "d.json"
    dom.write_text('{"A": 2, "B": 3, "C": 2}')
    data = tmp_path / "data.csv"
    _data().to_csv(data, index=False)
    saved = tmp_path / "plan.json"
    text = _cli("plan", "--domain", str(dom), "--workload", "A,B;B,C;C", "--epsilon", "1", "--delta", "0",
                "--save", str(saved))
    assert "pure DP" in text and "strategies compared" in text
    _cli("release", str(data), "--domain", str(dom), "--plan", str(saved), "--out", str(tmp_path / "saved"),
         "--no-ledger", "--quiet", "--no-report")
    assert dm.load_release(tmp_path / "saved").plan.budgets == PurePlan.from_dict(
        json.loads(saved.read_text())).budgets
    ledger = tmp_path / "led.sqlite"
    _cli("release", str(data), "--domain", str(dom), "--workload", "A,B;B,C;C", "--epsilon", "1",
         "--delta", "0", "--strategy", "marginals", "--out", str(tmp_path / "rel"), "--ledger", str(ledger),
         "--quiet", "--no-report")
    rel = dm.load_release(tmp_path / "rel")
    assert rel.plan.strategy == "marginals" and rel.privacy["delta"] == 0.0
    shown = _cli("ledger", "show", "--ledger", str(ledger))
    assert "pure epsilon = 1 (sum)" in shown


def test_bad_input_typed_errors():
    for eps in (0, -1, math.nan, math.inf):
        with pytest.raises(dm.BudgetError):
            dm.plan(_wk(), epsilon=eps, delta=0)
        with pytest.raises(dm.BudgetError):
            dm.Budget.pure(eps)
    with pytest.raises(dm.BudgetError, match="pure"):  # a Gaussian planner never takes a pure budget
        plan_residual(_wk(), budget=dm.Budget.pure(1))
    with pytest.raises(dm.PlanError, match="discrete_gaussian"):
        dm.plan(_wk(), epsilon=1, delta=0, noise="discrete_gaussian")
    p = dm.plan(_wk(), epsilon=1, delta=0)
    with pytest.raises(dm.PlanError, match="discrete Laplace"):
        p.measure(_data(), noise="discrete_gaussian")
    prefix = dm.Workload(DOM, [{"attributes": ("B",), "query_types": {"B": "prefix"}}])
    # prefix/range workloads are planned (and measured) with cell or level strategies;
    # Gaussian-only options are refused by name
    assert type(dm.plan(prefix, epsilon=1, delta=0, strategy="haar")).__name__ == "HierarchicalPlan"
    assert dm.plan(prefix, epsilon=1, delta=0).measure(_data()).answer("B").shape[0] == 3
    with pytest.raises(dm.PlanError, match="unknown strategy"):
        dm.plan(prefix, epsilon=1, delta=0, strategy="wavelet")
    with pytest.raises(dm.PlanError, match="strategies"):
        dm.plan(prefix, epsilon=1, delta=0, strategies={"B": "identity"})
    with pytest.raises(dm.PlanError, match="strategies"):
        dm.plan(_wk(), epsilon=1, delta=0, strategies={"B": "identity"})
    with pytest.raises(dm.PlanError, match="Gaussian only"):
        dm.plan(_wk(), epsilon=1, delta=0, planner="querysmasher")
    with pytest.raises(dm.BudgetError, match="exactly one"):
        dm.plan(_wk(), rho=1, delta=0)
