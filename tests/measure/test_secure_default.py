"""Secure noise by default: which sampler every default path uses, that no
default path draws floating-point Gaussian noise, that the reported privacy is the lattice
mechanism's exact cost, and that a seeded release is marked as such.

Privacy expectations are computed here from explicit dense matrices (np.kron of the factors):
the largest diagonal of Rᵀ Σ⁻¹ R for the residual mechanism, the largest column norm and support
of the lattice query, exact rationals for ρ.
"""

import importlib
import json
import math

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._measure.secure import residual_lattice_form, resolve_noise
from dpmatrix.cli import main

secure = importlib.import_module("dpmatrix._measure.secure")  # dm.measure is the function


class _NoFloatGaussian(np.random.Generator):
    """A generator whose floating-point Gaussian draws fail the test."""

    def normal(self, *a, **k):
        raise AssertionError("floating-point Gaussian drawn on a default path")

    def standard_normal(self, *a, **k):
        raise AssertionError("floating-point Gaussian drawn on a default path")


@pytest.fixture
def no_float_gaussian(monkeypatch):
    """numpy's Generator.normal/standard_normal cannot be patched (immutable type): every way
    the library could obtain a Generator (default_rng, Generator(...)) and the legacy global
    functions are replaced by ones that raise on a Gaussian draw."""
    monkeypatch.setattr(np.random, "default_rng", lambda *a, **k: _NoFloatGaussian(np.random.PCG64()))
    monkeypatch.setattr(np.random, "Generator", _NoFloatGaussian)
    for name in ("normal", "standard_normal", "randn"):
        monkeypatch.setattr(np.random, name, lambda *a, n=name, **k: (_ for _ in ()).throw(AssertionError(n)))


DOM = dm.Domain({"a": 4, "b": 3, "c": 5})


def frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({k: rng.integers(0, s, n) for k, s in zip("abc", (4, 3, 5))})


def workloads():
    plain = dm.Workload(DOM, [("a", "b"), ("b", "c")])
    mixed = dm.Workload.marginals(DOM, 2, upto=True, query_types={"a": "prefix", "c": "range"})
    return plain, mixed


def test_resolve_noise():
    plain, mixed = workloads()
    p, q = dm.plan(plain, rho=1.0), dm.plan(mixed, rho=1.0)
    assert resolve_noise(p) == "discrete_gaussian" and resolve_noise(q) == "lattice_gaussian"
    assert resolve_noise(q, "auto", np.random.default_rng(0)) == "gaussian"  # a seed: reproducible float
    assert resolve_noise(p, "gaussian_float") == resolve_noise(p, "gaussian") == "gaussian"
    with pytest.raises(dm.DataError, match="noise must be one of"):
        resolve_noise(p, "laplace")


def test_default_measure_never_draws_float_gaussian(no_float_gaussian):
    df = frame()
    plain, mixed = workloads()
    m1 = dm.plan(plain, rho=1.0).measure(df)
    m2 = dm.plan(mixed, rho=1.0).measure(df)
    m3 = dm.plan_querysmasher(mixed, pcost=2.0).measure(df)
    m4 = dm.plan_querysmasher(mixed, pcost=2.0, solver="fourier").measure(df)
    assert (m1.noise, m2.noise, m3.noise, m4.noise) == ("discrete_gaussian",) + ("lattice_gaussian",) * 3
    assert {m.randomness for m in (m1, m2, m3, m4)} == {"os_csprng"}
    # and the float path really is what the patch catches
    with pytest.raises(AssertionError, match="floating-point Gaussian"):
        dm.plan(mixed, rho=1.0).measure(df, noise="gaussian_float")


def test_float_noise_only_on_request_and_seed_is_marked():
    df = frame()
    _, mixed = workloads()
    plan = dm.plan(mixed, rho=1.0)
    seeded = plan.measure(df, rng=np.random.default_rng(3))
    assert seeded.noise == "gaussian" and seeded.randomness == "seeded_insecure"
    again = plan.measure(df, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(seeded.estimate(("a", "b")), again.estimate(("a", "b")))
    osseeded = plan.measure(df, noise="gaussian_float")
    assert osseeded.noise == "gaussian" and osseeded.randomness == "numpy_generator"


def _dense(mats):
    out = np.ones((1, 1))
    for m in mats:
        out = np.kron(out, m)
    return out


def test_residual_lattice_form_is_the_residual_mechanism():
    """(⊗P) C = R_A and (⊗P)(⊗P)ᵀ·Π n² = Σ_A: the lattice form with i.i.d. noise of scale σΠn
    has the law of M_A; its sensitivity (Δ₂(C)/Π n)² is the largest diagonal of R_Aᵀ Σ_A⁻¹ R_A."""
    _, mixed = workloads()
    plan = dm.plan(mixed, rho=1.0)
    checked = 0
    for sub, on in zip(plan.closure.sets, plan.measured):
        if not on or not sub:
            continue
        mech = plan.mechanism(sub)
        q, post, scale = residual_lattice_form(mech.bases)
        C, P = _dense(q.factors), _dense(post)
        R = _dense([b.Sub for b in mech.bases])
        Sigma = _dense([b.Gamma @ b.Gamma.T for b in mech.bases])
        np.testing.assert_allclose(P @ C, R, atol=1e-10)
        np.testing.assert_allclose(P @ P.T * scale**2, Sigma, atol=1e-10)
        definition = np.max(np.diag(R.T @ np.linalg.solve(Sigma, R)))
        assert float(q.sensitivity_squared) / scale**2 == pytest.approx(definition, rel=1e-9)
        assert q.max_support == int(np.max(np.count_nonzero(C, axis=0)))
        checked += 1
    assert checked >= 5


def test_reported_rho_covers_the_lattice_mechanism(monkeypatch):
    """Σ over residuals of (Δ₂ + γ√m)²/(2σ̄²), recomputed from the dense query, the σ̄ and γ
    actually used, is at most the re-scored plan's ρ, which is at most the planned ρ."""
    from dpmatrix._measure import residual_records

    used = []
    real = residual_records.lattice_measure

    def spy(q, x, sigma_bar, rng=None, *, tol, sample=None):
        res = real(q, x, sigma_bar, rng, tol=tol, sample=sample)
        used.append((q, sigma_bar, res.f))
        return res

    monkeypatch.setattr(residual_records, "lattice_measure", spy)
    _, mixed = workloads()
    plan = dm.plan(mixed, rho=0.7)
    meas = plan.measure(frame())
    assert meas.noise == "lattice_gaussian" and len(used) == sum(plan.measured)
    total = 0.0
    for q, sb, f in used:
        C = _dense(q.factors)
        d2 = float(np.max(np.sum(C * C, axis=0)))
        m = int(np.max(np.count_nonzero(C, axis=0)))
        # an integer query on γ = 1 (the total, plain-marginal-only residuals) is not rounded
        rounding = 0.0 if (f == 0 and np.array_equal(C, np.round(C))) else 2.0**-f * math.sqrt(m)
        total += (math.sqrt(d2) + rounding) ** 2 / (2 * float(sb) ** 2)
    assert total <= meas.plan.rho * (1 + 1e-12)
    assert meas.plan.rho <= 0.7 * (1 + 1e-9)
    assert meas.plan.rho == pytest.approx(0.7, rel=3e-4)


def test_lattice_estimates_are_unbiased_at_the_reported_variance():
    """Mean over repetitions is the true marginal and the spread matches the reported variance."""
    df = frame(300, seed=2)
    _, mixed = workloads()
    plan = dm.plan(mixed, rho=2.0)
    true = df.groupby(["a", "b"]).size().reindex(pd.MultiIndex.from_product([range(4), range(3)])).fillna(0)
    reps = np.array([plan.measure(df).marginal(("a", "b"))["estimate"].to_numpy() for _ in range(150)])
    var = plan.measure(df).marginal(("a", "b"))["variance"].to_numpy()
    z = (reps.mean(0) - true.to_numpy()) / np.sqrt(var / len(reps))
    assert np.max(np.abs(z)) < 4.5
    ratio = reps.var(0, ddof=1) / var
    assert np.all((ratio > 0.6) & (ratio < 1.5))


def test_lattice_path_shows_progress_only_on_request(capsys):
    """``progress=True`` on the lattice path shows the same bar as the other measurement paths:
    one step per maximal measured marginal (the 3 pairs of the mixed workload), on stderr."""
    _, mixed = workloads()
    plan = dm.plan(mixed, rho=1.0)
    meas = plan.measure(frame(), progress=True)
    err = capsys.readouterr().err
    assert meas.noise == "lattice_gaussian"
    assert "measuring" in err and "3/3" in err
    plan.measure(frame())
    assert capsys.readouterr().err == ""


# -- the command line -------------------------------------------------------------------------------
@pytest.fixture
def files(tmp_path):
    df = frame(300, seed=4)
    df.to_csv(tmp_path / "d.csv", index=False)
    dom = {"a": 4, "b": 3, "c": 5}
    (tmp_path / "dom.json").write_text(json.dumps(dom))
    return tmp_path


def _release(files, out, *extra):
    return ["release", str(files / "d.csv"), "--domain", str(files / "dom.json"), "--workload",
            "all:<=2;c=prefix", "--rho", "0.5", "--out", str(files / out), "--no-ledger", "--no-report", *extra]


def test_cli_release_default_is_secure(files, no_float_gaussian, capsys):
    assert main(_release(files, "rel")) == 0
    man = json.loads((files / "rel" / "manifest.json").read_text())
    # prefix queries on c: a real-valued strategy -> the lattice sampler
    assert man["mechanism"]["noise"] == "lattice_gaussian"
    assert man["mechanism"]["randomness"] == "os_csprng"
    assert man["privacy"]["reproducible"] is False and man["privacy"]["mu"] is None
    assert man["privacy"]["rho"] <= 0.5


def test_cli_seeded_release_is_marked(files, capsys):
    assert main(_release(files, "seeded", "--seed", "5")) == 0
    man = json.loads((files / "seeded" / "manifest.json").read_text())
    assert man["privacy"]["reproducible"] is True
    assert man["mechanism"]["randomness"] == "seeded_insecure"
    out = capsys.readouterr()
    assert "REPRODUCIBLE, NOT PRIVATE" in out.out + out.err
