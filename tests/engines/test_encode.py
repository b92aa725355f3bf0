"""Raw values -> codes (pandas and DuckDB SQL), domain bins, opt-in domain inference."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from dpmatrix._domain import Attribute, Domain
from dpmatrix._encode import (
    InferredDomainWarning,
    RemappedValuesWarning,
    encode_frame,
    label_key,
    read_csv_text,
)
from dpmatrix.engines._base import marginals_from_maximal
from dpmatrix.engines._duckdb_engine import DuckDBEngine
from dpmatrix.engines._infer import infer_domain
from dpmatrix.engines._numpy_engine import NumpyEngine
from dpmatrix.errors import DataError, DomainError, UnknownAttributeError

SPEC = {
    "age": {"bins": [0, 18, 65, 120]},  # 3 bins, ordinal by default
    "color": {"labels": ["red", "green", "blue"]},
    "grade": {"labels": ["1", "2", "3", "other"], "kind": "ordinal"},
    "income": {"bins": [0, 1000.5, 50000], "labels": ["low", "high", "other"]},
    "n": 4,  # raw values are codes 0..3
}


@pytest.fixture()
def domain() -> Domain:
    return Domain.from_dict(SPEC)


def clean_frame(n: int = 400, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.uniform(0, 120, n).round(1),
            "color": rng.choice(["red", "green", "blue"], n),
            "grade": rng.integers(1, 4, n),
            "income": rng.uniform(0, 50000, n).round(2),
            "n": rng.integers(0, 4, n),
            "unused": "zzz",
        }
    )


# -- domain: bins in the rich form ---------------------------------------------------------------
def test_domain_bins_parse_and_round_trip(domain, tmp_path):
    age = domain["age"]
    assert age.size == 3 and age.kind == "ordinal" and age.bins == (0.0, 18.0, 65.0, 120.0)
    assert age.label(0) == "[0, 18)" and age.label(2) == "[65, 120]"
    assert domain["income"].size == 3 and domain["income"].other_code == 2
    assert domain["grade"].other_code == 3 and domain["color"].other_code is None
    spec = domain.to_dict()
    assert spec["age"]["bins"] == [0, 18, 65, 120]
    assert spec["income"]["bins"] == [0, 1000.5, 50000]
    p = tmp_path / "dom.json"
    p.write_text(json.dumps(spec))
    assert Domain.from_json(p) == domain
    # the private-pgm form is unchanged
    assert Domain.from_dict({"a": 3, "b": 2}).to_dict() == {"a": 3, "b": 2}


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"x": {"bins": [0, 5, 5]}}, "strictly increasing"),
        ({"x": {"bins": [0, 1, 2], "size": 4}}, "define 2 bins but size is 4"),
        ({"x": {"bins": [0, 1, 2], "size": 3}}, "catch-all"),
        ({"x": {"bins": [0, 1, 2], "labels": ["a", "b", "c"]}}, "catch-all"),
        ({"x": {"bins": [0, "a", 2]}}, "list of numbers"),
        ({"x": {"bins": [0, 1, float("inf")]}}, "finite"),
        ({"x": {"bins": [0]}}, "at least 2"),
        ({"x": {}}, "give 'size', 'labels' or 'bins'"),
    ],
)
def test_domain_bad_bins(spec, match):
    with pytest.raises(DomainError, match=match):
        Domain.from_dict(spec)


def test_attribute_bins_keyword_keeps_signature():
    a = Attribute("x", 2, "ordinal", None, {}, bins=(0, 1, 2))
    assert a.bins == (0.0, 1.0, 2.0)
    assert Attribute("y", 3).bins is None


# -- pandas encoding -----------------------------------------------------------------------------
def test_encode_frame_maps_labels_bins_codes(domain):
    df = pd.DataFrame(
        {
            "age": [0, 17.9, 18, 64.99, 65, 120],
            "color": ["red", "blue", "green", "red", "blue", "green"],
            "grade": [1, 2.0, "3", "other", 1, 3],
            "income": [0, 1000.49, 1000.5, 50000, 7, 8],
            "n": [0, 1, 2, 3, 3.0, 0],
        }
    )
    codes = encode_frame(df, domain)
    assert list(codes.columns) == list(domain.names)
    assert codes["age"].tolist() == [0, 0, 1, 1, 2, 2]  # last bin closed
    assert codes["color"].tolist() == [0, 2, 1, 0, 2, 1]
    assert codes["grade"].tolist() == [0, 1, 2, 3, 0, 2]
    assert codes["income"].tolist() == [0, 0, 1, 1, 0, 0]
    assert codes["n"].tolist() == [0, 1, 2, 3, 3, 0]
    assert all(codes[c].dtype == np.uint8 for c in codes)


def test_label_key():
    assert [label_key(v) for v in (3, 3.0, "3", np.int64(3), 2.5, True, None, np.nan)] == [
        "3", "3", "3", "3", "2.5", "True", None, None,
    ]  # fmt: skip


def test_unknown_values_are_errors_naming_column_values_rows(domain):
    df = clean_frame(20)
    df.loc[[0, 1, 2], "age"] = [-5, 130, 130]
    df.loc[[3, 4], "color"] = ["purple", "Red"]
    df.loc[[5], "n"] = 4
    df.loc[[6, 7], "income"] = np.nan
    with pytest.raises(DataError) as err:
        encode_frame(df, domain)
    msg = str(err.value)
    assert ("column 'age': 3 rows with a value that is not a number inside the bins [0, 120]: "
            "130 (2 rows), -5 (1 row)") in msg
    assert "the bin edges are 0, 18, 65, 120" in msg
    assert "column 'color': 2 rows with a value that matches no label: 'Red' (1 row), 'purple' (1 row)" in msg
    assert "the labels are 'red', 'green', 'blue'" in msg
    assert "column 'n': 1 row with a value that is not an integer code 0..3: 4 (1 row)" in msg
    assert "column 'income': 2 rows with a missing value" in msg
    assert "--missing income=category" in msg  # the fix for a missing value
    assert "on_unknown='clip'" in msg  # says how to opt in


def test_clip_is_explicit_and_reported(domain):
    df = clean_frame(10)
    df.loc[[0, 1], "age"] = [-5, 999]
    df.loc[[2], "n"] = 7
    with pytest.warns(RemappedValuesWarning, match="'age': 2 rows clipped") as rec:
        codes = encode_frame(df, domain, on_unknown="clip")
    assert "'n': 1 row clipped" in str(rec[0].message)
    assert codes.loc[0, "age"] == 0 and codes.loc[1, "age"] == 2 and codes.loc[2, "n"] == 3
    # clip does not apply to labels, missing or non-numeric values
    df.loc[[3], "color"] = "purple"
    df.loc[[4], "age"] = np.nan
    df["n"] = df["n"].astype(float)
    df.loc[[5], "n"] = 1.5
    with pytest.raises(DataError) as err:
        encode_frame(df, domain, on_unknown="clip")
    msg = str(err.value)
    assert "'color': 1 row with a value that matches no label: 'purple' (1 row)" in msg
    assert "(on_unknown='clip' does not apply" in msg
    assert "'age': 1 row with a missing value" in msg  # missing is the attribute's missing policy
    assert "'n': 1 row with a value that is not an integer code 0..3: 1.5 (1 row)" in msg


def test_other_requires_an_other_label(domain):
    df = clean_frame(10).astype({"grade": object})
    df.loc[[0, 1], "grade"] = [7, "x"]
    df.loc[[2], "income"] = 60000
    with pytest.warns(RemappedValuesWarning, match="'grade': 2 rows sent to code 3"):
        codes = encode_frame(df, domain, on_unknown="other")
    assert codes["grade"].tolist()[:2] == [3, 3]
    assert codes["income"].tolist()[2] == 2
    # a missing value is not an unknown value: "other" does not take it (missing= decides)
    df.loc[[3], "income"] = np.nan
    with pytest.raises(DataError, match="'income': 1 row with a missing value"):
        encode_frame(df, domain, on_unknown="other")
    df.loc[[3], "income"] = 7
    df.loc[[4], "color"] = "purple"
    with pytest.raises(DataError, match="needs a label 'other'"):
        encode_frame(df, domain, on_unknown="other")
    # per-column policies; other columns stay strict (an error: nothing to warn about)
    with pytest.raises(DataError, match="'color'") as err:
        encode_frame(df, domain, on_unknown={"grade": "other", "income": "other"})
    assert "'grade'" not in str(err.value)
    with pytest.raises(UnknownAttributeError, match="did you mean 'grade'"):
        encode_frame(df, domain, on_unknown={"grad": "other"})
    with pytest.raises(ValueError, match="on_unknown"):
        encode_frame(df, domain, on_unknown="drop")


def test_no_warning_when_nothing_remapped(domain):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encode_frame(clean_frame(50), domain, on_unknown="clip")


def test_missing_columns(domain):
    with pytest.raises(DataError, match="lack column.*'color', 'n'"):
        encode_frame(clean_frame(5).drop(columns=["color", "n"]), domain)


# -- the same mapping inside DuckDB --------------------------------------------------------------
def raw_frame_with_problems() -> pd.DataFrame:
    df = clean_frame(300, seed=11)
    df.loc[[0, 1, 2], "age"] = [-5.0, 130.0, 500.0]
    df.loc[[3, 4], "color"] = ["purple", "Red"]
    df.loc[[5, 6], "grade"] = [9, 0]
    df.loc[[7], "income"] = 60000.0
    df.loc[[8], "n"] = 5
    return df


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_duckdb_raw_encoding_identical(domain, tmp_path, fmt):
    sets = [c for k in range(3) for c in itertools.combinations(range(len(domain)), k)]
    for df, policy in [(clean_frame(), "error"), (raw_frame_with_problems(), {
        "age": "clip", "grade": "other", "income": "other", "n": "clip", "color": "error"})]:  # fmt: skip
        if policy != "error":
            df = df.drop(index=[3, 4])  # color has no 'other' label
        path = tmp_path / f"raw.{fmt}"
        df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
        back = pd.read_csv(path) if fmt == "csv" else df
        with warnings.catch_warnings(record=True) as w_np:
            warnings.simplefilter("always")
            ne = NumpyEngine(encode_frame(back, domain, on_unknown=policy), domain)
        with warnings.catch_warnings(record=True) as w_db:
            warnings.simplefilter("always")
            de = DuckDBEngine(path, domain, encoding="raw", on_unknown=policy)
        assert [str(x.message) for x in w_np] == [str(x.message) for x in w_db]
        assert len(w_db) == (0 if policy == "error" else 1)
        with de:
            a, b = marginals_from_maximal(ne, sets), marginals_from_maximal(de, sets)
        for s in sets:
            assert np.array_equal(a[s], b[s]), s


@pytest.mark.parametrize("policy", ["error", "clip", "other"])
def test_duckdb_raw_errors_identical(domain, tmp_path, policy):
    df = raw_frame_with_problems()
    df.loc[[9], "age"] = np.nan
    path = tmp_path / "raw.csv"
    df.to_csv(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RemappedValuesWarning)
        with pytest.raises(DataError) as e_np:
            # both engines read CSV values as text
            encode_frame(read_csv_text(str(path), domain), domain, on_unknown=policy)
        with pytest.raises(DataError) as e_db:
            DuckDBEngine(path, domain, encoding="raw", on_unknown=policy)
    assert str(e_np.value) == str(e_db.value)
    assert "column 'color': 2 rows" in str(e_db.value)


def test_numpy_engine_from_raw(domain):
    df = clean_frame(100)
    e = NumpyEngine.from_raw(df, domain)
    assert e.n_records == 100 and int(e.count([(0,)])[(0,)].sum()) == 100


# -- domain inference: opt-in with a privacy warning ---------------------------------------------
def test_infer_domain_warns_and_fits_the_data(tmp_path):
    df = clean_frame(200).drop(columns=["unused"])
    with pytest.warns(InferredDomainWarning, match="NOT covered by the differential-privacy"):
        dom = infer_domain(df)
    assert issubclass(InferredDomainWarning, UserWarning)
    assert dom["color"].labels == ("blue", "green", "red")
    assert dom["grade"].labels == ("1", "2", "3") and dom["grade"].kind == "ordinal"
    assert dom["age"].bins is not None and dom["age"].size == 10
    assert dom["n"].labels == ("0", "1", "2", "3")
    codes = encode_frame(df, dom)  # every value of the data is covered
    assert len(codes) == 200
    path = tmp_path / "d.parquet"
    df.to_parquet(path, index=False)
    with pytest.warns(InferredDomainWarning):
        dom2 = infer_domain(path)
    assert dom2 == dom
    with pytest.warns(InferredDomainWarning):
        one = infer_domain(pd.DataFrame({"c": ["a", "a"]}))
    assert one["c"].labels == ("a", "other")
