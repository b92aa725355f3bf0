"""Bad plan/domain files refused at load with typed errors; budgets and
delta checked; every option checked before the data is read; `query | head` exits quietly."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

import dpmatrix as dm
from dpmatrix._plan_file import load_plan
from dpmatrix._statement import LargeDeltaWarning, check_delta
from dpmatrix.errors import BudgetError, DomainError, PlanError

from ._support import DOMAIN, NO_REPORT, assert_one_line_error, env, release_args, run


def _plan_file(tmp_path, mutate) -> str:
    dom = dm.Domain.from_dict(DOMAIN)
    plan = dm.plan(dm.Workload.all_marginals(dom, 2) if hasattr(dm.Workload, "all_marginals") else
                   dm.Workload(dom, [("age", "sex"), ("smoker", "n")]), rho=0.5)  # fmt: skip
    text = mutate(plan.to_json())
    p = tmp_path / "plan.json"
    p.write_text(text)
    return str(p)


def _first_sigma(text: str, new: str) -> str:
    spec = json.loads(text)
    measured = next(r for r in spec["residuals"] if r["sigma2"] != "inf")
    marker = json.dumps(measured["attributes"])
    spec_text = json.dumps(spec)
    i = spec_text.index(marker)
    j = spec_text.index('"sigma2": ', i) + len('"sigma2": ')
    k = min(x for x in (spec_text.index(",", j), spec_text.index("}", j)))
    return spec_text[:j] + new + spec_text[k:]


@pytest.mark.parametrize(
    "bad, needle",
    [
        ("-0.5", "sigma2 must be a positive number"),
        ("0", "sigma2 must be a positive number"),
        ('"nan"', "sigma2 must be a positive number"),
        ('"abc"', "sigma2 must be a positive number"),
        ("true", "sigma2 must be a positive number"),
        ("NaN", "NaN is not a JSON number"),
        ("Infinity", "Infinity is not a JSON number"),
    ],
)
def test_plan_file_with_bad_sigma2_is_refused_at_load(tmp_path, small, capsys, bad, needle):
    path = _plan_file(tmp_path, lambda t: _first_sigma(t, bad))
    with pytest.raises(PlanError, match=needle):
        load_plan(path)
    argv = ["release", small / "people.csv", "--plan", path, "--out", tmp_path / "o",
            "--ledger", small / "l.sqlite3"]  # fmt: skip
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, needle)
    assert not (tmp_path / "o").exists()


def test_duplicate_keys_are_refused(tmp_path):
    path = _plan_file(tmp_path, lambda t: t.replace('"objective":', '"objective": "sum_var", "objective":', 1))
    with pytest.raises(PlanError, match="key 'objective' appears twice"):
        load_plan(path)
    d = tmp_path / "d.json"
    d.write_text('{"a": 2, "b": 3, "a": 4}')
    with pytest.raises(DomainError, match="key 'a' appears twice"):
        dm.Domain.from_json(d)


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": {"bins": [0, NaN, 3]}}', '{"a": {"labels": ["x", NaN]}}'])
def test_nan_in_domain_file_is_refused(tmp_path, text):
    d = tmp_path / "d.json"
    d.write_text(text)
    with pytest.raises(DomainError, match="NaN is not a JSON number"):
        dm.Domain.from_json(d)


@pytest.mark.parametrize("value", ["1", b"1", True])
def test_budget_must_be_a_number(value):
    wk = dm.Workload(dm.Domain.from_dict({"a": 2, "b": 3}), [("a", "b")])
    with pytest.raises(BudgetError, match="must be a number"):
        dm.plan(wk, rho=value)


def test_delta_policy():
    assert check_delta(1e-9) == 1e-9
    for bad in (0.5, 1.0, 2.0, 1e-3, 0.0, -1e-9, float("nan"), "1e-9"):
        with pytest.raises(BudgetError):
            check_delta(bad)
    with pytest.warns(LargeDeltaWarning):
        check_delta(1e-5)


def _ledger_rows(path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(path) as con:
        return con.execute("SELECT COUNT(*) FROM spends").fetchone()[0]


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--tables", "xlsx"], "--tables"),
        (["--delta", "0.5"], "--delta"),
        (["--level", "1.5"], "--level"),
        (["--on-unknown", "drop"], "--on-unknown"),
        (["--max-cells", "0"], "--max-cells"),
        (["--delimiter", ";;"], "--delimiter"),
    ],
)
def test_options_checked_before_data_is_read(small, capsys, extra, needle):
    # the data file does not match the domain (no such columns): an error about the data would
    # mean it was read before the option was checked
    (small / "people.csv").write_text("x,y\n1,2\n")
    out = small / "o"
    rc, _, err = run(capsys, *release_args(small, out, *extra))
    assert_one_line_error(rc, err, needle)
    assert not out.exists() and _ledger_rows(small / "ledger.sqlite3") == 0


def test_query_into_closed_pipe_exits_quietly(small, capsys, tmp_path):
    wide = {"a": 120, "b": 120}
    (small / "wide.json").write_text(json.dumps(wide))
    (small / "wide.csv").write_text("a,b\n" + "".join(f"{i % 120},{(i * 7) % 120}\n" for i in range(500)))
    out = small / "rel"
    rc, _, err = run(capsys, "release", small / "wide.csv", "--domain", small / "wide.json", "-m", "a,b",
                     "--rho", "1", "--out", out, "--ledger", small / "l.sqlite3", "--tables", "parquet", "-q",
                     NO_REPORT)  # fmt: skip
    assert rc == 0, err
    # 14,400 rows (~1 MB) into a reader that stops after one line
    p = subprocess.Popen([sys.executable, "-m", "dpmatrix", "query", str(out), "--marginal", "a,b"],
                         env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0
    assert err == "", err
