"""Pure ε-DP prefix / range releases on the command line: ``dpmatrix plan --epsilon E
--delta 0 --query-types "age=prefix" [--report]``, ``release`` (with ``--strategy hierarchical |
haar``, or a saved ``--plan``) and ``query`` from the release folder."""

import io
import json
from contextlib import redirect_stdout

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix.cli import main
from dpmatrix.planners._pure import HierarchicalPlan

DOMAIN = {"age": {"bins": [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 120]}, "sex": {"labels": ["F", "M"]},
          "hours": 12}


def _cli(*argv) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(list(argv)) == 0
    return buf.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("pure_levels")
    (d / "d.json").write_text(json.dumps(DOMAIN))
    g = np.random.default_rng(4)
    n = 500
    df = pd.DataFrame({"age": np.round(g.uniform(0, 110, n), 1), "sex": g.choice(["F", "M"], n),
                       "hours": g.integers(0, 12, n)})
    df.to_csv(d / "data.csv", index=False)
    return d, df


def test_plan_prints_the_comparison_and_writes_a_report(files):
    d, _ = files
    text = _cli("plan", "--domain", str(d / "d.json"), "--workload", "age,sex;hours", "--query-types",
                "age=prefix,hours=range", "--epsilon", "1", "--delta", "0", "--report", str(d / "plan.html"))
    assert "pure DP, delta = 0" in text
    assert "strategies compared (auto)" in text and "haar" in text and "hierarchical" in text
    html = (d / "plan.html").read_text()
    assert "pure ε-DP" in html
    # the plan report of a plain pure plan works too
    _cli("plan", "--domain", str(d / "d.json"), "--workload", "age,sex", "--epsilon", "1", "--delta", "0",
         "--report", str(d / "plain.html"))
    assert "pure ε-DP" in (d / "plain.html").read_text()


@pytest.mark.parametrize("strategy", ["hierarchical", "haar"])
def test_release_and_query(files, strategy):
    d, df = files
    out = d / f"rel-{strategy}"
    _cli("release", str(d / "data.csv"), "--domain", str(d / "d.json"), "--workload", "age,sex;age",
         "--query-types", "age=prefix", "--epsilon", "1", "--delta", "0", "--strategy", strategy,
         "--out", str(out), "--no-ledger", "--quiet")
    rel = dm.load_release(out)
    assert isinstance(rel.plan, HierarchicalPlan) and rel.plan.strategy == strategy
    assert rel.manifest["mechanism"]["noise"] == "discrete_laplace" and rel.privacy["delta"] == 0.0
    assert (out / "report.html").exists()
    text = _cli("query", str(out), "--marginal", "age,sex")
    assert "pure DP, delta = 0" in text and "< 10" in text and "<= 120" in text
    # the saved table is the release's reconstruction of the workload's prefixes
    t = rel.table(("age", "sex"))
    assert len(t) == 20
    np.testing.assert_allclose(t["estimate"], rel.marginal(("age", "sex"))["estimate"], atol=1e-9)
    # the estimates are the true prefix counts plus noise of the stated variance: loose check
    truth = (pd.cut(df["age"], DOMAIN["age"]["bins"], right=False, labels=False).to_frame()
             .assign(sex=df["sex"]).groupby(["age", "sex"]).size().unstack(fill_value=0)
             .reindex(range(10), fill_value=0).cumsum().to_numpy().reshape(-1))
    z = (t["estimate"].to_numpy() - truth) / np.sqrt(t["variance"].to_numpy())
    assert np.all(np.abs(z) < 6)


def test_saved_plan_is_released_as_planned(files):
    d, _ = files
    saved = d / "p.json"
    _cli("plan", "--domain", str(d / "d.json"), "--workload", "hours", "--query-types", "hours=range",
         "--epsilon", "0.5", "--delta", "0", "--strategy", "haar", "--save", str(saved))
    _cli("release", str(d / "data.csv"), "--plan", str(saved), "--out", str(d / "rel-saved"), "--no-ledger",
         "--quiet", "--no-report")
    rel = dm.load_release(d / "rel-saved")
    assert rel.plan.budgets == HierarchicalPlan.from_dict(json.loads(saved.read_text())).budgets
    assert rel.privacy["pure_epsilon"] <= 0.5
