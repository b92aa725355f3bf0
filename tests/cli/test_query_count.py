"""``dpmatrix query --where/--by/--contrast``: counts and ranges of a release of the shipped UCI
Adult data with the exact interval, checked against the explicit GLS covariance over the full
(340-cell) domain, and against the naive sum of the saved cells' variances (wrong)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
import oracle
from dpmatrix.cli import main

ADULT = Path(dm.__file__).parent / "data" / "adult.csv"
SIZES = [85, 2, 2]  # age codes (0 = 17 years), sex, income>50K


def _cli(*argv) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main([str(a) for a in argv]) == 0
    return buf.getvalue()


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    data = pd.read_csv(ADULT, usecols=["age", "sex", "income>50K"])
    dom = dm.Domain.from_dict({"age": {"size": 85, "kind": "ordinal"}, "sex": 2, "income>50K": 2})
    plan = dm.plan(dm.Workload.marginals(dom, 2, upto=True), rho=0.05)
    meas = plan.measure(data, rng=np.random.default_rng(8))
    out = dm.write_release(meas, tmp_path_factory.mktemp("q") / "rel", formats=("parquet", "csv"))
    return out, plan, data


def _gls_variance(plan, key, q) -> float:
    """qᵀ Cov q of the GLS estimate from the explicit stacked residual mechanisms (RP+ eq. 3)."""
    sets = [s for s, m in zip(plan.closure.sets, plan.measured) if m]
    s2 = {s: float(plan.sigma2[i]) for i, s in enumerate(plan.closure.sets)}
    B, Sigma = oracle.stack_mechanism(SIZES, sets, s2)
    W = np.asarray(q, dtype=float).reshape(1, -1) @ oracle.marginal_query(SIZES, key)
    return float(oracle.gls_covariance(W, B, Sigma)[0, 0])


def test_range_count_has_the_exact_variance_not_the_naive_sum(release):
    out, plan, data = release
    got = json.loads(_cli("query", out, "--where", "age=8..37", "--where", "income>50K=1", "--format", "json"))
    q = np.zeros((85, 2))
    q[8:38, 1] = 1
    exact = _gls_variance(plan, (0, 2), q)
    assert got["variance"] == pytest.approx(exact, rel=1e-9)
    assert got["std"] == pytest.approx(np.sqrt(exact), rel=1e-12)
    assert got["upper"] - got["lower"] == pytest.approx(2 * 1.959963984540054 * np.sqrt(exact), rel=1e-9)
    truth = int(((data.age >= 8) & (data.age <= 37) & (data["income>50K"] == 1)).sum())
    assert abs(got["estimate"] - truth) < 5 * np.sqrt(exact)
    # what a user summing the 30 saved cells by hand gets: the variance is wrong (here too large)
    table = dm.load_release(out).table(("age", "income>50K"))
    cells = table[(table["age"].between(8, 37)) & (table["income>50K"] == 1)]
    assert len(cells) == 30
    assert cells["estimate"].sum() == pytest.approx(got["estimate"], rel=1e-9)
    assert cells["variance"].sum() > 1.3 * exact


def test_by_and_contrast_rows(release):
    out, plan, _ = release
    rows = json.loads(_cli("query", out, "--where", "income>50K=1", "--by", "sex", "--format", "json"))["rows"]
    assert [r["sex"] for r in rows] == [0, 1]
    for r in rows:
        q = np.zeros((2, 2))
        q[r["sex"], 1] = 1
        assert r["variance"] == pytest.approx(_gls_variance(plan, (1, 2), q), rel=1e-9)
    diff = json.loads(_cli("query", out, "--where", "income>50K=1", "--contrast", "sex=1", "sex=0",
                           "--format", "json", "--level", "0.9"))
    q = np.zeros((2, 2))
    q[1, 1], q[0, 1] = 1, -1
    assert diff["variance"] == pytest.approx(_gls_variance(plan, (1, 2), q), rel=1e-9)
    assert diff["estimate"] == pytest.approx(rows[1]["estimate"] - rows[0]["estimate"], rel=1e-9)
    assert diff["level"] == 0.9
    text = _cli("query", out, "--where", "age=8..37", "--encoding", "codes")
    assert "not a sum of cell variances" in text and "estimate" in text


def test_refusals_are_one_line_errors(release, capsys):
    out, _, _ = release
    assert main(["query", str(out), "--where", "age=0..3", "--where", "sex=1", "--where", "income>50K=1"]) == 2
    err = capsys.readouterr().err
    assert "needs the marginal on ['age', 'sex', 'income>50K']" in err and len(err.strip().splitlines()) == 1
    assert main(["query", str(out), "--where", "nope=1"]) == 2
    assert main(["query", str(out), "--where", "age=1", "--marginal", "age"]) == 2


def test_release_readme_says_not_to_sum_cells(release):
    out, _, _ = release
    text = (Path(out) / "README.txt").read_text()
    assert "do not add the cells' estimates and variances by hand" in text and "--where" in text
    assert "dpmatrix postprocess" in text
