"""CLI: planning and releasing from accuracy targets: --target specs."""

import json

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from cli_run import run
from dpmatrix.errors import TargetError
from dpmatrix.planners._targets import parse_target_spec, targets_from_specs

Z95 = 1.959963984540054
DOMAIN = {"age": 10, "sex": 2, "race": 5}


@pytest.fixture
def dom(tmp_path):
    p = tmp_path / "d.json"
    p.write_text(json.dumps(DOMAIN))
    return p


def test_spec_parsing():
    assert parse_target_spec("age,sex=std<=10") == ("age,sex", "std", 10.0)
    assert parse_target_spec("race=var<=4") == ("race", "var", 4.0)
    assert parse_target_spec(" age = moe <= 50 ") == ("age", "moe95", 50.0)
    assert parse_target_spec("var<=100") == ("*", "var", 100.0)
    # every spec becomes a variance target
    t = targets_from_specs(["age,sex=std<=10", "race=moe<=3.919927969080108", "var<=7"])
    assert t == pytest.approx({"age,sex": 100.0, "race": 4.0, "*": 7.0})


@pytest.mark.parametrize("bad", ["age<=3", "age=sd<=3", "age=var<=-1", "age=var<=nan", "age=var<=x",
                                 "age=var<3"])
def test_spec_errors(bad):
    with pytest.raises(TargetError):
        parse_target_spec(bad)
    with pytest.raises(TargetError, match="two targets"):
        targets_from_specs(["var<=1", "var<=2"])


def test_plan_prints_least_budget_and_target_table(capsys, dom):
    rc, out, err = run(capsys, "plan", "--domain", dom, "--workload", "age,sex;race",
                       "--target", "age,sex=std<=10", "--target", "race=var<=4")
    assert rc == 0, err
    assert "least privacy cost meeting every target" in out and "optimal" in out
    assert "rho = " in out and "epsilon = " in out and "no mu claimed" in out  # default noise: discrete
    lines = [l.split() for l in out.splitlines()]
    head = lines.index(["marginal", "queries", "target", "achieved", "ratio", "binding"])
    rows = {r[0]: r for r in lines[head + 1:head + 3]}
    assert float(rows["age,sex"][2]) == 100.0 and float(rows["age,sex"][3]) == pytest.approx(100.0)
    assert float(rows["race"][2]) == 4.0 and rows["race"][5] == "True"
    # the JSON output carries the certificate; the budget equals the library's
    rc, out, _ = run(capsys, "plan", "--domain", dom, "--workload", "age,sex;race",
                     "--target", "age,sex=std<=10", "--target", "race=var<=4", "--format", "json")
    spec = json.loads(out)
    cert = spec["targets"]["certificate"]
    assert cert["status"] == "optimal" and cert["gap"] <= 1e-6
    assert spec["privacy"]["pcost"] == pytest.approx(cert["pcost_lower_bound"], rel=1e-6)


def test_plan_with_budget_and_default_target(capsys, dom):
    rc, out, err = run(capsys, "plan", "--domain", dom, "--workload", "age,sex;race",
                       "--target", "var<=100", "--rho", "1")
    assert rc == 0, err
    assert "largest variance/target" in out and "rho = 1 (zCDP)" in out


def test_plan_target_errors_name_the_marginal(capsys, dom):
    rc, out, err = run(capsys, "plan", "--domain", dom, "--workload", "age,sex;race",
                       "--target", "age,race=var<=4", "--target", "var<=1")
    assert rc != 0 and "age,race" in err
    rc, out, err = run(capsys, "plan", "--domain", dom, "--workload", "age,sex;race",
                       "--target", "race=var<=4")
    assert rc != 0 and "no target for age,sex" in err
    rc, out, err = run(capsys, "plan", "--domain", dom, "--workload", "age,sex;race",
                       "--target", "race=var<=-4")
    assert rc != 0 and "--target" in err


def test_release_records_targets_in_the_manifest(capsys, dom, tmp_path):
    rng = np.random.default_rng(3)
    df = pd.DataFrame({a: rng.integers(0, n, 300) for a, n in DOMAIN.items()})
    df.to_csv(tmp_path / "data.csv", index=False)
    out_dir = tmp_path / "rel"
    rc, out, err = run(capsys, "release", tmp_path / "data.csv", "--domain", dom, "--workload", "age,sex;race",
                       "--target", "age,sex=moe<=20", "--target", "race=var<=4", "--out", out_dir,
                       "--seed", "1", "--no-ledger", "--quiet", "--no-report")
    assert rc == 0, err
    m = json.loads((out_dir / "manifest.json").read_text())
    rows = {r["marginal"]: r for r in m["targets"]}
    assert rows["age,sex"]["target"] == pytest.approx((20 / Z95) ** 2)
    assert rows["race"]["achieved"] == pytest.approx(4.0, rel=1e-7)
    assert m["target_certificate"]["status"] == "optimal" and m["target_certificate"]["kind"] == "var"
    # the released variances are the achieved ones
    race = pd.read_parquet(out_dir / "tables", filters=[("marginal", "==", "race")])
    assert dm.load_release(out_dir).plan.pcost == pytest.approx(m["privacy"]["pcost"])
    assert race["variance"].max() == pytest.approx(4.0, rel=1e-7)
