"""Post-processing an existing release into a new folder (``postprocess_release`` and
``dpmatrix postprocess``): no data, no new noise, the release untouched; one Parquet dataset;
a manifest labelled biased with the fit's χ² against its expectation."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._postprocess import fit_report, postprocess_release

ADULT = Path(dm.__file__).parent / "data" / "adult.csv"


def _digests(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def adult_release(tmp_path_factory):
    """A release of three attributes of the shipped UCI Adult data (all ≤2-way, ρ = 0.05)."""
    data = pd.read_csv(ADULT, usecols=["sex", "race", "income>50K"])
    dom = dm.Domain.from_dict({"sex": {"labels": ["Female", "Male"]},
                               "race": {"labels": sorted(data["race"].unique())},
                               "income>50K": {"labels": ["<=50K", ">50K"]}})
    plan = dm.plan(dm.Workload.marginals(dom, 2, upto=True), rho=0.05)
    meas = plan.measure(data, rng=np.random.default_rng(2))
    return dm.write_release(meas, tmp_path_factory.mktemp("pp") / "rel"), len(data)


def test_postprocess_release_writes_a_labelled_dataset_and_leaves_the_release_alone(adult_release, tmp_path):
    rel_dir, n = adult_release
    before = _digests(Path(rel_dir))
    manifest = postprocess_release(rel_dir, tmp_path / "pp", method="graphical_model")
    assert _digests(Path(rel_dir)) == before  # nothing written into the release
    out = tmp_path / "pp"
    assert json.loads((out / "manifest.json").read_text()) == json.loads(json.dumps(manifest, default=float))
    assert manifest["postprocessed"] and manifest["biased"]
    assert manifest["privacy"]["rho"] == pytest.approx(0.05)
    assert not any(p.name.endswith(".partial") for p in tmp_path.iterdir())
    data = pd.read_parquet(out / "tables")
    assert (data["estimate"] >= 0).all()
    keys = set(data["marginal"])
    assert {"total", "sex", "race", "sex,race", "sex,income>50K"} <= keys
    two = data[data["marginal"] == "sex,income>50K"]
    one = data[data["marginal"] == "sex"].set_index("sex")["estimate"]
    np.testing.assert_allclose(two.groupby("sex")["estimate"].sum().loc[one.index], one, rtol=1e-6)
    total = float(data[data["marginal"] == "total"]["estimate"].iloc[0])
    assert total == pytest.approx(n, rel=0.01)  # 48,842 records, noise sd ~ a few
    fit = manifest["fit"]
    assert fit["expected_at_truth"] == fit["noisy_values"] > 0
    assert not fit["poor"] and "warning" not in fit
    # a second run refuses to overwrite without being asked, and replaces with overwrite=True
    with pytest.raises(dm.ReleaseError, match="not empty"):
        postprocess_release(rel_dir, out)
    postprocess_release(rel_dir, out, overwrite=True, method="graphical_model")
    with pytest.raises(dm.ReleaseError, match="outside the release"):
        postprocess_release(rel_dir, Path(rel_dir) / "pp")


def test_fit_report_flags_a_chi2_above_its_quantile():
    # χ²_100: 99.9 % quantile 149.45 (tables); 230 = 2.3× its expectation
    good = fit_report(100.0, 100)
    bad = fit_report(230.0, 100)
    assert good["poor_above"] == pytest.approx(149.449, abs=1e-3)
    assert not good["poor"] and bad["poor"]
    assert "2.30 times its expectation" in bad["warning"]


def test_a_stopped_fit_is_warned_about(adult_release, tmp_path):
    rel_dir, _ = adult_release
    m = postprocess_release(rel_dir, tmp_path / "pp1", method="mixture", iters=1, components=2)
    assert m["fit"]["poor"] and "poor fit" in m["fit"]["warning"]


def test_cli_postprocess_leaves_release_and_ledger_alone(tmp_path, capsys):
    from dpmatrix.cli import main

    data = pd.read_csv(ADULT, usecols=["sex", "race", "income>50K"]).head(5000)
    data.to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "dom.json").write_text(json.dumps({"sex": 2, "race": 5, "income>50K": 2}))
    ledger = tmp_path / "ledger.json"
    assert main(["release", str(tmp_path / "d.csv"), "--domain", str(tmp_path / "dom.json"), "--workload",
                 "all:<=2", "--rho", "0.1", "--out", str(tmp_path / "rel"), "--ledger", str(ledger),
                 "--dataset", "adult5k", "--quiet", "--no-report"]) == 0
    before = _digests(tmp_path / "rel"), ledger.read_bytes()
    capsys.readouterr()
    assert main(["postprocess", str(tmp_path / "rel"), "--out", str(tmp_path / "pp"), "--method", "mixture",
                 "--iters", "1"]) == 0
    out, err = capsys.readouterr()
    assert "no data, no new noise, no privacy cost" in out and "chi2 =" in out
    assert "warning: poor fit" in err  # one optimizer step cannot fit
    assert (_digests(tmp_path / "rel"), ledger.read_bytes()) == before
    assert json.loads((tmp_path / "pp" / "manifest.json").read_text())["biased"] is True
    # an existing folder is not replaced unless asked
    assert main(["postprocess", str(tmp_path / "rel"), "--out", str(tmp_path / "pp")]) == 2
