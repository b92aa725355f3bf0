"""Safe outputs: no spreadsheet formulas in CSV cells, a report that always describes the release
beside it (covered by the digest list, written inside the lock, verified before it is rendered),
no raw-derived leftovers readable by others, and kills that never block a later overwrite."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat

import pandas as pd
import pyarrow.parquet as pq
import pytest

import dpmatrix as dm
import dpmatrix._workflow as wf
from dpmatrix._ledger import Ledger
from dpmatrix.errors import ReleaseError
from dpmatrix.release import LeftoverWarning, digest_list, recover_output, verify_files

from ._support import NO_REPORT, assert_one_line_error, release_args, run

# labels a respondent could plant through infer-domain (values become labels)
EVIL = ['=HYPERLINK("http://x.example","click")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tTab", "-5", "plain"]


@pytest.fixture()
def evil(tmp_path):
    rows = [EVIL[i % len(EVIL)] for i in range(70)]
    pd.DataFrame({"who": rows, "n": [i % 2 for i in range(70)]}).to_csv(tmp_path / "evil.csv", index=False)
    (tmp_path / "dom.json").write_text(json.dumps({"who": {"labels": EVIL}, "n": 2}))
    return tmp_path


def _release_evil(folder, capsys, *extra):
    rc, _out, err = run(capsys, "release", folder / "evil.csv", "--domain", folder / "dom.json", "-w", "all:<=2",
                       "--rho", "1", "--out", folder / "rel", "--ledger", folder / "l.sqlite3", "-q",
                       "--tables", "parquet,csv", NO_REPORT, *extra)  # fmt: skip
    assert rc == 0, err
    return folder / "rel"


def _report_rhos(page: str) -> set[float]:
    """Every rho the report page states (its numbers carry their manifest key and exact value)."""
    return {float(v) for v in re.findall(r'privacy&quot;,&quot;rho&quot;\]\' data-value="([0-9.e-]+)"', page)}


def _starts_formula(cell: str) -> bool:
    return cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not _number(cell)


def _number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def test_csv_tables_neutralise_formula_labels_and_parquet_keeps_them(evil, capsys):
    rel = _release_evil(evil, capsys)
    seen = set()
    for path in (rel / "marginals").glob("*.csv"):
        for row in csv.reader(io.StringIO(path.read_text())):
            for cell in row:
                assert not _starts_formula(cell), (path.name, cell)
                seen.add(cell)
    assert "'=HYPERLINK(\"http://x.example\",\"click\")" in seen and "'@SUM(A1)" in seen and "'-2+3" in seen
    assert "-5" in seen  # a number is not a formula: kept
    # the Parquet dataset keeps every label exactly
    labels = set(pq.read_table(rel / "tables").column("who").to_pylist()) - {None}
    assert labels == set(EVIL)
    # read back from the CSV files: exact labels again
    release = dm.load_release(rel)
    assert set(release.table(("who",), "csv")["who"].astype(str)) == set(EVIL)


def test_query_csv_output_is_neutralised(evil, capsys):
    rel = _release_evil(evil, capsys)
    for argv in (["--marginal", "who"], ["--marginal", "who", "--level", "0.9"]):  # saved, reconstructed
        rc, out, err = run(capsys, "query", rel, *argv, "--format", "csv")
        assert rc == 0, err
        rows = list(csv.reader(io.StringIO(out)))
        cells = [r[0] for r in rows[1:]]
        assert sorted(cells) == sorted("'" + e if _starts_formula(e) else e for e in EVIL)
        assert all(_number(r[1]) for r in rows[1:])  # estimates stay numbers, negative ones too


# -- the report ----------------------------------------------------------------------------------
def test_the_report_is_covered_by_the_digest_list(small, capsys):
    rc, _, err = run(capsys, *release_args(small, small / "r"))
    assert rc == 0, err
    listed = digest_list(small / "r")
    assert list(listed) == ["manifest.json", "report.html"]
    verify_files(small / "r")
    (small / "r" / "report.html").write_text("<html>rho = 0.01</html>")
    with pytest.raises(ReleaseError, match="report.html .* does not match"):
        verify_files(small / "r")
    rc, _, err = run(capsys, "report", small / "r")  # rewrites it, inside the lock, with a new digest
    assert rc == 0, err
    verify_files(small / "r")
    assert "rho = 0.01" not in (small / "r" / "report.html").read_text()


def test_an_overwrite_replaces_release_and_report_together(small, capsys):
    rc, _, err = run(capsys, *release_args(small, small / "r"))
    assert rc == 0, err
    argv = release_args(small, small / "r", "--overwrite")
    argv[argv.index("--rho") + 1] = "0.02"
    rc, _, err = run(capsys, *argv)
    assert rc == 0, err
    verify_files(small / "r")
    manifest = json.loads((small / "r" / "manifest.json").read_text())
    assert manifest["privacy"]["rho"] == pytest.approx(0.02, rel=1e-3)
    assert _report_rhos((small / "r" / "report.html").read_text()) == {manifest["privacy"]["rho"]}


def test_report_refuses_a_swapped_table_file(small, capsys):
    rc, _, err = run(capsys, *release_args(small, small / "a", NO_REPORT))
    assert rc == 0, err
    argv = release_args(small, small / "b", NO_REPORT)
    argv[argv.index("--rho") + 1] = "0.01"
    rc, _, err = run(capsys, *argv)
    assert rc == 0, err
    part = next((small / "a" / "tables").glob("*.parquet"))
    part.write_bytes(next((small / "b" / "tables").glob("*.parquet")).read_bytes())
    rc, _, err = run(capsys, "report", small / "a")
    assert_one_line_error(rc, err, "modified after the release was written")
    assert not (small / "a" / "report.html").exists()


def test_a_kill_during_the_report_write_does_not_block_overwrite(small, capsys):
    rc, _, err = run(capsys, *release_args(small, small / "r", NO_REPORT))
    assert rc == 0, err
    (small / "r" / ".report.html.partial").write_text("<html>half")  # what a kill leaves
    (small / "r" / ".manifest.sha256.partial").write_text("half")
    rc, _, err = run(capsys, *release_args(small, small / "r", NO_REPORT, "--overwrite"))
    assert rc == 0, err


# -- raw-derived work files ----------------------------------------------------------------------
def test_the_work_folder_is_owner_only_and_leftovers_are_named_for_what_they_held(small, monkeypatch):
    seen = {}
    real = wf.open_source

    def spy(*args, temp_directory=None, **kwargs):
        work = temp_directory.parent
        seen["mode"] = stat.S_IMODE(os.stat(work).st_mode)
        seen["name"] = work.name
        return real(*args, temp_directory=temp_directory, **kwargs)

    monkeypatch.setattr(wf, "open_source", spy)
    old = os.umask(0o022)
    try:
        dm.publish(dm.plan(dm.Workload(dm.Domain.from_json(small / "domain.json"), [("age", "sex")]), rho=0.5),
                   small / "people.csv", small / "r", ledger=Ledger(small / "l.sqlite3"), report=False)  # fmt: skip
    finally:
        os.umask(old)
    assert seen["mode"] == 0o700 and seen["name"].startswith(".r.work-")
    assert not (small / seen["name"]).exists()  # removed after the release
    # what a kill leaves: named for the un-noised records it held, not as noisy measurements
    leftover = small / ".r.work-deadbeef"
    (leftover / "duckdb").mkdir(parents=True)
    (leftover / "duckdb" / "spill.tmp").write_text("counts")
    with pytest.warns(LeftoverWarning, match="un-noised records"):
        msgs = recover_output(small / "r")
    assert not leftover.exists() and any("un-noised" in m and "noisy measurements" not in m for m in msgs)


@pytest.mark.slow
def test_kills_at_random_points_leave_a_verified_release_and_owner_only_leftovers(small):
    """SIGKILL a release with its report at random moments (reading, counting, writing, report):
    the folder is always a complete release whose report matches its digest, every leftover work
    folder is owner-only, every ledger entry is charged unless refused, and the next run cleans up
    saying what the leftovers held."""
    import random
    import signal
    import time
    import warnings

    from ._support import spawn

    big = {"a": 40, "b": 40, "c": 40, "d": 5}
    (small / "big.json").write_text(json.dumps(big))
    (small / "big.csv").write_text(
        "a,b,c,d\n" + "".join(f"{i % 40},{i * 7 % 40},{i * 13 % 40},{i % 5}\n" for i in range(3000))
    )
    out = small / "rel"
    led = small / "l.sqlite3"

    def argv(rho):
        return ["release", small / "big.csv", "--domain", small / "big.json", "-w", "all:<=3", "--rho", rho,
                "--out", out, "--ledger", led, "-q", "--overwrite", "--memory-limit", "100MB"]  # fmt: skip

    t0 = time.time()
    p = spawn(*argv("0.5"))
    assert p.wait(600) == 0, p.stderr.read()
    duration = time.time() - t0
    rng = random.Random(26)
    for _ in range(6):
        p = spawn(*argv("0.7"))
        time.sleep(rng.uniform(0.2, 1.0) * duration)
        p.send_signal(signal.SIGKILL)
        p.wait(60)
        for w in small.glob(".rel.work-*"):
            assert stat.S_IMODE(os.stat(w).st_mode) == 0o700
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LeftoverWarning)
            if out.exists():
                verify_files(out)
    rows = Ledger(led).rows()
    assert all(r["status"] in ("reserved", "completed", "refused") for r in rows)
    charged = sum(r["rho"] for r in rows if r["status"] != "refused")
    assert Ledger(led).spent("big").rho == pytest.approx(charged)
    p = spawn(*argv("0.5"))
    assert p.wait(600) == 0, p.stderr.read()
    assert not list(small.glob(".rel.*-*"))
    verify_files(out)


def test_concurrent_overwrites_leave_a_report_of_the_release_beside_it(small, capsys):
    """The issue's probe: a concurrent overwrite left a report stating rho 50x too low. Reports
    are now written inside the lock: whatever wins, the folder's report matches its digest and
    states the folder's own rho."""
    from ._support import spawn

    rc, _, err = run(capsys, *release_args(small, small / "r"))
    assert rc == 0, err
    procs = []
    for rho in ("0.5", "0.01"):
        argv = release_args(small, small / "r", "--overwrite")
        argv[argv.index("--rho") + 1] = rho
        procs.append(spawn(*argv))
    codes = [p.wait(600) for p in procs]
    assert 0 in codes, [p.stderr.read() for p in procs]
    verify_files(small / "r")
    rho = json.loads((small / "r" / "manifest.json").read_text())["privacy"]["rho"]
    page = (small / "r" / "report.html").read_text()
    assert _report_rhos(page) == {rho}
