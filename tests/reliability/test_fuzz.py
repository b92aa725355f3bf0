"""Hypothesis-driven fuzzing of domain files, plan files, data files and CLI arguments: every
case either works or ends in a typed error / one-line CLI error — never a traceback, an internal
error, or a release with a wrong privacy statement."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpmatrix as dm
from dpmatrix._plan_file import load_plan
from dpmatrix.cli import main
from dpmatrix.errors import DPMatrixError

from ._support import DOMAIN, NO_REPORT, frame

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), st.sampled_from(["nan", "inf", "-inf", "NaN", "", "1e400"]),
)
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=5) | st.dictionaries(
    st.sampled_from(["size", "labels", "bins", "other", "x", "a"]), c, max_size=4), max_leaves=12)


def _dump(v) -> str:
    # json.dumps writes NaN / Infinity for non-finite floats: exactly the non-standard input
    # the loader must refuse
    return json.dumps(v)


@SETTINGS
@given(st.dictionaries(st.text(min_size=0, max_size=4), json_values, max_size=4))
def test_domain_files(tmp_path_factory, spec):
    path = tmp_path_factory.mktemp("dom") / "d.json"
    path.write_text(_dump(spec))
    try:
        dom = dm.Domain.from_json(path)
    except DPMatrixError:
        return
    assert all(s >= 1 for s in dom.sizes)


@SETTINGS
@given(st.binary(max_size=40))
def test_domain_files_raw_bytes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("dom") / "d.json"
    path.write_bytes(b'{"a": ' + data)
    with pytest.raises(DPMatrixError):
        dm.Domain.from_json(path)


@pytest.fixture(scope="module")
def plan_spec():
    dom = dm.Domain.from_dict(DOMAIN)
    return json.loads(dm.plan(dm.Workload(dom, [("age", "sex"), ("smoker", "n")]), rho=0.5).to_json())


@SETTINGS
@given(data=st.data())
def test_plan_files(tmp_path_factory, plan_spec, data):
    spec = json.loads(json.dumps(plan_spec))
    action = data.draw(st.sampled_from(["sigma2", "drop_key", "attributes", "privacy", "objective"]))
    i = data.draw(st.integers(0, len(spec["residuals"]) - 1))
    if action == "sigma2":
        spec["residuals"][i]["sigma2"] = data.draw(scalars)
    elif action == "drop_key":
        spec.pop(data.draw(st.sampled_from(sorted(spec))))
    elif action == "attributes":
        spec["residuals"][i]["attributes"] = data.draw(json_values)
    elif action == "privacy":
        spec["privacy"]["rho"] = data.draw(scalars)
    else:
        spec["objective"] = data.draw(scalars)
    path = tmp_path_factory.mktemp("plan") / "p.json"
    path.write_text(_dump(spec))
    try:
        plan = load_plan(path)
    except DPMatrixError:
        return
    # accepted: every noise scale is a positive number, so the privacy cost is meaningful
    assert all(s > 0 for s in plan.sigma2) and math.isfinite(plan.rho) and plan.rho > 0


@pytest.fixture(scope="module")
def cli_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    frame(n=60).to_csv(d / "people.csv", index=False)
    (d / "domain.json").write_text(json.dumps(DOMAIN))
    return d


OPTION_VALUES = {
    "--rho": ["0.5", "0", "-1", "nan", "inf", "1e-300", "x"],
    "--epsilon": ["1", "-2", "nan"],
    "--delta": ["1e-9", "0.5", "1", "0", "-1e-9", "1e-4"],
    "--mu": ["1", "0"],
    "--workload": ["all:1", "all:<=2", "age,sex", "nope", "all:9", ";", "age,age", "total", "age*-1"],
    "--tables": ["csv", "xlsx", "", "parquet,csv", ","],
    "--level": ["0.9", "1", "0", "2", "nan"],
    "--on-unknown": ["error", "clip", "drop", "age=clip", "=", "age=", "sex=other"],
    "--engine": ["numpy", "duckdb"],
    "--max-cells": ["1", "0", "-5", "1000000"],
    "--noise": ["gaussian", "discrete_gaussian"],
    "--delimiter": [",", ";", "ab"],
    "--data-format": ["csv", "parquet"],
    "--seed": ["1", "-1"],
    "--dataset": ["", "people", " "],
}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(sorted(OPTION_VALUES)), max_size=5, unique=True), st.data())
def test_cli_release_arguments(cli_data, tmp_path_factory, capsys, options, data):
    out = tmp_path_factory.mktemp("out") / "rel"
    argv = ["release", str(cli_data / "people.csv"), "--domain", str(cli_data / "domain.json"), "--out", str(out),
            "--ledger", str(out.parent / "l.sqlite3"), "-q"]  # fmt: skip
    for o in options:
        argv += [o, data.draw(st.sampled_from(OPTION_VALUES[o]))]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own usage error (exit status 2)
        assert exc.code == 2
        return
    _, err = capsys.readouterr()
    assert rc in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err, err
    if rc == 2:
        assert sum(ln.startswith("dpmatrix: error:") for ln in err.splitlines()) == 1, err
        assert not out.exists()
    else:
        rel = dm.load_release(out)
        assert rel.privacy["rho"] > 0 and rel.privacy["delta"] < 1e-3


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["--marginal", "--marginal-json", "--level", "--format"]), st.text(max_size=12))
def test_cli_query_arguments(cli_data, tmp_path_factory, capsys, option, value):
    rel = cli_data / "rel-for-query"
    if not rel.exists():
        assert main(["release", str(cli_data / "people.csv"), "--domain", str(cli_data / "domain.json"), "-w",
                     "all:<=2", "--rho", "1", "--out", str(rel), "--ledger", str(cli_data / "l.sqlite3"), "-q",
                     NO_REPORT]) == 0  # fmt: skip
        capsys.readouterr()
    try:
        rc = main(["query", str(rel), option, value])
    except SystemExit as exc:
        assert exc.code == 2
        return
    _, err = capsys.readouterr()
    assert rc in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err, err


FUZZ_DOMAIN = {"sex": {"labels": ["F", "M", "NA"]}, "n": 3, "age": {"bins": [0, 30, 60, 120]}}
CELL = {
    "sex": ["F", "M", "NA", "", "f", "None", "null", " M", "1"],
    "n": ["0", "1", "2", "3", "01", "", "1.0", "-1", "x", "nan", "1e0"],
    "age": ["0", "29.5", "30", "119", "120", "121", "-1", "", "abc", "1e1", "NaN"],
}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(*(st.sampled_from(v) for v in CELL.values())), min_size=1, max_size=25),
       st.sampled_from(["error", "clip"]))
def test_data_files_both_engines_agree(tmp_path_factory, rows, policy):
    """Random CSV cells (valid, unknown, empty, look-alike numbers): the numpy and DuckDB engines
    either both refuse with the same DataError message or count the same tables."""
    import csv
    import io
    import warnings

    import numpy as np

    from dpmatrix._encode import encode_frame, read_csv_text
    from dpmatrix.engines import DuckDBEngine, NumpyEngine
    from dpmatrix.errors import DataError

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(list(CELL))
    w.writerows(rows)
    path = tmp_path_factory.mktemp("data") / "d.csv"
    path.write_text(buf.getvalue())
    dom = dm.Domain.from_dict(FUZZ_DOMAIN)
    sets = [(0,), (1,), (2,), (0, 1, 2)]
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for engine in ("numpy", "duckdb"):
            try:
                if engine == "numpy":
                    counts = NumpyEngine(encode_frame(read_csv_text(str(path), dom), dom, on_unknown=policy), dom).count(sets)
                else:
                    with DuckDBEngine(path, dom, encoding="raw", on_unknown=policy) as de:
                        counts = de.count(sets)
                results.append(("ok", {s: np.asarray(counts[s]).tolist() for s in sets}))
            except DataError as exc:
                results.append(("error", str(exc)))
    assert results[0] == results[1]
