"""Workload specs on the command line and in JSON files (dpmatrix._workload_spec)."""

import itertools
import json

import numpy as np
import pytest

import dpmatrix as dm
from dpmatrix._workload_spec import WorkloadSpecError, parse_workload

DOM = dm.Domain.from_dict(
    {"age": {"size": 6, "kind": "ordinal"}, "sex": 2, "race": 3, "edu": {"size": 4, "kind": "ordinal"}}
)


def names(wk):
    return [wk.domain.names_of(s) for s in wk.sets]


def test_generators_match_workload_builders():
    assert names(parse_workload(DOM, "all:2")) == names(dm.Workload.marginals(DOM, 2))
    assert names(parse_workload(DOM, "k:3")) == names(dm.Workload.marginals(DOM, 3))
    upto = names(dm.Workload.marginals(DOM, 2, upto=True))
    for spec in ("all:<=2", "upto:2", "ALL : <= 2", "all:≤2"):
        assert names(parse_workload(DOM, spec)) == upto
    assert set(names(parse_workload(DOM, "small:12"))) == set(
        names(dm.Workload.small_marginals(DOM, 12))
    )


def test_marginals_weights_and_total():
    wk = parse_workload(DOM, " age , sex * 2 ; race;total*0.5")
    assert names(wk) == [("age", "sex"), ("race",), ()]
    assert wk.weights.tolist() == [2.0, 1.0, 0.5]
    # --workload and --marginals add up; an explicit marginal overrides a generated weight
    wk = parse_workload(DOM, "all:1*0.5", marginals="sex*3; age,edu")
    w = dict(zip(names(wk), wk.weights.tolist()))
    assert w[("sex",)] == 3.0 and w[("age",)] == 0.5 and w[("age", "edu")] == 1.0
    assert len(wk) == 5


def test_query_types_default_identity_and_explicit():
    wk = parse_workload(DOM, "all:1")
    assert wk.is_plain  # ordinal attributes are NOT silently turned into prefix queries
    wk = parse_workload(DOM, "all:1; age=prefix, edu=range")
    assert wk.attr_types[DOM.index("age")] == "prefix"
    assert wk.attr_types[DOM.index("edu")] == "range"
    wk = parse_workload(DOM, "age,sex", query_types="age=prefix")
    assert not wk.is_plain


def test_attribute_restriction():
    wk = parse_workload(DOM, "all:2", attributes="age,sex,race")
    assert names(wk) == [c for c in itertools.combinations(("age", "sex", "race"), 2)]


@pytest.mark.parametrize(
    "spec, match",
    [
        ("", "empty"),
        ("age,sex;sex,age", "listed twice"),
        ("all:x", "bad k"),
        ("all:9", "between 0 and 4"),
        ("small:0", "at least 1"),
        ("agee", "did you mean 'age'"),
        ("age,,sex", "empty attribute name"),
        ("age*two", "bad weight"),
        ("age*-1", "non-negative"),
        ("age=foo", "unknown query type"),
        ("age=prefix; age=range", "two query types"),
        ("age=prefix*2", "no weight"),
        ("age,sex=2", "name=type"),
        ("upto:<=2", "upto:K or all:<=K"),
    ],
)
def test_bad_specs(spec, match):
    with pytest.raises(dm.DPMatrixError, match=match):
        parse_workload(DOM, spec)


def test_json_file_forms(tmp_path):
    f = tmp_path / "wk.json"
    f.write_text(json.dumps({
        "marginals": ["all:<=1", ["age", "sex"], {"attributes": ["race", "edu"], "weight": 4,
                                                  "query_types": {"edu": "range"}}],
        "query_types": {"age": "prefix"},
    }))  # fmt: skip
    wk = parse_workload(DOM, file=f)
    w = dict(zip(names(wk), wk.weights.tolist()))
    assert w[("race", "edu")] == 4.0 and w[("age", "sex")] == 1.0 and w[()] == 1.0
    assert wk.attr_types[DOM.index("age")] == "prefix"
    assert wk.types(wk.index(("race", "edu"))) == ("identity", "range")
    # a .json name given as --workload is read as a file; a plain list is accepted
    g = tmp_path / "list.json"
    g.write_text(json.dumps([["age"], ["sex", "race"]]))
    assert names(parse_workload(DOM, str(g))) == [("age",), ("sex", "race")]
    # the workload of a saved plan / release manifest is a valid workload file
    wk0 = parse_workload(DOM, "age,sex*2; race")
    h = tmp_path / "plan-wk.json"
    h.write_text(json.dumps(wk0.to_dict()))
    wk1 = parse_workload(DOM, file=h)
    assert names(wk1) == names(wk0) and np.array_equal(wk1.weights, wk0.weights)


@pytest.mark.parametrize(
    "content, match",
    [
        ("{not json", "not valid JSON"),
        ('{"marginals": []}', "non-empty list"),
        ('{"marginals": [["age"]], "weights": [1, 2]}', "one number per entry"),
        ('{"marginals": [["age"]], "oops": 1}', "unknown key"),
        ('{"marginals": [{"attrs": ["age"]}]}', "needs 'attributes'"),
        ('{"marginals": [["age", 3]]}', "list of attribute names"),
        ('{"marginals": [{"attributes": ["age"], "query_types": {"sex": "prefix"}}]}', "not in the marginal"),
        ('"all:2"', "JSON list or object"),
    ],
)
def test_bad_json_files(tmp_path, content, match):
    f = tmp_path / "wk.json"
    f.write_text(content)
    with pytest.raises(WorkloadSpecError, match=match):
        parse_workload(DOM, file=f)


def test_missing_json_file(tmp_path):
    with pytest.raises(WorkloadSpecError, match="does not exist"):
        parse_workload(DOM, str(tmp_path / "nope.json"))
