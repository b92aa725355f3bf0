"""dpmatrix._table_text prints a saved table exactly as pandas does (the reference is pandas
itself: ``DataFrame.to_string(index=False)`` and ``to_csv(index=False)`` of the same columns,
held as ``Release.table`` holds them: int64 codes, float64 numbers, categorical labels)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpmatrix._table_text import to_csv, to_string

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def frame(columns, kinds, values, text_dtype="category") -> pd.DataFrame:
    data = {}
    for c, k, v in zip(columns, kinds, values):
        if k == "int":
            data[c] = pd.Series(v, dtype="int64")
        elif k == "float":
            data[c] = pd.Series(v, dtype="float64")
        elif text_dtype == "category":
            data[c] = pd.Categorical([None if x is None else str(x) for x in v])
        else:
            data[c] = pd.Series(v, dtype=text_dtype)
    return pd.DataFrame(data)


def pandas_string(df: pd.DataFrame) -> str:
    with pd.option_context("display.max_rows", None, "display.width", 200):  # as dpmatrix query
        return df.to_string(index=False)


# numbers as they occur in tables: counts, variances, rounded values, huge and tiny ones
finite = st.one_of(
    st.floats(-1e4, 1e4, allow_nan=False),
    st.floats(-1e4, 1e4, allow_nan=False).map(lambda v: round(v, 2)),
    st.integers(-5000, 5000).map(float),
    st.floats(-1e12, 1e12, allow_nan=False),
    st.floats(-1e-5, 1e-5, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1e6, 1e6 + 0.5, 999999.9999999, 1e-6, 5e-7, 123456.789, 1e16, 2.5e-300]),
)
number = st.one_of(finite, finite, finite, st.just(math.nan), st.sampled_from([math.inf, -math.inf]))
label = st.one_of(
    st.sampled_from(["F", "M", "<=50K", ">50K", "[0, 18)", "18..29", "< 40", "other", "Not-in-family"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60),
)
kind = st.sampled_from(["int", "float", "float", "text"])


@st.composite
def tables(draw):
    n_rows = draw(st.integers(1, 12))
    kinds = draw(st.lists(kind, min_size=1, max_size=7))
    names = draw(st.lists(st.sampled_from(["age", "sex", "x0", "income>50K", "a b", "estimate",
                                           "variance", "std", "lower", "upper", "n", "é"]),
                          min_size=len(kinds), max_size=len(kinds), unique=True))
    values = []
    for k in kinds:
        if k == "int":
            values.append(draw(st.lists(st.integers(-(2**40), 2**40), min_size=n_rows, max_size=n_rows)))
        elif k == "float":
            values.append(draw(st.lists(number, min_size=n_rows, max_size=n_rows)))
        else:
            values.append(draw(st.lists(label, min_size=n_rows, max_size=n_rows)))
    return names, kinds, values


@SETTINGS
@given(tables())
def test_to_string_is_pandas_to_string(table):
    names, kinds, values = table
    assert to_string(names, kinds, values) == pandas_string(frame(names, kinds, values))


@SETTINGS
@given(tables())
def test_to_csv_is_pandas_to_csv(table):
    """pandas' CSV of the same table once every text cell a spreadsheet would run as a formula
    has its leading quote (dpmatrix._csv_cells)."""
    from dpmatrix._csv_cells import escape

    names, kinds, values = table
    safe = [[v if k != "text" or v is None or v != v else escape(str(v)) for v in col]
            for k, col in zip(kinds, values)]  # fmt: skip
    assert to_csv(names, kinds, values) == frame(names, kinds, safe).to_csv(index=False)


@pytest.mark.parametrize("text_dtype", [object, "str"])
def test_plain_text_columns_print_as_categoricals(text_dtype):
    """Tables of plans that list their mechanisms keep their text columns as written."""
    names, kinds = ["race", "estimate"], ["text", "float"]
    values = [["White", "Asian-Pac-Islander", "Other"], [10.5, -2.25, 3e-7]]
    df = frame(names, kinds, values, text_dtype=text_dtype)
    assert to_string(names, kinds, values) == pandas_string(df)
    assert to_csv(names, kinds, values) == df.to_csv(index=False)


def test_a_release_table_by_hand():
    """The layout written out: right-justified columns, one space apart, numeric headers with a
    leading space, shared trailing zeros dropped."""
    got = to_string(["age", "n", "estimate"], ["text", "int", "float"],
                    [["[0, 20)", "[20, 40)"], [0, 12], [1.5, -20.25]])  # fmt: skip
    assert got == "     age  n  estimate\n" " [0, 20)  0      1.50\n" "[20, 40) 12    -20.25"
    # a value above 1e6 keeps the fixed form while it fits in 12 characters
    assert to_string(["v"], ["float"], [[2e6, 1.0]]) == " " * 8 + "v\n" "2000000.0\n" "      1.0"
    # a nonzero value below 1e-6 would print as 0.000000: scientific form for the column
    assert to_string(["v"], ["float"], [[2e-7, 1.0]]) == " " * 11 + "v\n" "2.000000e-07\n" "1.000000e+00"


def test_frame_helper_builds_what_release_table_builds():
    df = frame(["a", "b", "c"], ["int", "float", "text"], [[1], [np.float64(0.5)], ["x"]])
    assert [str(t) for t in df.dtypes] == ["int64", "float64", "category"]
