"""The cell strategies (identity, marginals, fourier, clustering, optimized) on prefix / range
workloads under pure ε-DP: queries answered from the consistent GLS cells. Checked against
explicit full-domain matrices built here: privacy, query variances (Q (SᵀΣ⁻¹S)⁺ Qᵀ), the budgets'
objective (the query-weighted direct recovery, by finite perturbations), consistency across
marginals, a simulation with the real sampler, and a release round trip."""

import numpy as np
import pandas as pd
import pure_oracle as po
import pytest

import dpmatrix as dm
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._workload import Workload
from dpmatrix.planners._pure import PurePlan, plan_pure

SIZES = (4, 3, 5)
DOM = dm.Domain.from_sizes(SIZES)
SETS = [(0, 1), (1, 2), (0,)]
W = [1.0, 2.0, 0.5]


def _prefix(n):
    return np.tril(np.ones((n, n)))


def _ranges(n):  # by length, then start: the order of the "range" query type
    return np.array([[1.0 if a <= c <= a + L - 1 else 0.0 for c in range(n)]
                     for L in range(1, n + 1) for a in range(n - L + 1)])


QMATS = {0: _prefix(4), 2: _ranges(5)}


def _wl():
    return Workload(DOM, [("a0", "a1"), ("a1", "a2"), ("a0",)], weights=W,
                    query_types={"a0": "prefix", "a2": "range"})


def _q(s):
    """The workload's queries of marginal s on the full domain (C order), by hand."""
    return po.kron_all([(QMATS.get(i, np.eye(n)) if i in s else np.ones((1, n))) for i, n in enumerate(SIZES)])


def _blocks(p):
    return [po.marginal_matrix(SIZES, g.attrs) if g.kind == "marginal" else po.residual_matrix(SIZES, g.attrs)
            for g in p.groups]


def _explicit_total(blocks, variances):
    return sum(w * np.trace(po.gls_cov(blocks, variances, _q(s))) for s, w in zip(SETS, W))


NAMES = ["identity", "marginals", "fourier", "clustering", "optimized"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("objective", ["sum", "max"])
def test_privacy_and_variances_explicit(name, objective):
    p = plan_pure(_wl(), 0.9, strategy=name, objective=objective)
    assert isinstance(p, PurePlan)
    blocks, e = _blocks(p), [float(b) for b in p.budgets]
    assert po.privacy(blocks, e) <= 0.9 + 1e-12
    assert po.privacy(blocks, e) == pytest.approx(float(p.privacy_epsilon()), rel=1e-12)
    v = [po.dlap_var(x) for x in e]
    ev = []
    for j, s in enumerate(SETS):
        want = np.diag(po.gls_cov(blocks, v, _q(s)))
        got = p.entry_variance(j).reshape(-1)
        np.testing.assert_allclose(got, want, rtol=1e-7)
        ev.append(got)
    assert p.total_variance() == pytest.approx(sum(w * x.sum() for w, x in zip(W, ev)), rel=1e-9)
    assert p.max_variance() == pytest.approx(max(x.max() for x in ev), rel=1e-9)
    assert p.query_variance(("a1", "a2")).shape == (3, 15)


def _direct_marginals(e):
    """S = Q answered directly: each query sums noisy cells of its own marginal, so the total is
    Σ_W w_W ‖Q_W‖²_F · 2/ε_W² (Q_W on the marginal's own cells, by hand)."""
    out = 0.0
    for (s, w), x in zip(zip(SETS, W), e):
        qw = po.kron_all([QMATS.get(i, np.eye(SIZES[i])) for i in s])
        out += w * float((qw**2).sum()) * 2 / x**2
    return out


@pytest.mark.parametrize("name", ["marginals", "fourier", "clustering", "identity"])
def test_budgets_minimize_the_query_weighted_objective(name):
    """Continuous model, objective sum. Fourier blocks are each alone in their subspace, so GLS is
    the direct recovery and the plan's budgets must minimize the explicit total query variance
    over budgets with Σ C_g ε_g = ε; for S = Q they minimize the direct-recovery objective
    (queries weighted by ‖q‖²), which the GLS total never exceeds."""
    p = plan_pure(_wl(), 1.0, strategy=name, objective="sum", variance_model="continuous")
    blocks = _blocks(p)
    e = np.array([float(b) for b in p.budgets])
    c = np.array([g.sensitivity for g in p.groups], dtype=float)
    base = _explicit_total(blocks, list(2 / e**2))
    assert p.total_variance() == pytest.approx(base, rel=1e-6)
    objective = {"fourier": lambda f: _explicit_total(blocks, list(2 / f**2)), "marginals": _direct_marginals}.get(name)
    if objective is None:
        return
    if name == "marginals":
        assert base <= objective(e) * (1 + 1e-9)
    gen = np.random.default_rng(0)
    for _ in range(20):
        d = gen.normal(size=e.size)
        ce = c * e
        d -= ce * (ce @ d) / (ce @ ce)  # stay on Σ C_g ε_g = ε
        f = e * (1 + 1e-2 * d / np.abs(d).max())
        assert objective(f) >= objective(e) * (1 - 1e-9)


def test_consistency_simulation_and_release(tmp_path):
    """One GLS estimate answers everything: the prefixes of a0 are the (a0, a1) prefixes summed
    over a1; unbiased answers with the stated variances (real sampler, seeded); a release reads
    back the same numbers."""
    p = plan_pure(_wl(), 1.0, strategy="clustering")
    gen = np.random.default_rng(5)
    df = pd.DataFrame({f"a{i}": gen.integers(0, n, 150) for i, n in enumerate(SIZES)})
    x = np.zeros(SIZES)
    np.add.at(x, tuple(df.to_numpy().T), 1)
    truth = {j: _q(s) @ x.reshape(-1) for j, s in enumerate(SETS)}
    reps = 400
    errs = {j: [] for j in range(3)}
    with pytest.warns(InsecureRandomnessWarning):
        for _ in range(reps):
            meas = p.measure(df, rng=gen)
            a01 = meas.answer(("a0", "a1"))["estimate"].to_numpy().reshape(4, 3)
            np.testing.assert_allclose(meas.answer("a0")["estimate"].to_numpy(), a01.sum(axis=1), atol=1e-8)
            for j, names in enumerate([("a0", "a1"), ("a1", "a2"), ("a0",)]):
                errs[j].append(meas.answer(names)["estimate"].to_numpy() - truth[j])
    for j in range(3):
        e = np.array(errs[j])
        v = p.entry_variance(j).reshape(-1)
        assert np.all(np.abs(e.mean(axis=0)) < 5 * np.sqrt(v / reps))
        s2 = e.var(axis=0)
        m4 = ((e - e.mean(axis=0)) ** 4).mean(axis=0)
        assert np.all(np.abs(s2 - v) < 5 * np.sqrt((m4 - s2**2) / reps))
    meas = p.measure(df)
    rel = dm.load_release(dm.write_release(meas, tmp_path / "rel"))
    assert isinstance(rel.plan, PurePlan) and rel.plan.budgets == p.budgets
    np.testing.assert_allclose(rel.table(("a1", "a2"))["estimate"], meas.answer(("a1", "a2"))["estimate"], atol=1e-9)
    assert list(rel.table("a0")["a0"]) == ["<= 0", "<= 1", "<= 2", "<= 3"]


def test_auto_compares_cell_and_level_strategies():
    for objective, key in (("sum", "total_variance"), ("max", "max_variance")):
        p = plan_pure(_wl(), 1.0, objective=objective)
        values = [r[key] for r in p.comparison if key in r]
        assert getattr(p, key)() == pytest.approx(min(values), rel=1e-12)
        for name in NAMES + ["hierarchical", "haar"]:
            assert getattr(p, key)() <= getattr(plan_pure(_wl(), 1.0, strategy=name, objective=objective), key)() \
                * (1 + 1e-9)
