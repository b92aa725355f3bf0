"""Release artifacts: write, read back, reconstruct without data (dpmatrix.release)."""

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix.release import MANIFEST, MEASUREMENTS, load_release, write_release

DOM = dm.Domain.from_dict(
    {
        "age": {"bins": [0, 20, 40, 60, 120]},
        "sex": {"labels": ["F", "M"]},
        "race": {"size": 3, "labels": ["a", "b", "other"]},
        "n": 3,
    }
)


@pytest.fixture(scope="module")
def codes():
    rng = np.random.default_rng(7)
    return pd.DataFrame({n: rng.integers(0, s, 700) for n, s in zip(DOM.names, DOM.sizes)})


def measure(codes, wk, seed=1, **kw):
    plan = dm.plan(wk, rho=1.0, **kw)
    return plan.measure(codes, rng=np.random.default_rng(seed))


def test_round_trip_same_answers(codes, tmp_path):
    wk = dm.Workload(DOM, [("age", "sex", "race"), ("race", "n"), ()], weights=[1, 2, 1])
    meas = measure(codes, wk)
    out = write_release(meas, tmp_path / "rel", level=0.9, formats=("parquet", "csv"))
    rel = load_release(out)
    assert rel.marginals == [("age", "sex", "race"), ("race", "n"), ()]
    for names in rel.marginals:
        # "age" has bins, hence is ordinal, hence asked as prefix queries: the saved tables hold
        # the workload's queries (answer), which equal those reconstructed from the saved ω
        want = meas.answer(names, 0.9)
        got = rel.answer(names)  # reconstructed from the saved measurements
        np.testing.assert_array_equal(got["estimate"], want["estimate"])
        np.testing.assert_array_equal(got["variance"], want["variance"])
        for fmt in ("parquet", "csv"):
            saved = rel.table(names, fmt)
            assert list(saved.columns) == list(want.columns)
            np.testing.assert_allclose(saved[["estimate", "variance", "std", "lower", "upper"]],
                                       want[["estimate", "variance", "std", "lower", "upper"]],
                                       rtol=1e-15, atol=0)  # fmt: skip
    # a closure marginal that was never saved, from the measurements alone
    for sub in [("age", "race"), ("sex",), ("n",)]:
        pd.testing.assert_frame_equal(
            rel.marginal(sub, 0.95)[["estimate", "variance", "lower", "upper"]],
            meas.marginal(sub, 0.95)[["estimate", "variance", "lower", "upper"]],
        )
    with pytest.raises(dm.NotMeasuredError):
        rel.table(("sex",))  # not saved
    with pytest.raises(dm.NotMeasuredError):
        rel.marginal(("age", "n"))  # not in the closure


def test_tables_carry_labels_and_bins(codes, tmp_path):
    wk = dm.Workload(DOM, [("age", "sex"), ("race",)], query_types={"age": "identity"})
    rel = load_release(write_release(measure(codes, wk), tmp_path / "rel", formats=("parquet", "csv")))
    t = rel.table(("age", "sex"))
    assert list(t["age"].cat.categories) == ["[0, 20)", "[20, 40)", "[40, 60)", "[60, 120]"]
    assert t["sex"].astype(str).tolist()[:2] == ["F", "M"]
    csv = pd.read_csv(tmp_path / "rel" / json.loads((tmp_path / "rel" / "manifest.json").read_text())["marginals"][0]["files"]["csv"])
    assert csv["age"].tolist()[0] == "[0, 20)" and set(csv["sex"]) == {"F", "M"}
    assert list(csv.columns) == ["age", "sex", "estimate", "variance", "std", "lower", "upper"]
    np.testing.assert_allclose(csv["upper"] - csv["estimate"], 1.959963984540054 * csv["std"])
    # binned (hence ordinal) age asked as prefix sums: rows read as value bounds
    pre = load_release(write_release(measure(codes, dm.Workload(DOM, [("age",)], query_types={"age": "prefix"})), tmp_path / "pre"))
    assert pre.table(("age",))["age"].astype(str).tolist() == ["< 20", "< 40", "< 60", "<= 120"]


def test_manifest_contents(codes, tmp_path):
    wk = dm.Workload(DOM, [("age", "sex"), ("race",)])
    meas = measure(codes, wk)
    write_release(meas, tmp_path / "rel", delta=1e-6, formats=("csv",))
    m = json.loads((tmp_path / "rel" / MANIFEST).read_text())
    plan = meas.plan
    assert m["format"] == "dpmatrix.release/2"
    assert m["library"] == {"name": "dpmatrix", "version": dm.__version__}
    assert m["created"].endswith("+00:00")
    assert m["domain"] == DOM.to_dict() and m["objective"] == "max_var"  # the default of dm.plan
    assert m["workload"] == wk.to_dict()
    p = m["privacy"]
    assert p["rho"] == pytest.approx(1.0) and p["mu"] == pytest.approx(plan.mu)
    assert p["delta"] == 1e-6 and p["epsilon"] == pytest.approx(plan.epsilon(1e-6))
    sig = {tuple(r["attributes"]): r["sigma2"] for r in m["residuals"]}
    assert sig[("age", "sex")] == pytest.approx(float(plan.sigma2[plan.closure.index((0, 1))]))
    assert [e["files"] for e in m["marginals"]] == [
        # file names: readable slug + 12 hex digits of the SHA-256 of the JSON attribute list
        {"csv": "marginals/age__sex-" + hashlib.sha256(b'["age", "sex"]').hexdigest()[:12] + ".csv"},
        {"csv": "marginals/race-" + hashlib.sha256(b'["race"]').hexdigest()[:12] + ".csv"}
    ]
    assert not list((tmp_path / "rel" / "marginals").glob("*.parquet"))


def test_generalized_plan_round_trip(codes, tmp_path):
    """ResidualPlanner+ (prefix queries on an ordinal attribute): strategies are saved too."""
    wk = dm.Workload(DOM, [("age", "sex"), ("n",)], query_types={"age": "prefix"})
    meas = measure(codes, wk, objective="max_var")
    rel = load_release(write_release(meas, tmp_path / "rel"))
    assert rel.manifest["strategies"]  # a non-identity strategy for age
    for names in [("age", "sex"), ("age",)]:
        np.testing.assert_allclose(rel.marginal(names)["estimate"], meas.marginal(names)["estimate"], rtol=1e-12)
        np.testing.assert_allclose(rel.marginal(names)["variance"], meas.marginal(names)["variance"], rtol=1e-12)


def test_refuses_to_overwrite_and_writes_atomically(codes, tmp_path):
    meas = measure(codes, dm.Workload(DOM, [("sex",)]))
    out = tmp_path / "rel"
    write_release(meas, out)
    with pytest.raises(dm.ReleaseError, match="not empty"):
        write_release(meas, out)
    write_release(meas, out, overwrite=True)  # replaces a release
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(dm.ReleaseError, match="not a dpmatrix release"):
        write_release(meas, other, overwrite=True)
    assert (other / "keep.txt").exists()
    with pytest.raises(dm.ReleaseError, match="formats"):
        write_release(meas, tmp_path / "x", formats=("xlsx",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "rel"]  # no partial folder


def test_load_errors(codes, tmp_path):
    with pytest.raises(dm.ReleaseError, match="does not exist"):
        load_release(tmp_path / "nope")
    with pytest.raises(dm.ReleaseError, match="no manifest.json"):
        load_release(tmp_path)
    out = write_release(measure(codes, dm.Workload(DOM, [("age", "sex")])), tmp_path / "rel")
    # drop one residual's measurements: the release cannot be trusted any more
    import pyarrow.parquet as pq

    t = pq.read_table(out / MEASUREMENTS)
    pq.write_table(t.slice(1), out / MEASUREMENTS)
    with pytest.raises(dm.ReleaseError, match="modified"):  # the digest catches it first
        load_release(out).measurements
    with pytest.raises(dm.ReleaseError, match="missing"):
        load_release(out, verify=False).measurements
    (out / MANIFEST).write_text("{broken")
    with pytest.raises(dm.ReleaseError, match="not valid JSON"):
        load_release(out)
    (out / MANIFEST).write_text('{"format": "something else"}')
    with pytest.raises(dm.ReleaseError, match="manifest"):
        load_release(out)
