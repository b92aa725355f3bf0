"""Sessions dpmatrix starts: stopped on every path, started quietly, started without a fork.

Each test runs in a fresh Python process (the test process may hold the shared local[2] session
of ``conftest.py``, and a leaked SparkContext or a start-up line is only visible in a process
of its own). Expected behaviour is the documented contract, not output of the code: a bad
argument starts no JVM at all (``SparkContext._gateway is None``); a failure after the session
started leaves no active SparkContext; the three start-up lines the JVM used to print are absent
while a real JVM error still reaches stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpmatrix.engines._spark_console import forward, is_startup_noise

ROOT = Path(__file__).resolve().parents[2]
#: what the JVM printed on every start before (see dpmatrix.engines._spark_console)
CHATTER = ("WARNING: Using incubator modules", "Setting default log level", "sc.setLogLevel", "NativeCodeLoader")


def run_python(code: str, tmp_path: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip


def small_lake(tmp_path: Path) -> None:
    import pandas as pd

    pd.DataFrame({"a0": [0, 1, 1, 0, 1], "a1": [1, 1, 0, 0, 1]}).to_parquet(tmp_path / "d.parquet", index=False)
    (tmp_path / "dom.json").write_text('{"a0": 2, "a1": 2}')


PLAN = """
    import json, warnings
    import numpy as np
    import dpmatrix as dm
    from pyspark import SparkContext
    from dpmatrix.errors import DataError
    dom = dm.Domain({"a0": 2, "a1": 2})
    plan = dm.plan(dm.Workload(dom, [("a0", "a1")]), rho=1.0)
    out = {}
"""


def test_startup_noise_is_recognized_and_errors_are_not():
    assert is_startup_noise("WARNING: Using incubator modules: jdk.incubator.vector")
    assert is_startup_noise('Setting default log level to "WARN".')
    assert is_startup_noise("To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).")
    assert is_startup_noise("26/11/28 05:00:00 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform")
    for real in ("Error: Could not create the Java Virtual Machine.", "Invalid maximum heap size: -Xmx1x",
                 "spark FATAL SparkContext: out of memory", "WARNING: an illegal reflective access"):  # fmt: skip
        assert not is_startup_noise(real), real


def test_forward_drops_the_chatter_and_keeps_everything_else():
    src_r, src_w = os.pipe()
    out_r, out_w = os.pipe()
    thread = forward(src_r, out_w)
    lines = [b"WARNING: Using incubator modules: jdk.incubator.vector\n", b"Error: no such file\n",
             b'Setting default log level to "WARN".\n', b"spark FATAL X: broken\n", b"tail without newline"]  # fmt: skip
    for ln in lines:
        os.write(src_w, ln)
    os.close(src_w)
    thread.join(timeout=30)
    assert not thread.is_alive()
    os.close(out_w)
    with os.fdopen(out_r, "rb") as f:
        got = f.read()
    assert got == b"Error: no such file\nspark FATAL X: broken\ntail without newline"


def test_a_bad_argument_starts_no_spark(tmp_path):
    """rng and store are checked before an engine is made: no JVM is launched at all."""
    small_lake(tmp_path)
    res = run_python(PLAN + """
    for kw in ({"rng": 42}, {"store": 3.5}):
        try:
            dm.measure(plan, "d.parquet", engine="spark", **kw)
        except DataError as exc:
            out[next(iter(kw))] = str(exc)
    out["gateway"] = SparkContext._gateway is None
    out["context"] = SparkContext._active_spark_context is None
    print(json.dumps(out))
    """, tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert "rng must be a numpy.random.Generator" in got["rng"]
    assert "store must be a folder path" in got["store"]
    assert got["gateway"] and got["context"], got


def test_a_jvm_that_cannot_start_is_shown(tmp_path):
    """The start-up filter hides chatter only: the JVM's own error reaches stderr, and the CLI
    says in one line that Spark did not start."""
    small_lake(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run(
        [sys.executable, "-m", "dpmatrix", "release", "d.parquet", "--engine", "spark", "--spark-master", "local[1]",
         "--conf", "spark.driver.memory=1x", "--domain", "dom.json", "-w", "all:<=1", "--rho", "1",
         "--out", "r", "--no-ledger", "--quiet"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "Invalid maximum heap size: -Xmx1x" in res.stderr
    assert "dpmatrix: error: Apache Spark failed to start a session on master 'local[1]'" in res.stderr
    assert "unclosed file" not in res.stderr  # the failed JVM's pipe is closed
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_failures_after_the_session_started_stop_it_and_jax_sees_no_fork(tmp_path):
    """An unknown noise name is refused before any session starts; an error raised after
    ``measure`` started a Spark session (a store path that is a file, a code outside the domain in
    the data) stops that session; with JAX initialized first, starting the session forks nothing
    that JAX warns about."""
    import pandas as pd

    small_lake(tmp_path)
    (tmp_path / "not-a-folder").write_text("x")
    pd.DataFrame({"a0": [0, 1, 2], "a1": [1, 0, 1]}).to_parquet(tmp_path / "bad.parquet", index=False)
    res = run_python(PLAN + """
    import jax.numpy as jnp
    jnp.zeros(3).block_until_ready()  # JAX's threads run and its at-fork warning is armed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name, data, kw in (("noise", "d.parquet", {"noise": "nonsense"}),
                               ("store", "d.parquet", {"store": "not-a-folder"}), ("data", "bad.parquet", {})):
            try:
                dm.measure(plan, data, engine="spark", **kw)
                out[name] = "no error"
            except (DataError, ValueError) as exc:
                out[name] = str(exc)
            out[name + "_jvm"] = SparkContext._gateway is not None  # a session had started
            out[name + "_stopped"] = SparkContext._active_spark_context is None
    out["fork_warnings"] = [str(w.message) for w in caught if "fork" in str(w.message)]
    print(json.dumps(out))
    """, tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert "nonsense" in got["noise"] and "exists and is not a folder" in got["store"], got
    assert "outside 0..1" in got["data"], got
    assert not got["noise_jvm"], got  # the noise name is checked before any engine exists
    assert got["store_jvm"] and got["data_jvm"], got  # these fail after the session started...
    assert got["noise_stopped"] and got["store_stopped"] and got["data_stopped"], got  # ...and stop it
    assert got["fork_warnings"] == []
    assert not [c for c in CHATTER if c in res.stderr], res.stderr


@pytest.mark.slow
def test_cli_release_in_local_mode_prints_no_jvm_chatter(tmp_path):
    small_lake(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run(
        [sys.executable, "-m", "dpmatrix", "release", "d.parquet", "--engine", "spark", "--spark-master", "local[1]",
         "--domain", "dom.json", "-w", "all:<=1", "--rho", "1", "--out", "r", "--no-ledger", "--quiet"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "r" / "manifest.json").exists()
    assert not [c for c in CHATTER if c in res.stderr], res.stderr
    # what remains on stderr is dpmatrix's own: the --no-ledger warning
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [
        "dpmatrix: warning: ledger=False: this release is not in any ledger (no privacy-budget record)"
    ]
