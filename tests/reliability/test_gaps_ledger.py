"""A Gaussian (zCDP) release has no finite pure ε: on data whose only cap is a pure-ε cap it is
refused (nothing charged), unless the data owner also sets a ρ cap; pure releases keep counting
against both caps (ε, and ρ = ε²/2, Bun & Steinke 2016 Prop. 1.4)."""

from __future__ import annotations

import json

import pytest

import dpmatrix as dm
from dpmatrix._ledger import BudgetExceededError, Ledger

from ._support import NO_REPORT, assert_one_line_error, release_args, run


@pytest.fixture()
def led(tmp_path):
    return Ledger(tmp_path / "l.sqlite3")


def test_gaussian_release_on_an_epsilon_only_cap_is_refused(led):
    fp = led.fingerprint(b"census bytes")
    led.set_cap("census", epsilon=2.0)
    with pytest.raises(BudgetExceededError, match="no finite pure epsilon") as err:
        with led.reserve("census", fp, rho=0.01):
            raise AssertionError("must not run")
    assert "set-cap census --rho" in str(err.value)
    assert led.rows() == [] and led.spent("census").rho == 0  # nothing charged, nothing recorded
    with led.reserve("census", fp, epsilon=1.5):  # pure releases still go through the eps cap
        pass
    assert led.spent("census").epsilon == pytest.approx(1.5)


def test_epsilon_only_cap_of_a_renamed_copy_still_refuses_gaussian(led):
    fp = led.fingerprint(b"census bytes")
    led.set_cap("census", epsilon=2.0)
    with led.reserve("census", fp, epsilon=0.5):  # links the fingerprint to the name
        pass
    with pytest.raises(BudgetExceededError, match="'census' \\(same data as 'census_v2'\\)"):
        with led.reserve("census_v2", fp, rho=0.01):
            pass


def test_an_explicit_rho_cap_admits_gaussian_releases_and_pure_ones_count_against_both(led):
    fp = led.fingerprint(b"census bytes")
    led.set_cap("census", epsilon=2.0)
    led.set_cap("census", rho=1.0)  # the data owner accepts zCDP releases, up to rho = 1
    with led.reserve("census", fp, rho=0.5):
        pass
    with led.reserve("census", fp, epsilon=1.0):  # rho 0.5 more: exactly the rho cap
        pass
    s = led.spent("census")
    assert (s.rho, s.epsilon) == (pytest.approx(1.0), pytest.approx(1.0))
    with pytest.raises(BudgetExceededError, match="rho"), led.reserve("census", fp, rho=0.01):
        pass


def test_gaussian_release_on_the_command_line_is_refused_before_counting(small, capsys):
    led = small / "ledger.sqlite3"
    rc, _, err = run(capsys, "ledger", "set-cap", "people", "--epsilon", "1", "--ledger", led)
    assert rc == 0, err
    rc, _, err = run(capsys, *release_args(small, small / "rel", NO_REPORT))
    assert_one_line_error(rc, err, "no finite pure epsilon", "--rho")
    assert not (small / "rel").exists()
    assert Ledger(led).spent("people").rho == 0


def test_a_saved_continuous_conversion_released_with_default_noise_is_refused_and_charges_nothing(small, capsys):
    dom = dm.Domain.from_json(small / "domain.json")
    dm.plan(dm.Workload(dom, [("age", "sex")]), budget=dm.Budget.approx(1.0, 1e-9, noise="gaussian")).to_json(
        small / "plan.json")
    argv = ["release", small / "people.csv", "--domain", small / "domain.json", "--plan", small / "plan.json",
            "--out", small / "rel", "--ledger", small / "ledger.sqlite3", "-q", NO_REPORT]
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, 'noise="gaussian_float"', "1 asked")
    assert not (small / "rel").exists()
    led = Ledger(small / "ledger.sqlite3")
    assert led.spent("people").rho == 0 and led.rows() == []  # refused before the ledger is touched
    rc, _, err = run(capsys, *argv, "--noise", "gaussian_float")  # the noise it was converted for
    assert rc == 0, err
    assert json.loads((small / "rel" / "manifest.json").read_text())["privacy"]["epsilon"] <= 1.0
