"""QuerySmasher / WFF plans through the lattice sampler on the one measurement path:
the lattice mechanisms a plan lists are its sub-mechanisms (same signal, same sensitivity), the
reported ρ covers the exact cost recomputed here from the dense query with the σ̄ and γ actually
used and is at most the planned ρ, the estimates are unbiased at the reported variance, and
oversized Fourier spaces are refused by name.

Expected values come from explicit dense matrices built here (np.kron of the factors, the DFT
matrix written out as exp(-2πi jk/n)/√n), never from the code under test.
"""

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._mechanisms import noise_families
from dpmatrix.planners._querysmasher.plan import QuerySmasherPlan

DOM = dm.Domain({"a": 4, "b": 3, "c": 5})


def frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({k: rng.integers(0, s, n) for k, s in zip("abc", (4, 3, 5))})


def mixed():
    return dm.Workload.marginals(DOM, 2, upto=True, query_types={"a": "prefix", "c": "range"})


def _dense(mats):
    out = np.ones((1, 1))
    for m in mats:
        out = np.kron(out, m)
    return out


def _dft(sizes):
    """The unitary DFT of a C-ordered table, written out."""
    out = np.ones((1, 1), dtype=complex)
    for n in sizes:
        j = np.arange(n)
        out = np.kron(out, np.exp(-2j * np.pi * np.outer(j, j) / n) / math.sqrt(n))
    return out


@pytest.fixture
def spied(monkeypatch):
    """Records the mechanisms the one path runs and every discrete Gaussian τ² it draws with."""
    seen = {"mechs": [], "tau2": []}
    real_mechs = QuerySmasherPlan.mechanisms
    real_draw = noise_families.sample_discrete_gaussian

    def mechs(self, **kw):
        plan, ms = real_mechs(self, **kw)
        seen["mechs"].extend(ms)
        return plan, ms

    def draw(tau2, n, rng=None):
        seen["tau2"].append(tau2)
        return real_draw(tau2, n, rng)

    monkeypatch.setattr(QuerySmasherPlan, "mechanisms", mechs)
    monkeypatch.setattr(noise_families, "sample_discrete_gaussian", draw)
    return seen


@pytest.mark.parametrize("solver", ["auto", "fourier"])
def test_reported_rho_covers_the_lattice_mechanisms(spied, solver):
    """Σ (Δ₂ + γ√m)²/(2σ̄²) over the spaces, from the dense query and the σ̄, γ the draws used,
    is at most the re-scored plan's ρ, which is at most (and within 3e-4 of) the planned ρ."""
    plan = dm.plan_querysmasher(mixed(), pcost=1.4, solver=solver)
    meas = plan.measure(frame())
    assert (meas.noise, meas.randomness) == ("lattice_gaussian", "os_csprng")
    mechs = spied["mechs"]
    assert len(mechs) == sum(math.isfinite(r.sigma2) for r in plan.residuals.values())
    assert spied["tau2"] == [m.scale for m in mechs]  # each drawn with its own σ̄²/γ²
    total = 0.0
    for m in mechs:
        s = m.lattice
        assert m.family == "lattice_gaussian"
        assert s.tau2 == s.sigma_bar**2 * Fraction(4) ** s.f
        C = _dense(s.query.factors)
        d2 = float(np.max(np.sum(C * C, axis=0)))
        support = int(np.max(np.count_nonzero(C, axis=0)))
        integer = s.f == 0 and np.array_equal(C, np.round(C))  # the total count: never rounded
        rounding = 0.0 if integer else 2.0**-s.f * math.sqrt(support)
        total += (math.sqrt(d2) + rounding) ** 2 / (2 * float(s.sigma_bar) ** 2)
    assert total <= meas.plan.rho * (1 + 1e-12)
    assert meas.plan.rho <= plan.rho * (1 + 1e-9)
    assert meas.plan.rho == pytest.approx(plan.rho, rel=3e-4)


@pytest.mark.parametrize("solver", ["auto", "fourier"])
def test_lattice_mechanism_is_the_sub_mechanism(spied, solver):
    """Noiseless, each lattice mechanism returns the sub-mechanism's own ω = B x (Kronecker and
    dense) or F x on the measured frequencies (WFF), up to the lattice's rounding; its
    sensitivity Δ₂² (max column norm² of the dense C) is the space's planned privacy cost, and
    a WFF query is the real circulant F* diag(h^-½) F (explicit DFT matrix)."""
    plan = dm.plan_querysmasher(mixed(), pcost=1.0, solver=solver)
    plan.mechanisms(noise="lattice_gaussian")
    tables = {}
    df = frame(200, seed=3)
    kinds = set()
    for m in spied["mechs"]:
        res = plan.residuals[m.key]
        sub = plan.solutions[res.structure]
        names = [DOM.names[a] for a in m.attrs]
        t = df.groupby(names).size().reindex(pd.MultiIndex.from_product([range(n) for n in res.sizes]),
                                             fill_value=0).to_numpy().reshape(res.sizes) if names \
            else np.array(len(df))
        tables[m.key] = t
        got = m.post(m.signal(t))
        x = t.astype(float).reshape(-1)
        C = _dense(m.lattice.query.factors)
        assert float(np.max(np.sum(C * C, axis=0))) == pytest.approx(sub.pcost, rel=1e-9)
        if hasattr(sub, "h") and res.sizes:
            kinds.add("fourier")
            F = _dft(res.sizes)
            h = np.asarray(sub.h, dtype=float).reshape(-1)
            fin = np.isfinite(h)
            K = (F.conj().T @ np.diag(np.where(fin, 1 / np.sqrt(np.where(fin, h, 1.0)), 0.0)) @ F).real
            np.testing.assert_allclose(C, K, atol=1e-12)
            want = np.where(fin, F @ x, 0.0)
            np.testing.assert_allclose(np.asarray(got).reshape(-1), want, atol=1e-4 * max(1.0, np.abs(want).max()))
        elif hasattr(sub, "mech"):
            kinds.add("dense")
            np.testing.assert_allclose(np.asarray(got).reshape(-1), sub.mech.B @ x, atol=1e-4)
        else:
            kinds.add("kron")
            np.testing.assert_allclose(np.asarray(got).reshape(-1), _dense(sub.B) @ x, atol=1e-4)
    assert ("fourier" in kinds) == (solver == "fourier")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_qs_lattice_estimates_are_unbiased_at_the_reported_variance():
    """Seeded byte source (reproducible, so the statistical check is deterministic): the mean of
    200 releases is the true answer and the spread the reported variance (60 prefix × range
    queries)."""
    df = frame(250, seed=2)
    rng = np.random.default_rng(11)
    plan = dm.plan_querysmasher(mixed(), pcost=4.0)
    i = next(k for k, g in enumerate(plan.workload.groups) if tuple(g.attrs) == (0, 2))  # prefix x range
    g = plan.workload.groups[i]
    t = df.groupby(["a", "c"]).size().reindex(pd.MultiIndex.from_product([range(4), range(5)]),
                                              fill_value=0).to_numpy().reshape(4, 5)
    truth = np.ravel(g.answer(t))
    meas = [plan.measure(df, noise="lattice_gaussian", rng=rng) for _ in range(200)]
    assert {m.noise for m in meas} == {"lattice_gaussian"}
    reps = np.array([m.workload_answer(i)["estimate"].to_numpy() for m in meas])
    var = meas[0].workload_answer(i)["variance"].to_numpy()
    z = (reps.mean(0) - truth) / np.sqrt(var / len(reps))
    assert np.max(np.abs(z)) < 4.5
    ratio = reps.var(0, ddof=1) / var
    assert np.all((ratio > 0.6) & (ratio < 1.5))


def test_large_fourier_space_is_refused_by_name():
    dom = dm.Domain({"x": 64, "y": 40})  # one residual space of 2560 > 2048 cells
    plan = dm.plan_querysmasher(dm.Workload(dom, [("x", "y")]), pcost=1.0, solver="fourier")
    df = pd.DataFrame({"x": [0, 5, 63], "y": [1, 39, 2]})
    with pytest.raises(dm.PlanError, match="densifies WFF"):
        plan.measure(df)
    assert plan.measure(df, noise="gaussian_float").noise == "gaussian"


def test_seeded_lattice_is_reproducible_and_marked():
    df = frame(100, seed=5)
    plan = dm.plan_querysmasher(mixed(), pcost=1.0)
    with pytest.warns(UserWarning):
        a = plan.measure(df, noise="lattice_gaussian", rng=np.random.default_rng(4))
    with pytest.warns(UserWarning):
        b = plan.measure(df, noise="lattice_gaussian", rng=np.random.default_rng(4))
    assert (a.noise, a.randomness) == ("lattice_gaussian", "seeded_insecure")
    np.testing.assert_array_equal(a.workload_answer(0)["estimate"], b.workload_answer(0)["estimate"])
