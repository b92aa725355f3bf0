"""Output lock, overwrite that always leaves a complete release, refusal
to wipe foreign folders, leftovers of killed runs cleaned with their privacy meaning, disk full."""

from __future__ import annotations

import errno
import json
import random
import signal
import subprocess
import sys
import time
import warnings

import pandas as pd
import pyarrow.parquet as pq
import pytest

import dpmatrix as dm
import dpmatrix.release as release_mod
import dpmatrix.release._layout as release_layout
from dpmatrix.release import LeftoverWarning, load_release, write_release

from ._support import NO_REPORT, assert_one_line_error, env, release_args, run, spawn

DOM = dm.Domain.from_dict({"a": 3, "b": 4})


# releases use secure noise by default: σ is rounded up to a rational, so the reported
# ρ is the planned one up to rel_var_tol = 1e-4 (never above it) — hence rel=1e-4 below

def _meas(rho: float = 0.5, seed: int = 0):
    data = pd.DataFrame({"a": [0, 1, 2, 1] * 25, "b": [0, 1, 2, 3] * 25})
    plan = dm.plan(dm.Workload(DOM, [("a", "b")]), rho=rho)
    import numpy as np

    return plan.measure(data, rng=np.random.default_rng(seed))


def _siblings(out):
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def _rho(out) -> float:
    return load_release(out).privacy["rho"]


HOLD = """
import sys, time
from dpmatrix.release import output_lock
with output_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(60)
"""


def test_second_writer_gets_a_clear_error(tmp_path, capsys, small):
    out = tmp_path / "rel"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], env=env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(dm.ReleaseError, match="another dpmatrix process is writing"):
            write_release(_meas(), out)
        rc, _, err = run(capsys, *release_args(small, out))
        assert_one_line_error(rc, err, "another dpmatrix process is writing")
    finally:
        holder.kill()
        holder.wait()
    write_release(_meas(), out)  # the dead holder's lock is gone with it
    assert _rho(out) == pytest.approx(0.5, rel=1e-4) and _siblings(out) == []


def test_two_concurrent_cli_releases_one_wins(small):
    out = small / "rel"
    procs = [spawn(*release_args(small, out, "--dataset", f"d{i}", NO_REPORT)) for i in range(2)]
    results = [(p.wait(300), p.stderr.read()) for p in procs]
    ok = [r for r in results if r[0] == 0]
    assert len(ok) == 1, results
    (bad,) = [r for r in results if r[0] != 0]
    assert bad[0] == 2 and ("another dpmatrix process" in bad[1] or "is not empty" in bad[1]), bad
    assert load_release(out).privacy["rho"] == pytest.approx(0.5, rel=1e-4)


def test_overwrite_failing_between_renames_keeps_the_old_release(tmp_path, monkeypatch):
    out = tmp_path / "rel"
    write_release(_meas(0.5), out)
    real = release_layout.os.rename
    calls = []

    def rename(a, b):
        calls.append((a, b))
        if len(calls) == 2:  # stage -> out
            raise OSError(errno.EIO, "I/O error")
        return real(a, b)

    monkeypatch.setattr(release_layout.os, "rename", rename)
    with pytest.raises(dm.ReleaseError, match="I/O error"):
        write_release(_meas(0.7), out, overwrite=True)
    monkeypatch.undo()
    assert _rho(out) == pytest.approx(0.5, rel=1e-4) and _siblings(out) == []


def test_kill_between_renames_is_recovered(tmp_path):
    """State after a SIGKILL between the two renames: OUT missing, the old release under
    .OUT.old-*, the finished new one under .OUT.partial-*. Readers find a complete release; the
    next write restores the new one."""
    out = tmp_path / "rel"
    write_release(_meas(0.5), out)
    new = tmp_path / "new"
    write_release(_meas(0.7), new)
    out.rename(tmp_path / ".rel.old-deadbeef")
    new.rename(tmp_path / ".rel.partial-deadbeef")
    with pytest.warns(LeftoverWarning, match="overwrite was interrupted"):
        rel = load_release(out)
    assert rel.privacy["rho"] == pytest.approx(0.7, rel=1e-4)
    with pytest.warns(LeftoverWarning) as w:
        release_mod.recover_output(out)
    msgs = " ".join(str(x.message) for x in w)
    assert "restored the finished new release" in msgs and "previous release" in msgs
    assert _rho(out) == pytest.approx(0.7, rel=1e-4) and _siblings(out) == []


def test_leftover_partial_is_removed_with_its_privacy_meaning(small, capsys):
    out = small / "rel"
    rc, _, err = run(capsys, *release_args(small, out, NO_REPORT))
    assert rc == 0, err
    # what a SIGKILL while writing leaves: a hidden stage holding noisy measurements
    leftover = small / ".rel.partial-0badf00d"
    leftover.mkdir()
    (leftover / "measurements.parquet").write_bytes((out / "measurements.parquet").read_bytes())
    (small / ".rel.work-0badf00d").mkdir()
    argv = release_args(small, out, "--overwrite", "--dataset", "again", NO_REPORT)
    argv[argv.index("--rho") + 1] = "0.25"
    rc, _, err = run(capsys, *argv)
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if "partial-0badf00d" in ln]
    assert len(lines) == 1 and "privacy budget was already spent" in lines[0], err
    assert _siblings(out) == [] and _rho(out) == pytest.approx(0.25, rel=1e-4)


@pytest.mark.parametrize("content", ['{"format": "dpmatrix.release/1"}', None])
def test_never_wipes_a_folder_that_is_not_a_complete_release(tmp_path, content):
    out = tmp_path / "rel"
    if content is None:
        write_release(_meas(), out)
        (out / "curator-notes.txt").write_text("mine")
    else:
        out.mkdir()
        (out / "manifest.json").write_text(content)
    before = sorted((p.relative_to(out).as_posix(), p.read_bytes()) for p in out.rglob("*") if p.is_file())
    with pytest.raises(dm.ReleaseError, match="not a dpmatrix release holding nothing else"):
        write_release(_meas(0.7), out, overwrite=True)
    after = sorted((p.relative_to(out).as_posix(), p.read_bytes()) for p in out.rglob("*") if p.is_file())
    assert before == after and _siblings(out) == []


def test_disk_full_while_writing_keeps_the_old_release(tmp_path, monkeypatch):
    out = tmp_path / "rel"
    write_release(_meas(0.5), out)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)  # every Parquet write: tables and measurements
    with pytest.raises(dm.ReleaseError, match="No space left on device"):
        write_release(_meas(0.7), out, overwrite=True, formats=["parquet"])
    monkeypatch.undo()
    assert _rho(out) == pytest.approx(0.5, rel=1e-4) and _siblings(out) == []


def test_failed_cli_release_removes_work_files_and_is_charged(small, capsys, monkeypatch):
    import dpmatrix.release._writer

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(dpmatrix.release._writer, "_write_measurements", full)
    out = small / "rel"
    rc, _, err = run(capsys, *release_args(small, out, "--spill"))
    assert_one_line_error(rc, err, "No space left on device")
    assert not out.exists() and _siblings(out) == []
    rows = dm.ledger.Ledger(small / "ledger.sqlite3").rows() if hasattr(dm, "ledger") else None
    from dpmatrix._ledger import Ledger

    rows = Ledger(small / "ledger.sqlite3").rows()
    assert [(r["status"], r["rho"]) for r in rows] == [("failed", 0.5)]


@pytest.mark.slow
def test_kill_at_random_points_of_an_overwrite(small):
    """SIGKILL an overwriting release at random moments: afterwards the folder (or, mid-swap,
    its hidden complete copy) always loads as the old (rho 0.5) or the new (rho 0.7) release,
    and the next release cleans everything up."""
    big = {"a": 40, "b": 40, "c": 40, "d": 5}
    (small / "big.json").write_text(json.dumps(big))
    (small / "big.csv").write_text(
        "a,b,c,d\n" + "".join(f"{i % 40},{i * 7 % 40},{i * 13 % 40},{i % 5}\n" for i in range(2000))
    )
    out = small / "rel"

    def argv(rho):
        return ["release", small / "big.csv", "--domain", small / "big.json", "-w", "all:<=3", "--rho", rho,
                "--out", out, "--ledger", small / "l.sqlite3", "-q", "--overwrite"]  # fmt: skip

    p = spawn(*argv("0.5"))
    assert p.wait(600) == 0, p.stderr.read()
    t0 = time.time()
    p = spawn(*argv("0.7"))
    assert p.wait(600) == 0, p.stderr.read()
    duration = time.time() - t0
    rng = random.Random(16)
    seen = set()
    for _ in range(8):
        p = spawn(*argv("0.7"))
        time.sleep(rng.uniform(0.3, 1.0) * duration)
        p.send_signal(signal.SIGKILL)
        p.wait(60)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LeftoverWarning)
            rel = load_release(out)
            seen.add(round(rel.privacy["rho"], 6))
            assert rel.privacy["rho"] in (pytest.approx(0.5, rel=1e-4), pytest.approx(0.7, rel=1e-4))
            rel.marginal(("a", "b"))  # every file it needs is there and verified
    p = spawn(*argv("0.5"))
    assert p.wait(600) == 0, p.stderr.read()
    assert _siblings(out) == [] and _rho(out) == pytest.approx(0.5, rel=1e-4)


def test_spill_and_memory_limit_files_live_in_a_removed_work_folder(small, capsys):
    out = small / "rel"
    rc, _, err = run(capsys, *release_args(small, out, "--spill", "--memory-limit", "200MB"))
    assert rc == 0, err
    assert _siblings(out) == [] and _rho(out) == pytest.approx(0.5, rel=1e-4)
