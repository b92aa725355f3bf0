"""A newcomer's first hour: one set of defaults in API and CLI, raw data from Python
as from the command line, queries in the data's units, infer-domain on the shipped data.

Expected counts are hand-counted from the small tables written here (never computed by
dpmatrix); a huge budget (ρ = 1e12) makes the noisy answers equal to them within 1e-3.
"""

from __future__ import annotations

import json
import warnings
from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from cli_run import run

ADULT = Path(str(files("dpmatrix") / "data" / "adult.csv"))

# a CPS-1988-like extract with raw values: wages in dollars, labels as text
CPS = pd.DataFrame(
    {
        "wage": [120.5, 480.0, 500.0, 999.99, 1500.0, 300.0, 2500.0, 640.0, 75.0, 4999.0],
        "education": ["HS", "BA", "HS", "MA", "BA", "none", "MA", "HS", "none", "BA"],
        "ethnicity": ["cauc", "afam", "cauc", "cauc", "afam", "cauc", "cauc", "afam", "cauc", "cauc"],
        "region": ["south", "west", "south", "northeast", "midwest", "west", "south", "south", "midwest", "west"],
    }
)
CPS_DOMAIN = {
    "wage": {"bins": [0, 500, 1000, 5000]},  # [0, 500), [500, 1000), [1000, 5000]
    "education": {"labels": ["none", "HS", "BA", "MA"], "kind": "ordinal"},
    "ethnicity": {"labels": ["cauc", "afam"]},
    "region": {"labels": ["northeast", "midwest", "south", "west"]},
}
# hand count of wage bin x ethnicity (rows: bins, columns: cauc, afam)
WAGE_BY_ETHNICITY = [[3, 1], [2, 1], [2, 1]]


@pytest.fixture
def cps(tmp_path):
    data, dom = tmp_path / "cps.csv", tmp_path / "cps-domain.json"
    CPS.to_csv(data, index=False)
    dom.write_text(json.dumps(CPS_DOMAIN))
    return data, dom


# -- 1. one set of defaults ----------------------------------------------------------------------
def test_api_and_cli_give_the_same_plan(capsys, tmp_path):
    """Same domain (with an ordinal attribute) and "all <=2-way" workload, no options: the CLI's
    saved plan and dm.plan have the same objective, query types and σ² per residual set."""
    spec = {"age": {"bins": [0, 18, 30, 50, 70, 120]}, "sex": {"labels": ["F", "M"]},
            "edu": {"labels": ["a", "b", "c"], "kind": "ordinal"}}
    (tmp_path / "d.json").write_text(json.dumps(spec))
    rc, _, err = run(capsys, "plan", "--domain", tmp_path / "d.json", "--workload", "all:<=2",
                     "--rho", "0.5", "--save", tmp_path / "p.json")
    assert rc == 0, err
    saved = json.loads((tmp_path / "p.json").read_text())
    api = dm.plan(dm.Workload.marginals(dm.Domain.from_dict(spec), 2, upto=True), rho=0.5)
    assert saved["objective"] == api.objective == "max_var"
    cli = {tuple(r["attributes"]): r["sigma2"] for r in saved["residuals"]}
    mine = {tuple(r["attributes"]): r["sigma2"] for r in api.to_dict()["residuals"]}
    assert cli.keys() == mine.keys() and len(cli) == 7
    for k in cli:
        assert cli[k] == pytest.approx(mine[k], rel=1e-9), k
    wk = dm.Workload(dm.Domain.from_dict(spec), [("age", "edu")])
    assert wk.types(0) == ("identity", "identity")  # ordinal attributes are tables of cells too


# -- 2. raw data from Python ---------------------------------------------------------------------
@pytest.mark.parametrize("source", ["frame", "file"])
def test_cps_like_raw_labels_from_python(cps, source):
    data, dom_path = cps
    dom = dm.Domain.from_json(dom_path)
    plan = dm.plan(dm.Workload(dom, [("wage", "ethnicity"), ("education",), ("region",)]), rho=1e12)
    arg = CPS if source == "frame" else str(data)
    for encoding in ("raw", "auto"):
        meas = plan.measure(arg, encoding=encoding, rng=np.random.default_rng(1))
        got = meas.estimate(("wage", "ethnicity"))
        np.testing.assert_allclose(got, WAGE_BY_ETHNICITY, atol=1e-3)
        np.testing.assert_allclose(meas.estimate(("education",)), [2, 3, 3, 2], atol=1e-3)


def test_raw_values_need_raw_not_codes_and_the_error_says_what_works(cps):
    data, dom_path = cps
    plan = dm.plan(dm.Workload(dm.Domain.from_json(dom_path), [("region",)]), rho=1.0)
    with pytest.raises(dm.DataError, match=r"encoding='raw'") as exc:
        plan.measure(str(data), encoding="codes")
    assert "plan.measure(data, encoding='raw')" in str(exc.value)


def test_auto_refuses_when_codes_and_values_disagree():
    """Small numbers fit both readings of a binned attribute: 3 is bin [0, 500) as a wage and
    bin 3 as a code. "auto" must not pick one silently."""
    dom = dm.Domain.from_dict({"wage": {"bins": [0, 500, 1000, 5000, 9000]}})
    plan = dm.plan(dm.Workload(dom, [("wage",)]), rho=1e12)
    df = pd.DataFrame({"wage": [0, 1, 3, 3]})
    with pytest.raises(dm.DataError, match=r"both as raw values .* encoding='raw' .* encoding='codes'"):
        plan.measure(df)
    np.testing.assert_allclose(plan.measure(df, encoding="raw").estimate(("wage",)), [4, 0, 0, 0], atol=1e-3)
    np.testing.assert_allclose(plan.measure(df, encoding="codes").estimate(("wage",)), [1, 1, 0, 2], atol=1e-3)


def test_on_unknown_from_python(cps):
    data, dom_path = cps
    dom = dm.Domain.from_dict({**CPS_DOMAIN, "wage": {"bins": [0, 500, 1000, 2000]}})
    plan = dm.plan(dm.Workload(dom, [("wage",)]), rho=1e12)
    with pytest.raises(dm.DataError, match=r"'wage': 2 rows"):
        plan.measure(CPS, encoding="raw")
    with pytest.warns(UserWarning, match="2 rows"):
        meas = plan.measure(str(data), encoding="raw", on_unknown={"wage": "clip"})
    np.testing.assert_allclose(meas.estimate(("wage",)), [4, 3, 3], atol=1e-3)


def test_shipped_adult_codes_are_read_as_codes_and_shown_as_labels():
    dom = dm.Domain.from_json(files("dpmatrix") / "data" / "adult-domain.json")
    plan = dm.plan(dm.Workload(dom, [("sex",)]), rho=1e12)
    meas = plan.measure(str(ADULT), encoding="codes", rng=np.random.default_rng(0))
    table = meas.marginal(("sex",))
    assert list(table["sex"]) == ["Female", "Male"]
    np.testing.assert_allclose(table["estimate"], [16192, 32650], atol=1e-3)


# -- 4. queries in the units of the data -----------------------------------------------------------
def test_binned_queries_in_the_data_units():
    plan = dm.plan(dm.Workload(dm.Domain.from_dict(CPS_DOMAIN), [("wage", "ethnicity")]), rho=1e12)
    meas = plan.measure(CPS, encoding="raw", rng=np.random.default_rng(2))
    assert meas.query({"wage": (0, 500)}).estimate == pytest.approx(4, abs=1e-3)      # one bin
    assert meas.query({"wage": (500, 5000)}).estimate == pytest.approx(6, abs=1e-3)   # to the last edge
    assert meas.query({"wage": 700.25}).estimate == pytest.approx(3, abs=1e-3)        # the bin holding it
    assert meas.query({"wage": (0, 1000), "ethnicity": "afam"}).estimate == pytest.approx(2, abs=1e-3)
    assert meas.query({"wage": dm.codes(1, 2)}).estimate == pytest.approx(6, abs=1e-3)
    with pytest.raises(dm.WorkloadError, match=r"upper bound 700 of 'wage' cuts the bin \[500, 1000\).*500 or 1000"):
        meas.query({"wage": (0, 700)})
    with pytest.raises(dm.WorkloadError, match="outside 0..2"):
        meas.query({"wage": dm.codes(3)})


# -- 3. infer-domain on the shipped data ---------------------------------------------------------
@pytest.mark.parametrize("binning", ["width", "quantile"])
def test_infer_domain_on_shipped_adult_proposes_bins(capsys, tmp_path, binning):
    out = tmp_path / "d.json"
    rc, so, err = run(capsys, "infer-domain", ADULT, "--out", out, "--binning", binning)
    assert rc == 0, err
    assert "NOT covered by the differential-privacy guarantee" in err and "leak" in err
    spec = json.loads(out.read_text())
    raw = pd.read_csv(ADULT)
    many = {c for c in raw.columns if raw[c].nunique() > 50}  # pandas, not dpmatrix
    assert many == {"age", "fnlwgt", "hours-per-week"}
    assert {c for c, a in spec.items() if "bins" in a} == many
    for c in many:
        edges = spec[c]["bins"]
        assert edges[0] == raw[c].min() and edges[-1] == raw[c].max() and edges == sorted(set(edges))
        assert f"{c}:" in so
    if binning == "width":  # 10 equal-width bins of [1, 74] rounded: hand-computed
        assert spec["age"]["bins"] == [1, 8, 16, 23, 30, 38, 45, 52, 59, 67, 74]
    # the proposed domain is usable: a release of the raw file through it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc, _, err = run(capsys, "release", ADULT, "--domain", out, "--encoding", "raw", "--workload", "age,sex",
                         "--rho", "1e9", "--out", tmp_path / "rel", "--no-ledger", "--no-report", "--quiet")
    assert rc == 0, err
