"""The command line states at most what was asked, and states one number everywhere: the
ε-above-10 warning, `dpmatrix plan`, the ledger note, `ledger show` and the manifest use the same
accounting (of the noise the release draws). Real data: the shipped UCI Adult file.

Independent references: the zCDP conversion of Canonne-Kamath-Steinke (Corollary 13) minimised
on a grid of α, and the analytic Gaussian curve from scipy's normal cdf (Balle & Wang 2018).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

import dpmatrix as dm
from cli_run import run

DATA = Path(dm.__file__).parent / "data"
ADULT, DOMAIN = DATA / "adult.csv", DATA / "adult-domain.json"
MARGINALS = "sex,race;education-num"


def cks_epsilon(rho: float, delta: float) -> float:
    a = 1 + np.logspace(-4, 6, 1_000_000)
    return float((a * rho + (a * np.log1p(-1 / a) - np.log(a - 1) - math.log(delta)) / (a - 1)).min())


def analytic_epsilon(pcost: float, delta: float) -> float:
    mu, lo, hi = math.sqrt(pcost), 0.0, 500.0
    for _ in range(200):
        eps = (lo + hi) / 2
        d = norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)
        lo, hi = (eps, hi) if d > delta else (lo, eps)
    return hi


def release(capsys, tmp_path, name, *budget):
    out = tmp_path / name
    rc, stdout, err = run(capsys, "release", ADULT, "--domain", DOMAIN, "--marginals", MARGINALS, *budget,
                          "--out", out, "--ledger", tmp_path / "ledger.sqlite3", "--dataset", name, "--no-report")
    assert rc == 0, err
    return json.loads((out / "manifest.json").read_text())["privacy"], stdout, err


def test_release_epsilon_one_states_at_most_one(capsys, tmp_path):
    """The issue's probe: `release --epsilon 1 --delta 1e-9` stated ε = 1.054 with discrete noise."""
    p, stdout, _ = release(capsys, tmp_path, "adult_eps", "--epsilon", 1, "--delta", 1e-9)
    assert p["delta"] == 1e-9 and p["epsilon"] <= 1.0
    assert p["epsilon"] >= 1.0 - 1e-3  # the ask is used, not wasted
    assert p["epsilon"] == pytest.approx(cks_epsilon(p["rho"], 1e-9), rel=1e-6)
    assert p["mu"] is None  # discrete noise: no μ-GDP claimed
    line = next(ln for ln in stdout.splitlines() if ln.startswith("privacy:"))
    assert f"epsilon = {p['epsilon']:.6g} at delta = 1e-09" in line


@pytest.mark.parametrize("how", [("--noise", "gaussian_float"), ("--seed", "3")])
def test_continuous_noise_uses_its_own_curve(capsys, tmp_path, how):
    p, _, _ = release(capsys, tmp_path, "adult_" + how[0].strip("-"), "--epsilon", 1, "--delta", 1e-9, *how)
    assert 1.0 - 1e-6 <= p["epsilon"] <= 1.0
    assert p["epsilon"] == pytest.approx(analytic_epsilon(p["pcost"], 1e-9), rel=1e-7)
    assert p["mu"] == pytest.approx(math.sqrt(p["pcost"]), rel=1e-12)


def test_plan_states_what_the_default_release_states(capsys, tmp_path):
    rc, out, err = run(capsys, "plan", "--domain", DOMAIN, "--marginals", MARGINALS, "--epsilon", 1,
                       "--delta", 1e-9, "--format", "json")
    assert rc == 0, err
    planned = json.loads(out)["privacy"]
    assert planned["mu"] is None and planned["epsilon"] <= 1.0
    assert planned["epsilon"] == pytest.approx(cks_epsilon(planned["rho"], 1e-9), rel=1e-6)
    p, _, _ = release(capsys, tmp_path, "adult_plan", "--epsilon", 1, "--delta", 1e-9)
    assert p["epsilon"] <= planned["epsilon"] and p["epsilon"] == pytest.approx(planned["epsilon"], rel=1e-3)
    # the text form prints the same line
    rc, text, _ = run(capsys, "plan", "--domain", DOMAIN, "--marginals", MARGINALS, "--epsilon", 1, "--delta", 1e-9)
    assert f"epsilon = {planned['epsilon']:.6g} at delta = 1e-09" in text and "no mu claimed" in text


def _numbers(pattern: str, text: str) -> list[float]:
    return [float(x) for x in re.findall(pattern, text)]


def test_warning_plan_ledger_and_manifest_agree(capsys, tmp_path):
    """rho = 20: ε far above 10. The warning, the ledger note, `ledger show` and `plan` print one
    number (the discrete noise's zCDP conversion); the manifest states the same function of the
    σ actually drawn (rounded up, so at most that)."""
    want = cks_epsilon(20.0, 1e-9)
    rc, text, err = run(capsys, "plan", "--domain", DOMAIN, "--marginals", MARGINALS, "--rho", 20)
    assert rc == 0
    (warned,) = _numbers(r"warning: epsilon = ([\d.]+) at delta", err)
    (planned,) = _numbers(r"privacy: rho = 20 \(zCDP\), epsilon = ([\d.]+) at delta = 1e-09", text)
    p, stdout, err = release(capsys, tmp_path, "adult_rho", "--rho", 20)
    (warned_rel,) = _numbers(r"warning: epsilon = ([\d.]+) at delta", err)
    (noted,) = _numbers(r"before this release of rho = 20 \(epsilon = ([\d.]+) at delta", stdout + err)
    rc, shown, _ = run(capsys, "ledger", "show", "--ledger", tmp_path / "ledger.sqlite3")
    (ledger_eps,) = _numbers(r"adult_rho: .*?epsilon = ([\d.]+) at delta", shown)
    assert planned == noted == ledger_eps == pytest.approx(want, abs=5e-4)  # printed to 6 digits
    assert warned == warned_rel == pytest.approx(want, abs=0.05)  # printed to 4 digits
    assert p["epsilon"] <= want * (1 + 1e-9) and p["epsilon"] == pytest.approx(want, rel=1e-3)


def test_mu_budget_with_discrete_noise_says_what_is_stated(capsys, tmp_path):
    p, _, err = release(capsys, tmp_path, "adult_mu", "--mu", 1)
    assert p["mu"] is None and p["rho"] <= 0.5  # mu-GDP implies (mu^2/2)-zCDP: no more than that
    assert "mu-GDP is proven for continuous Gaussian noise only" in err
    q, _, err = release(capsys, tmp_path, "adult_mu_cont", "--mu", 1, "--noise", "gaussian_float")
    assert q["mu"] == pytest.approx(1.0, rel=1e-12) and "mu-GDP is proven" not in err


def test_plan_json_shows_the_continuous_claim_beside_labelled(capsys):
    rc, out, err = run(capsys, "plan", "--domain", DOMAIN, "--marginals", MARGINALS, "--rho", 0.5, "--format", "json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["privacy"]["mu"] is None and d["privacy"]["epsilon"] == pytest.approx(cks_epsilon(0.5, 1e-9), rel=1e-6)
    c = d["privacy_if_continuous_noise"]
    assert c["mu"] == pytest.approx(1.0) and c["epsilon"] == pytest.approx(analytic_epsilon(1.0, 1e-9), rel=1e-7)
