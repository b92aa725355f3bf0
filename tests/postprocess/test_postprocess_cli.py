"""``dpmatrix release --postprocess`` and ``dpmatrix synth``."""

import json

import numpy as np
import pandas as pd
import pytest

from dpmatrix.cli import main

DOMAIN = {"age": {"bins": [0, 20, 40, 60, 120]}, "sex": {"labels": ["F", "M"]}, "n": 3}


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("pp_cli")
    rng = np.random.default_rng(4)
    pd.DataFrame({
        "age": np.round(rng.uniform(0, 119, 400), 1),
        "sex": rng.choice(["F", "M"], 400),
        "n": rng.integers(0, 3, 400),
    }).to_csv(base / "data.csv", index=False)
    (base / "d.json").write_text(json.dumps(DOMAIN))
    out = base / "rel"
    rc = main(["release", str(base / "data.csv"), "--domain", str(base / "d.json"), "--workload", "all:<=2",
               "--rho", "0.01", "--out", str(out), "--seed", "3", "--quiet", "--postprocess",
               "--tables", "parquet,csv"])  # CSV files per marginal, for the release and the post-processed tables
    assert rc == 0
    return out


def test_release_writes_labelled_postprocessed_tables_beside_the_unbiased_ones(release_dir):
    pp_dir = release_dir / "postprocessed"
    manifest = json.loads((pp_dir / "manifest.json").read_text())
    assert "BIASED" in manifest["note"] and "no exact variances" in manifest["note"]
    assert manifest["postprocessed"] is True and manifest["biased"] is True
    assert manifest["fit"]["noisy_values"] > 0 and manifest["fit"]["chi2"] >= 0
    names = [tuple(e["attributes"]) for e in manifest["marginals"]]
    assert ("age", "sex") in names and () in names
    # one dataset, as the release's; every file the manifest names exists
    assert sorted(p.name for p in (pp_dir / "tables").iterdir()) == ["part-00000.parquet"]
    assert all((pp_dir / rel).exists() for rel in manifest["files"])
    data = pd.read_parquet(pp_dir / "tables")
    release = json.loads((release_dir / "manifest.json").read_text())
    unbiased_files = {tuple(e["attributes"]): e["files"]["csv"] for e in release["marginals"]}
    pp = data[data["marginal"] == "age,sex"][["age", "sex", "estimate"]].reset_index(drop=True)
    unbiased = pd.read_csv(release_dir / unbiased_files["age", "sex"])
    assert pp[["age", "sex"]].equals(unbiased[["age", "sex"]])
    assert (data["estimate"] >= 0).all()
    # consistent: the 1-way table of sex is the 2-way table summed over age
    sex = data[data["marginal"] == "sex"].set_index("sex")["estimate"]
    np.testing.assert_allclose(pp.groupby("sex")["estimate"].sum().loc[sex.index], sex, rtol=1e-6)
    total = float(data[data["marginal"] == "total"]["estimate"].iloc[0])
    assert sex.sum() == pytest.approx(total, rel=1e-6)


def test_synth_writes_records_in_the_domain_labels(release_dir, tmp_path, capsys):
    out = tmp_path / "synth.csv"
    assert main(["synth", str(release_dir), "--rows", "250", "--out", str(out), "--sample-seed", "1", "--quiet"]) == 0
    syn = pd.read_csv(out)
    assert list(syn.columns) == ["age", "sex", "n"] and len(syn) == 250
    assert set(syn["sex"]) <= {"F", "M"}
    assert set(syn["age"]) <= {"[0, 20)", "[20, 40)", "[40, 60)", "[60, 120]"}
    # an existing file is not overwritten silently; bad --rows is a one-line error
    assert main(["synth", str(release_dir), "--rows", "5", "--out", str(out), "--quiet"]) == 2
    assert main(["synth", str(release_dir), "--rows", "0", "--out", str(tmp_path / "x.csv"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "--rows must be at least 1" in err
