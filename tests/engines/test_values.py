"""The one value-matching rule (dpmatrix._values) and first-class missing values, on every engine.

Expected codes and counts are written by hand from the rule's statement (module docstring of
``dpmatrix._values``), never produced by the encoders under test."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix._domain import MISSING_LABEL, Attribute, Domain, with_missing
from dpmatrix._encode import encode_frame
from dpmatrix._values import LabelIndex, code_of, is_missing, parse_number, value_key
from dpmatrix.engines import engine_for
from dpmatrix.engines._infer import infer_domain_report
from dpmatrix.errors import DataError, DomainError, WorkloadError


def test_numeric_forms_of_a_label_match():
    ix = LabelIndex.of(("0", "1", "2", "03", "3"))
    assert [ix.code(v) for v in (1, 1.0, "1", "1.0", " 1", np.int64(1), np.float32(1.0))] == [1] * 7
    # exact text first: "03" is its own label, "3.0" the number 3 -> the first label that is 3
    assert ix.code("03") == 3 and ix.code("3") == 4 and ix.code("3.0") == 3
    assert ix.code(True) is None and ix.code("x") is None and ix.code(None) is None
    assert parse_number("1e3") == 1000.0 and parse_number("inf") is None and parse_number("5'7\"") is None
    assert value_key(2.5) == "2.5" and value_key(float("nan")) is None


def test_missing_markers():
    assert is_missing(None) and is_missing(np.nan) and is_missing(pd.NA) and is_missing("  ")
    assert not is_missing("NA") and is_missing("NA", ["NA"]) and is_missing(" ? ", ["?"])
    assert not is_missing(0) and not is_missing("0")


def test_code_of_bins_with_and_without_labels_and_its_errors():
    age = Attribute("age", 3, "ordinal", bins=(0, 18, 65, 120))
    labelled = Attribute("age", 3, "ordinal", ("young", "adult", "old"), bins=(0, 18, 65, 120))
    for a in (age, labelled):
        assert [code_of(a, v) for v in (0, 17.9, "18", 65, 120)] == [0, 0, 1, 2, 2]
    assert code_of(labelled, "old") == 2
    with pytest.raises(WorkloadError, match=r"outside the bins of 'age' \[0, 120\]; the bin edges are 0, 18, 65, 120"):
        code_of(age, 130)
    kids = Attribute("kids", 3, "ordinal", ("0", "1", "2"))
    with pytest.raises(WorkloadError, match=r"'7' is not a value of 'kids' \(labels: '0', '1', '2'\)"):
        code_of(kids, "7")
    plain = Attribute("n", 4)
    assert code_of(plain, 3) == 3 and code_of(plain, "3") == 3
    with pytest.raises(WorkloadError, match="integer codes 0..3"):
        code_of(plain, 4)


def test_missing_policy_in_the_domain_file_round_trips():
    d = Domain.from_dict({
        "kids": {"labels": ["0", "1"], "missing": "category"},
        "wage": {"bins": [0, 10, 20], "missing": "category"},
        "sex": {"labels": ["F", "M"], "missing": "drop"},
    })  # fmt: skip
    assert d["kids"].labels == ("0", "1", MISSING_LABEL) and d["kids"].size == 3
    assert d["wage"].size == 3 and d["wage"].label(2) == MISSING_LABEL and d["wage"].missing_code == 2
    assert d["sex"].size == 2 and d["sex"].missing_code is None
    assert Domain.from_dict(d.to_dict()) == d
    assert with_missing(with_missing(d, "error"), {"kids": "category", "wage": "category", "sex": "drop"}) == d
    with pytest.raises(DomainError, match="missing must be one of"):
        Domain.from_dict({"a": {"labels": ["x", "y"], "missing": "skip"}})
    with pytest.raises(DomainError, match="reserved for missing values"):
        Domain.from_dict({"a": {"labels": ["x", MISSING_LABEL]}})


FRAME = pd.DataFrame({
    # floats holding integers with a NaN (as pandas writes an integer column with a gap)
    "kids": [0.0, 1.0, 1.0, np.nan, 2.0, 1.0, np.nan, 0.0],
    "yn": ["yes", "no", "?", "yes", None, "no", "yes", "NA"],
    "wage": [5.0, 15.0, np.nan, 19.5, 0.0, 20.0, 7.0, np.nan],
    "unused": [np.nan] * 8,  # never read: a release that does not use it must not fail on it
})  # fmt: skip
DOMAIN = Domain.from_dict({
    "kids": {"labels": ["0", "1", "2"], "missing": "category"},
    "yn": {"labels": ["no", "yes"], "missing": "drop"},
    "wage": {"bins": [0, 10, 20], "missing": "category"},
    "unused": {"labels": ["a", "b"]},
})  # fmt: skip
NA = ["?", "NA"]
# by hand: rows 2 ("?"), 4 (None), 7 ("NA") have yn missing -> dropped; rows kept 0,1,3,5,6
KIDS = [1, 2, 0, 1]  # kids of rows 0,1,3,5,6 = 0, 1, nan, 1, nan -> codes 0,1,3,1,3
WAGE = [2, 2, 0, 0]  # wage 5, 15, 19.5, 20, 7 -> bins 0,1,1,1,0 (20 in the closed last bin)


def _engines(tmp_path):
    csv = tmp_path / "x.csv"
    FRAME.to_csv(csv, index=False)
    pq = tmp_path / "x.parquet"
    FRAME.to_parquet(pq)
    text = pd.read_csv(csv, dtype=str, keep_default_na=False)
    used = (0, 1, 2)
    return {
        "numpy-frame": engine_for(FRAME, DOMAIN, encoding="raw", na_values=NA, attributes=used),
        "numpy-csv-text": engine_for(text, DOMAIN, encoding="raw", na_values=NA, attributes=used),
        "duckdb-csv": engine_for(str(csv), DOMAIN, encoding="raw", na_values=NA, attributes=used),
        "duckdb-parquet": engine_for(str(pq), DOMAIN, encoding="raw", na_values=NA, attributes=used),
    }


def test_engines_agree_on_missing_values_and_numeric_forms(tmp_path):
    for name, eng in _engines(tmp_path).items():
        t = eng.count([(0,), (1,), (2,), (0, 2)])
        assert eng.n_records == 5, name
        assert t[(0,)].tolist() == [1, 2, 0, 2], name  # 0, 1, 2, (missing)
        assert t[(1,)].tolist() == [2, 3], name  # no, yes
        assert t[(2,)].tolist() == [2, 3, 0], name  # [0,10), [10,20], (missing)
        assert int(t[(0, 2)][3, 0]) == 1, name  # kids missing (row 6), wage 7
        if hasattr(eng, "close"):
            eng.close()


def test_unused_attributes_are_not_read_but_used_ones_are(tmp_path):
    with pytest.raises(DataError, match="'unused': 8 rows with a missing value"):
        engine_for(FRAME, DOMAIN, encoding="raw", na_values=NA)
    # without the declared markers "?" and "NA" are values no label matches
    with pytest.raises(DataError) as err:
        engine_for(FRAME, DOMAIN, encoding="raw", attributes=(1,))
    msg = str(err.value)
    assert "column 'yn': 2 rows with a value that matches no label: '?' (1 row), 'NA' (1 row)" in msg
    assert "the labels are 'no', 'yes'" in msg and "fix:" in msg


def test_drop_removes_rows_from_every_marginal_and_errors_name_the_fix():
    d = with_missing(DOMAIN, {"kids": "error"})
    with pytest.raises(DataError) as err:
        encode_frame(FRAME[["kids", "yn", "wage"]], Domain(d.attributes[:3]), na_values=NA)
    msg = str(err.value)
    # rows 3 and 6 have kids missing
    assert "column 'kids': 2 rows with a missing value" in msg
    assert "\"missing\": \"category\"" in msg and "--missing kids=category" in msg


def test_measure_and_query_read_the_same_values(tmp_path):
    csv = tmp_path / "x.csv"
    FRAME.to_csv(csv, index=False)
    plan = dm.plan(dm.Workload(DOMAIN, [("kids",), ("yn",), ("wage",)]), rho=1e8)
    meas = dm.measure(plan, str(csv), na_values=NA, rng=np.random.default_rng(0))
    # 3, 3.0 and "3" address label "1" alike; wage numbers fall into bins; "(missing)" is a label
    for v in (1, 1.0, "1", "1.0"):
        assert meas.query({"kids": v}).estimate == pytest.approx(2, abs=0.05)
    assert meas.query({"kids": MISSING_LABEL}).estimate == pytest.approx(2, abs=0.05)
    assert meas.query({"wage": (10, 20)}).estimate == pytest.approx(3, abs=0.05)
    assert meas.query({"wage": 7}).estimate == pytest.approx(2, abs=0.05)
    assert meas.query({"yn": "yes"}).estimate == pytest.approx(3, abs=0.05)


def test_infer_domain_round_trips_on_csv_and_parquet(tmp_path):
    csv, pq = tmp_path / "x.csv", tmp_path / "x.parquet"
    FRAME.to_csv(csv, index=False)
    FRAME.to_parquet(pq)
    for src in (str(csv), str(pq), FRAME):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = infer_domain_report(src, na_values=NA, n_bins=2)
        d = rep.domain
        assert d["kids"].labels == ("0", "1", "2", MISSING_LABEL), src
        assert d["yn"].labels == ("no", "yes", MISSING_LABEL), src
        assert d["wage"].bins == (0.0, 10.0, 20.0) and d["wage"].missing == "category", src
        assert rep.missing == {"kids": 2, "yn": 3, "wage": 2}, src
        assert rep.left_out == {"unused": "every value is missing"}, src
        eng = engine_for(src, d, encoding="raw", na_values=NA)
        assert eng.n_records == 8
        t = eng.count([(0,), (1,)])
        assert t[(0,)].tolist() == [2, 3, 1, 2] and t[(1,)].tolist() == [2, 3, 3], src


def test_header_differing_in_case_or_spaces_gets_a_did_you_mean():
    d = Domain.from_dict({"age": {"labels": ["1", "2"]}, "sex": {"labels": ["F", "M"]}})
    df = pd.DataFrame({"Age": [1, 2], "sex ": ["F", "M"]})
    with pytest.raises(DataError) as err:
        encode_frame(df, d)
    msg = str(err.value)
    assert "'age' -> did you mean 'Age'?" in msg and "'sex' -> did you mean 'sex '?" in msg
