"""A ledger that means what it says: caps follow the data under any name, pure-ε releases count
against a ρ cap, every change is hash-chained, tampering is found, a configured ledger that is
missing is an error. Expected numbers are hand derivations (ρ = ε²/2 for pure ε-DP, Bun &
Steinke 2016 Prop. 1.4)."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from dpmatrix._ledger import BudgetExceededError, Ledger, LedgerError


@pytest.fixture()
def led(tmp_path):
    return Ledger(tmp_path / "l.sqlite3")


def _data(tmp_path, name="census.csv", text="age,sex\n1,0\n2,1\n"):
    p = tmp_path / name
    p.write_text(text)
    return p


# -- caps follow the data ------------------------------------------------------------------------
def test_renamed_dataset_cannot_sidestep_the_cap(tmp_path, led):
    data = _data(tmp_path)
    led.set_cap("census", rho=1.0)
    with led.reserve("census", led.fingerprint(data), rho=0.8):
        pass
    # the same bytes under a new name: the group's 0.8 counts against census's cap of 1
    with pytest.raises(BudgetExceededError, match=r"cap of 'census' \(same data under another name\) 1"), led.reserve("census_v2", led.fingerprint(data), rho=0.8):
        raise AssertionError("must not run")
    # a copy of the file under its default name: same fingerprint
    copy = tmp_path / "copy" / "census_copy.csv"
    copy.parent.mkdir()
    shutil.copy(data, copy)
    with pytest.raises(BudgetExceededError), led.reserve("census_copy", led.fingerprint(copy), rho=0.3):
        pass
    # what is shown is what is checked: one total for the group, 0.8, and the cap 1
    s = led.spent("census_v2", led.fingerprint(data))
    assert (s.rho, s.rho_cap, s.releases) == (pytest.approx(0.8), 1.0, 1)
    assert {d.dataset: d.rho for d in led.datasets()} == {"census": pytest.approx(0.8)}
    with led.reserve("census_v2", led.fingerprint(data), rho=0.2):  # 0.8 + 0.2 = the cap exactly
        pass
    assert {d.dataset: round(d.rho, 12) for d in led.datasets()} == {"census": 1.0, "census_v2": 1.0}


def test_a_cap_bound_to_a_fingerprint_applies_before_any_release(tmp_path, led):
    data = _data(tmp_path)
    led.set_cap("census", rho=0.5, fingerprint=led.fingerprint(data))
    with pytest.raises(BudgetExceededError, match="cap of 'census'"), led.reserve("anything", led.fingerprint(data), rho=0.6):
        pass
    other = _data(tmp_path, "other.csv", "age,sex\n0,0\n")
    with led.reserve("anything", led.fingerprint(other), rho=0.6):  # other bytes: not linked
        pass


def test_versions_under_one_name_share_its_cap(tmp_path, led):
    led.set_cap("census", rho=1.0)
    with led.reserve("census", led.fingerprint(b"version 1"), rho=0.7):
        pass
    with pytest.raises(BudgetExceededError), led.reserve("census", led.fingerprint(b"version 2"), rho=0.7):
        pass


# -- pure epsilon and rho caps -------------------------------------------------------------------
def test_pure_epsilon_releases_count_against_a_rho_cap(led):
    fp = led.fingerprint(b"x")
    led.set_cap("d", rho=1.0)
    for _ in range(2):  # eps = 1 is rho = 1/2 each: two fit the cap exactly
        with led.reserve("d", fp, epsilon=1.0):
            pass
    assert led.spent("d").rho == pytest.approx(1.0) and led.spent("d").epsilon == pytest.approx(2.0)
    with pytest.raises(BudgetExceededError, match="rho"), led.reserve("d", fp, epsilon=1.0):
        pass
    # the probe: eps = 5 is rho = 12.5, far past a cap of 1
    led2_fp = led.fingerprint(b"y")
    led.set_cap("e", rho=1.0)
    with pytest.raises(BudgetExceededError, match="12.5"), led.reserve("e", led2_fp, epsilon=5.0):
        pass


def test_setting_a_rho_cap_keeps_the_epsilon_cap(led):
    led.set_cap("d", epsilon=2.0)
    led.set_cap("d", rho=1.0)
    s = led.spent("d")
    assert (s.rho_cap, s.epsilon_cap) == (1.0, 2.0)
    led.set_cap("d", epsilon=3.0)
    assert (led.spent("d").rho_cap, led.spent("d").epsilon_cap) == (1.0, 3.0)


# -- refused entries -----------------------------------------------------------------------------
def test_refused_entries_charge_nothing_and_say_why(led):
    fp = led.fingerprint(b"x")
    led.set_cap("d", rho=1.0)
    led.record_refusal("d", fp, rho=0.9, reason="DataError: header Age,Sex")
    with led.reserve("d", fp, rho=0.9) as r:
        r.refuse("DataError: bad code")
    rows = led.rows()
    assert [r["status"] for r in rows] == ["refused", "refused"]
    assert rows[0]["reason"].startswith("DataError")
    assert led.spent("d").rho == 0.0
    with led.reserve("d", fp, rho=1.0):  # the whole cap is still there
        pass
    assert led.verify() == []


# -- tamper evidence -----------------------------------------------------------------------------
def _three_spends(led):
    fp = led.fingerprint(b"x")
    led.set_cap("d", rho=10.0)
    anchors = []
    for rho in (0.1, 0.2, 0.3):
        with led.reserve("d", fp, rho=rho) as r:
            anchors.append(r.anchor())
    return anchors


def test_untouched_ledger_verifies(led):
    anchors = _three_spends(led)
    assert led.verify() == []
    assert all(led.verify_anchor(a) == [] for a in anchors)


@pytest.mark.parametrize(
    "sql, found",
    [
        ("UPDATE spends SET rho = 0 WHERE id = 2", "spend 2: differs from the journal"),
        ("DELETE FROM spends WHERE id = 1", "spend 1: is in the journal but was deleted"),
        ("UPDATE caps SET rho_cap = 100", "caps"),
        ("DELETE FROM journal WHERE seq = 3", "missing"),
        ("UPDATE journal SET body = replace(body, '0.2', '0.02') WHERE seq = 4", "hash does not match"),
    ],
)
def test_edits_and_deletions_are_found(led, sql, found):
    _three_spends(led)
    with sqlite3.connect(led.path) as con:
        con.execute(sql)
    problems = [str(p) for p in led.verify()]
    assert any(found in p for p in problems), problems


def test_truncation_and_recreation_are_found_from_a_release_anchor(tmp_path, led):
    anchors = _three_spends(led)
    with sqlite3.connect(led.path) as con:  # drop the last release consistently from both tables
        last = con.execute("SELECT MAX(seq) FROM journal").fetchone()[0]
        con.execute("DELETE FROM journal WHERE seq >= ?", (last - 1,))
        con.execute("DELETE FROM spends WHERE id = 3")
    assert led.verify() == []  # the file alone cannot tell
    assert any("no longer in the ledger" in str(p) for p in led.verify_anchor(anchors[-1]))
    led.path.unlink()
    fresh = Ledger(led.path)
    assert any("recreated" in str(p) for p in fresh.verify_anchor(anchors[0]))


def test_a_configured_ledger_that_is_missing_is_an_error(tmp_path, monkeypatch):
    path = tmp_path / "gone.sqlite3"
    monkeypatch.setenv("DPMATRIX_LEDGER", str(path))
    with pytest.raises(LedgerError, match="does not exist.*DPMATRIX_LEDGER.*ledger init"):
        Ledger()
    assert not path.exists()
    Ledger.create()  # the deliberate first step
    assert Ledger().verify() == []
    path.unlink()
    with pytest.raises(LedgerError, match="deleted or moved"):
        Ledger()
    with pytest.raises(LedgerError, match="does not exist"):
        Ledger(tmp_path / "other.sqlite3", create=False)


def test_a_ledger_of_the_earlier_schema_is_migrated_with_its_rows(tmp_path):
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as con:
        con.executescript(
            "CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);"
            "CREATE TABLE caps (dataset TEXT PRIMARY KEY, rho_cap REAL, epsilon_cap REAL);"
            "CREATE TABLE spends (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, "
            "fingerprint TEXT NOT NULL, rho REAL NOT NULL DEFAULT 0, epsilon REAL NOT NULL DEFAULT 0, "
            "status TEXT NOT NULL CHECK (status IN ('reserved', 'completed', 'failed')), started TEXT NOT NULL, "
            "finished TEXT, note TEXT);"
            "INSERT INTO meta VALUES ('hmac_key', x'00112233');"
            "INSERT INTO caps VALUES ('d', 1.0, NULL);"
            "INSERT INTO spends (dataset, fingerprint, rho, status, started) VALUES ('d', 'f', 0.75, 'completed', 't');"
        )
    led = Ledger(path)
    assert led.spent("d").rho == 0.75 and led.spent("d").rho_cap == 1.0
    assert led.verify() == []
    with pytest.raises(BudgetExceededError), led.reserve("d", "f", rho=0.5):
        pass
