"""The one release workflow (dpmatrix.publish, used by ``dpmatrix release`` and ``demo``): what
stops before noise charges nothing (the entry is recorded as refused, with why), what stops after
stays charged, and every guard of the command line holds for Python users too. Each test is one
probe of the trust review (renamed data, pure vs rho caps, bad headers, sizes, symlinks, globs,
seeded noise, releases outside the workflow)."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import dpmatrix as dm
import dpmatrix._workflow as wf
from dpmatrix._ledger import BudgetExceededError, Ledger, LedgerError
from dpmatrix._measure.discrete import InsecureRandomnessWarning
from dpmatrix._sizing import SizeError
from dpmatrix.errors import DataError

from ._support import NO_REPORT, assert_one_line_error, release_args, run


def _plan(small, rho=0.5):
    dom = dm.Domain.from_json(small / "domain.json")
    return dm.plan(dm.Workload(dom, [("age", "sex"), ("smoker",)]), rho=rho)


def _led(small):
    return Ledger(small / "ledger.sqlite3")


# -- nothing is charged before noise -------------------------------------------------------------
def test_header_typos_cost_nothing_and_are_recorded_as_refused(small, capsys):
    led = _led(small)
    led.set_cap("people", rho=0.5)
    good = (small / "people.csv").read_text()
    (small / "people.csv").write_text(good.replace("age,sex", "Age,Sex", 1))
    for _ in range(2):  # the probe: two typos locked a capped dataset
        rc, _, err = run(capsys, *release_args(small, small / "r", NO_REPORT))
        assert_one_line_error(rc, err, "did you mean 'Age'?")
    rows = led.rows()
    assert [r["status"] for r in rows] == ["refused", "refused"]
    assert all("did you mean" in r["reason"] for r in rows)
    assert led.spent("people").rho == 0.0
    (small / "people.csv").write_text(good)  # a different file now: renamed header fixed
    rc, _, err = run(capsys, *release_args(small, small / "r", NO_REPORT))
    assert rc == 0, err  # the whole cap of 0.5 was still there
    assert led.spent("people").rho == pytest.approx(0.5)


def test_bad_codes_found_when_the_data_are_opened_cost_nothing(small):
    led = _led(small)
    df = pd.read_csv(small / "people.csv")
    df.loc[3, "n"] = 7  # outside 0..2
    df.to_csv(small / "bad.csv", index=False)
    # only the attributes a release uses are read and validated: this plan uses n
    plan = dm.plan(dm.Workload(dm.Domain.from_json(small / "domain.json"), [("age", "sex"), ("n",)]), rho=0.5)
    with pytest.raises(DataError, match="not an integer code 0..2: '7'"):
        dm.publish(plan, small / "bad.csv", small / "r", ledger=led, report=False)
    (row,) = led.rows()
    assert row["status"] == "refused" and row["reason"].startswith("DataError") and led.spent("bad").rho == 0
    assert not (small / "r").exists()


def test_a_failure_before_the_first_count_is_refused(small, monkeypatch):
    led = _led(small)

    def broken(self, attr_sets, progress=False):
        raise DataError("the source went away while counting")

    monkeypatch.setattr(wf._Gate, "count", broken)
    with pytest.raises(DataError, match="went away"):
        dm.publish(_plan(small), small / "people.csv", small / "r", ledger=led, report=False)
    assert led.rows()[0]["status"] == "refused" and led.spent("people").rho == 0.0


def test_a_failure_after_noise_stays_charged(small, monkeypatch):
    led = _led(small)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(wf, "write_release", disk_full)
    with pytest.raises(OSError):
        dm.publish(_plan(small), small / "people.csv", small / "r", ledger=led, report=False)
    (row,) = led.rows()
    assert row["status"] == "failed" and "No space left" in row["reason"]
    assert led.spent("people").rho == pytest.approx(0.5)


def test_duplicate_columns_are_refused_on_every_engine(small, capsys):
    text = (small / "people.csv").read_text().splitlines()
    text[0] = text[0] + ",sex"
    (small / "dup.csv").write_text("\n".join(line + (",F" if i else "") for i, line in enumerate(text)) + "\n")
    for engine in ("duckdb", "numpy"):
        argv = release_args(small, small / "r", NO_REPORT, "--engine", engine)
        argv[1] = str(small / "dup.csv")
        rc, _, err = run(capsys, *argv)
        assert_one_line_error(rc, err, "duplicate column names: 'sex'")
    assert _led(small).spent("dup").rho == 0.0


# -- sizes, paths, globs -------------------------------------------------------------------------
def test_raising_max_cells_keeps_the_memory_check(small, monkeypatch):
    led = _led(small)
    monkeypatch.setattr(wf, "available_memory", lambda: 10)  # bytes: below any estimate
    with pytest.raises(SizeError, match="memory.*spill"):
        dm.publish(_plan(small), small / "people.csv", small / "r", ledger=led, max_cells=10**15, report=False)
    assert led.rows() == []  # refused before the ledger was touched


def test_a_symlinked_output_is_refused_before_counting(small, capsys, monkeypatch):
    target = small / "elsewhere"
    target.mkdir()
    (small / "link").symlink_to(target)
    monkeypatch.setattr(wf, "open_source", lambda *a, **k: pytest.fail("the data were opened"))
    rc, _, err = run(capsys, *release_args(small, small / "link", NO_REPORT))
    assert_one_line_error(rc, err, "symbolic link")
    assert not any(p.name.startswith(".link.") for p in small.iterdir())  # no .link.old-*, no lock
    assert list(target.iterdir()) == []


def test_the_lock_file_never_follows_a_symlink(small, capsys):
    victim = small / "victim.txt"
    (small / ".r.lock").symlink_to(victim)
    rc, _, err = run(capsys, *release_args(small, small / "r", NO_REPORT))
    assert_one_line_error(rc, err, "symbolic link")
    assert not victim.exists()
    assert _led(small).rows() == []


def test_an_input_glob_that_contains_the_output_is_refused(small, capsys):
    data_dir = small / "data"
    data_dir.mkdir()
    (small / "people.csv").rename(data_dir / "people.csv")
    argv = release_args(small, data_dir / "out", NO_REPORT)
    argv[1] = str(data_dir / "**" / "*.csv")
    os.makedirs(data_dir / "out")
    (data_dir / "out" / "x.csv").write_text("age,sex,smoker,n\n")  # e.g. a CSV table of a release
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "inside the output folder")


# -- renamed data and pure epsilon through the command line --------------------------------------
def test_a_renamed_dataset_cannot_sidestep_the_cap_from_the_command_line(small, capsys):
    led = small / "ledger.sqlite3"
    run(capsys, "ledger", "set-cap", "people", "--rho", "1", "--ledger", led)
    rc, _, err = run(capsys, *release_args(small, small / "r1", NO_REPORT, "--dataset", "people"))
    assert rc == 0, err
    argv = release_args(small, small / "r2", NO_REPORT, "--dataset", "census_v2")
    argv[argv.index("--rho") + 1] = "0.8"
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "cap of 'people'", "0.5 of")
    rc, out, _ = run(capsys, "ledger", "show", "--ledger", led)
    assert "people: 1 release(s); rho = 0.5" in out


def test_pure_epsilon_releases_count_against_a_rho_cap_from_the_command_line(small, capsys):
    led = small / "ledger.sqlite3"
    run(capsys, "ledger", "set-cap", "people", "--rho", "1", "--ledger", led)
    for i, expect_ok in enumerate([True, True, False]):  # eps = 1 is rho = 0.5: two fit a cap of 1
        argv = release_args(small, small / f"p{i}", NO_REPORT)
        k = argv.index("--rho")
        argv[k : k + 2] = ["--epsilon", "1", "--delta", "0"]
        rc, _, err = run(capsys, *argv)
        if expect_ok:
            assert rc == 0, err
        else:
            assert_one_line_error(rc, err, "would spend rho (zCDP) 0.5")
    s = Ledger(led).spent("people")
    assert (s.rho, s.epsilon) == (pytest.approx(1.0), pytest.approx(2.0))


# -- seeded noise is marked everywhere -----------------------------------------------------------
def test_a_seeded_release_is_marked_not_private_in_every_artifact(small, capsys):
    with pytest.warns(InsecureRandomnessWarning):
        done = dm.publish(_plan(small), small / "people.csv", small / "r", ledger=_led(small),
                          rng=np.random.default_rng(1), formats=("parquet", "csv"), report=True)  # fmt: skip
    folder = done.path
    assert "NOT PRIVATE" in (folder / "README.txt").read_text().splitlines()[0]
    for part in (folder / "tables").glob("*.parquet"):
        meta = pq.read_schema(part).metadata
        assert meta[b"dpmatrix.private"] == b"false" and b"NOT PRIVATE" in meta[b"dpmatrix.note"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["mechanism"]["reproducible"] is True and "NOT PRIVATE" in json.dumps(manifest["privacy"])
    assert "NOT PRIVATE" in (folder / "report.html").read_text()
    rc, out, err = run(capsys, "query", folder, "--marginal", "sex", "--format", "table")
    assert rc == 0 and "NOT PRIVATE" in out + err


def test_write_release_cannot_unmark_seeded_measurements(small):
    plan = _plan(small)
    df = pd.read_csv(small / "people.csv")
    with pytest.warns(InsecureRandomnessWarning):
        meas = plan.measure(df, rng=np.random.default_rng(0), encoding="raw")
    folder = dm.write_release(meas, small / "w", reproducible=False)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["mechanism"]["reproducible"] is True
    assert "NOT PRIVATE" in (folder / "README.txt").read_text()


def test_secure_default_has_no_mark(small):
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureRandomnessWarning)
        done = dm.publish(_plan(small), small / "people.csv", small / "r", ledger=_led(small), report=False)
    assert "NOT PRIVATE" not in (done.path / "README.txt").read_text()
    assert pq.read_schema(next((done.path / "tables").glob("*.parquet"))).metadata is None or \
        b"dpmatrix.private" not in pq.read_schema(next((done.path / "tables").glob("*.parquet"))).metadata


# -- outside the workflow, and without a ledger --------------------------------------------------
def test_measurements_outside_the_workflow_say_not_in_any_ledger(small):
    meas = _plan(small).measure(pd.read_csv(small / "people.csv"), encoding="raw")
    folder = dm.write_release(meas, small / "w")
    assert json.loads((folder / "manifest.json").read_text())["ledger"] == {"status": "not in any ledger"}


def test_ledger_false_is_warned_and_recorded(small):
    with pytest.warns(UserWarning, match="not in any ledger"):
        done = dm.publish(_plan(small), small / "people.csv", small / "r", ledger=False, report=False)
    assert done.ledger is None
    assert json.loads((done.path / "manifest.json").read_text())["ledger"]["status"] == "not in any ledger"


def test_data_in_memory_need_a_dataset_name(small):
    df = pd.read_csv(small / "people.csv")
    with pytest.raises(LedgerError, match="dataset="):
        dm.publish(_plan(small), df, small / "r", ledger=_led(small), report=False)
    led = _led(small)
    done = dm.publish(_plan(small), df, small / "r", ledger=led, dataset="people", encoding="raw", report=False)
    assert led.spent("people").rho == pytest.approx(0.5) and done.ledger["entry"] == 1
    # the same records from the file are another source (file bytes vs table content), but the
    # same name: the cap of "people" covers both
    led.set_cap("people", rho=0.6)
    with pytest.raises(BudgetExceededError):
        dm.publish(_plan(small), small / "people.csv", small / "r2", ledger=led, report=False)


def test_a_configured_ledger_that_is_missing_stops_the_release(small, capsys, monkeypatch):
    monkeypatch.setenv("DPMATRIX_LEDGER", str(small / "gone.sqlite3"))
    argv = [a for a in release_args(small, small / "r", NO_REPORT)]
    k = argv.index("--ledger")
    del argv[k : k + 2]
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "does not exist", "ledger init")
    assert not (small / "r").exists() and not (small / "gone.sqlite3").exists()


def test_overwriting_a_release_checks_the_ledger_it_was_charged_to(small, capsys):
    rc, _, err = run(capsys, *release_args(small, small / "r", NO_REPORT))
    assert rc == 0, err
    (small / "ledger.sqlite3").unlink()  # deleted; a fresh one would start from zero
    rc, _, err = run(capsys, *release_args(small, small / "r", NO_REPORT, "--overwrite"))
    assert_one_line_error(rc, err, "recreated or replaced")


# -- the ledger verified from release folders ----------------------------------------------------
def test_ledger_verify_finds_edits_truncation_deletion_and_recreation(small, capsys):
    import sqlite3

    led = small / "ledger.sqlite3"
    for i in range(2):
        rc, _, err = run(capsys, *release_args(small, small / f"r{i}", NO_REPORT))
        assert rc == 0, err
    rc, out, _ = run(capsys, "ledger", "verify", small / "r0", small / "r1")
    assert rc == 0 and "2 release(s) match" in out
    backup = led.read_bytes()
    with sqlite3.connect(led) as con:  # edited: the second release's rho lowered
        con.execute("UPDATE spends SET rho = 0.01 WHERE id = 2")
    rc, _, err = run(capsys, "ledger", "verify", small / "r1")
    assert_one_line_error(rc, err, "edited")
    led.write_bytes(backup)
    with sqlite3.connect(led) as con:  # truncated: the last release removed everywhere
        con.execute("DELETE FROM journal WHERE seq >= (SELECT seq FROM journal WHERE body LIKE '%\"id\":2,%' "
                    "AND event = 'reserve')")
        con.execute("DELETE FROM spends WHERE id = 2")
    rc, _, err = run(capsys, "ledger", "verify", small / "r1")
    assert_one_line_error(rc, err, "no longer in the ledger")
    led.unlink()  # deleted
    rc, _, err = run(capsys, "ledger", "verify", small / "r0")
    assert_one_line_error(rc, err, "does not exist")
    Ledger(led)  # recreated empty
    rc, _, err = run(capsys, "ledger", "verify", small / "r0")
    assert_one_line_error(rc, err, "recreated or replaced")


def test_the_report_says_where_the_spend_is_recorded(small):
    from dpmatrix._report import write_release_report

    done = dm.publish(_plan(small), small / "people.csv", small / "r", ledger=_led(small), report=True)
    assert f"entry 1 of ledger {_led(small).id}" in (done.path / "report.html").read_text()
    meas = _plan(small).measure(pd.read_csv(small / "people.csv"), encoding="raw")
    folder = dm.write_release(meas, small / "w")
    assert "not in any ledger" in write_release_report(folder).read_text()


def test_a_fresh_default_ledger_is_announced(small, monkeypatch):
    """A changed HOME / XDG_DATA_HOME (sudo, cron) points at a new default ledger: said loudly,
    since earlier spends are in the other one."""
    monkeypatch.delenv("DPMATRIX_LEDGER")
    monkeypatch.setenv("XDG_DATA_HOME", str(small / "xdg"))
    with pytest.warns(UserWarning, match="created a new, empty privacy-budget ledger"):
        dm.publish(_plan(small), small / "people.csv", small / "r", report=False)
    assert (small / "xdg" / "dpmatrix" / "ledger.sqlite3").is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time: the same ledger, nothing to announce
        dm.publish(_plan(small), small / "people.csv", small / "r2", report=False)
