"""The privacy-budget ledger — charged before noise, caps, composition,
fingerprints, crashed releases stay charged, concurrent releases cannot overrun a cap."""

from __future__ import annotations

import json
import multiprocessing as mp
import signal
import sqlite3
import time

import pytest

from dpmatrix._ledger import BudgetExceededError, Ledger, LedgerError, default_ledger_path

from ._ledger_client import reserve_in_process
from ._support import NO_REPORT, assert_one_line_error, release_args, run, spawn


def test_caps_and_composition(tmp_path):
    led = Ledger(tmp_path / "l.sqlite3")
    led.set_cap("census", rho=1.0, epsilon=2.0)
    fp = led.fingerprint(b"the data")
    with led.reserve("census", fp, rho=0.25):
        pass
    with led.reserve("census", fp, rho=0.25, epsilon=1.5):
        pass
    s = led.spent("census")
    assert (s.rho, s.epsilon, s.releases) == (0.5, 1.5, 2)  # zCDP: sum of rho; pure DP: sum of eps
    with pytest.raises(BudgetExceededError, match="already spent"):
        with led.reserve("census", fp, rho=0.6):
            raise AssertionError("must not run")
    with pytest.raises(BudgetExceededError, match="pure epsilon"):
        with led.reserve("census", fp, epsilon=0.6):
            pass
    with led.reserve("census", fp, rho=0.5):  # exactly up to the cap is allowed
        pass
    assert led.spent("census").rho == pytest.approx(1.0)
    assert [r["status"] for r in led.rows()] == ["completed"] * 3  # refusals charge nothing


def test_failed_release_stays_charged(tmp_path):
    led = Ledger(tmp_path / "l.sqlite3")
    fp = led.fingerprint(b"x")
    with pytest.raises(RuntimeError):
        with led.reserve("d", fp, rho=0.3):
            raise RuntimeError("disk full while writing")
    assert led.rows()[0]["status"] == "failed" and led.spent("d").rho == pytest.approx(0.3)


def test_same_data_under_another_name_counts(tmp_path):
    led = Ledger(tmp_path / "l.sqlite3")
    data = tmp_path / "f.csv"
    data.write_text("a\n1\n")
    led.set_cap("renamed", rho=0.5)
    with led.reserve("original", led.fingerprint(data), rho=0.4):
        pass
    with pytest.raises(BudgetExceededError):
        with led.reserve("renamed", led.fingerprint(data), rho=0.2):
            pass


def test_fingerprint_is_keyed(tmp_path):
    a, b = Ledger(tmp_path / "a.sqlite3"), Ledger(tmp_path / "b.sqlite3")
    assert a.fingerprint(b"same bytes") == a.fingerprint(b"same bytes")
    assert a.fingerprint(b"same bytes") != a.fingerprint(b"other bytes")
    # two ledgers have independent keys: a fingerprint is not a plain hash of the data
    assert a.fingerprint(b"same bytes") != b.fingerprint(b"same bytes")
    import hashlib

    assert a.fingerprint(b"same bytes") != hashlib.sha256(b"same bytes").hexdigest()


def test_ledger_location(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMATRIX_LEDGER", str(tmp_path / "env.sqlite3"))
    assert default_ledger_path() == tmp_path / "env.sqlite3"
    monkeypatch.delenv("DPMATRIX_LEDGER")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_ledger_path() == tmp_path / "xdg" / "dpmatrix" / "ledger.sqlite3"
    led = Ledger(tmp_path / "new" / "l.sqlite3")
    assert (led.path.stat().st_mode & 0o777) == 0o600  # it holds the fingerprint key
    (tmp_path / "junk").write_text("not a database" * 100)
    with pytest.raises(LedgerError, match="not a usable dpmatrix ledger"):
        Ledger(tmp_path / "junk")


def test_concurrent_processes_cannot_overrun_the_cap(tmp_path):
    path = tmp_path / "l.sqlite3"
    Ledger(path).set_cap("shared", rho=1.0)
    ctx = mp.get_context("spawn")
    for _ in range(2):
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=reserve_in_process, args=(path, barrier, results, i)) for i in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        outcomes = sorted(results.get(timeout=10)[1] for _ in procs)
        assert outcomes == ["ok", "refused"]
        Ledger(path).set_cap("shared", rho=Ledger(path).spent("shared").rho + 1.0)
    assert Ledger(path).spent("shared").rho == pytest.approx(1.2)


def test_cli_release_charged_before_noise_and_refused_over_cap(small, capsys):
    led = small / "ledger.sqlite3"
    rc, out, err = run(capsys, "ledger", "set-cap", "people", "--rho", "0.8", "--ledger", led)
    assert rc == 0, err
    rc, _, err = run(capsys, *release_args(small, small / "r1", NO_REPORT))
    assert rc == 0, err
    rc, _, err = run(capsys, *release_args(small, small / "r2"))
    assert_one_line_error(rc, err, "would spend rho (zCDP) 0.5", "0.5 of its cap 0.8")
    assert not (small / "r2").exists()
    rc, out, _ = run(capsys, "ledger", "show", "--ledger", led, "--all")
    assert "people: 1 release(s); rho = 0.5" in out and "completed" in out
    # another name for the same file: its earlier spend counts against the new name's cap
    rc, _, err = run(capsys, "ledger", "set-cap", "copy", "--rho", "0.6", "--ledger", led)
    argv = release_args(small, small / "r3", "--dataset", "copy")
    argv[argv.index("--rho") + 1] = "0.3"
    rc, _, err = run(capsys, *argv)
    assert_one_line_error(rc, err, "would spend rho (zCDP) 0.3", "0.5 of its cap 0.6")


@pytest.mark.slow
def test_killed_release_stays_charged(small):
    """A release killed while measuring/writing keeps its 'reserved' spend: its noise may exist."""
    led = small / "ledger.sqlite3"
    big = {"a": 60, "b": 60, "c": 60}
    (small / "big.json").write_text(json.dumps(big))
    (small / "big.csv").write_text("a,b,c\n" + "".join(f"{i % 60},{i * 7 % 60},{i * 13 % 60}\n" for i in range(3000)))
    p = spawn("release", small / "big.csv", "--domain", small / "big.json", "-w", "all:<=3", "--rho", "1",
              "--out", small / "o", "--ledger", led, "-q")  # fmt: skip
    deadline = time.time() + 120
    while time.time() < deadline:
        with sqlite3.connect(led) if led.exists() else sqlite3.connect(":memory:") as con:
            try:
                n = con.execute("SELECT COUNT(*) FROM spends").fetchone()[0]
            except sqlite3.Error:
                n = 0
        if n:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait(30)
    rows = Ledger(led).rows()
    assert len(rows) == 1 and rows[0]["rho"] == pytest.approx(1.0)
    assert rows[0]["status"] in ("reserved", "completed")
    assert Ledger(led).spent("big").rho == pytest.approx(1.0)
