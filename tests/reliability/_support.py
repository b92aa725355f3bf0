"""Shared helpers of the fault-injection suite: a small labelled dataset, the CLI run in-process
(one-line errors checked) and as a real subprocess (for kills, locks and concurrency)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from cli_run import run  # noqa: F401  (re-exported: the reliability tests import it from here)

SRC = Path(__file__).resolve().parents[2] / "src"

DOMAIN = {
    "age": {"bins": [0, 30, 60, 120]},
    "sex": {"labels": ["F", "M"]},
    "smoker": {"labels": ["yes", "no"]},
    "n": 3,
}
N_ROWS = 400
#: for releases whose HTML report is not what a test checks: rendering its figures is most of a
#: small release's time (the report is tested in tests/report/ and by the tests that keep it)
NO_REPORT = "--no-report"


def frame(seed: int = 1, n: int = N_ROWS) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(0, 119, n),
            "sex": rng.choice(["F", "M"], n),
            "smoker": rng.choice(["yes", "no"], n),
            "n": rng.integers(0, 3, n),
        }
    )


def release_args(folder: Path, out: Path, *extra) -> list[str]:
    return [
        "release", str(folder / "people.csv"), "--domain", str(folder / "domain.json"),
        "--workload", "all:<=2", "--rho", "0.5", "--out", str(out), "--ledger",
        str(folder / "ledger.sqlite3"), "-q", *map(str, extra),
    ]  # fmt: skip


def assert_one_line_error(rc: int, err: str, *needles: str) -> None:
    """Exit status 2 and exactly one 'dpmatrix: error:' line (warnings may precede it), no
    traceback."""
    assert rc == 2, err
    errors = [ln for ln in err.splitlines() if ln.startswith("dpmatrix: error:")]
    assert len(errors) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    for n in needles:
        assert n in errors[0], errors[0]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(SRC) + os.pathsep + e.get("PYTHONPATH", "")
    e["OPENBLAS_NUM_THREADS"] = "1"
    return e


def spawn(*argv, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "dpmatrix", *map(str, argv)], env=env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw,
    )  # fmt: skip


def cli(*argv, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dpmatrix", *map(str, argv)], env=env(),
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
