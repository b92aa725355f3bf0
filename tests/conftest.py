"""Test-session setup shared by every test directory.

The suite runs on every core through pytest-xdist (``-n auto --dist loadfile`` in
pyproject.toml; ``-n 0`` runs it in one process, e.g. for ``--pdb``). What makes that safe:

* every test writes only below its own ``tmp_path`` (or a ``tmp_path_factory`` folder), never
  to a fixed path; the default privacy ledger below is one throw-away file per process;
* one BLAS thread per process (below): two workers on two cores with a multi-threaded BLAS each
  oversubscribe the cores, and OpenBLAS threads then spin waiting for each other (the fitness
  solver's paper tables took 45-70 s instead of under 1 s on a loaded 2-core machine);
* ``--dist loadfile`` runs all the tests of a file on one worker, so module-scoped fixtures are
  built once, and the session-scoped Spark session and headless Chromium (each used by one file,
  ``tests/engines/test_spark_engine.py`` and ``tests/report/test_report_page.py``) start once per
  run. (Not ``loadgroup`` with ``xdist_group`` marks: pytest-xdist 3.8 cannot group on pytest
  >= 9.2, whose node ids it can no longer suffix — pytest-xdist issue #1386 — and it then
  distributes the marked tests silently one by one);
* Hypothesis' example database (``.hypothesis/``) writes each example atomically (temporary
  file + rename) and a test runs on one worker only, so workers never race on an entry;
* subprocess tests use no network port (the CLI, Chromium's DevTools pipe, Spark with its UI
  off and ephemeral driver ports).
"""

import os as _os
import sys
import tempfile as _tempfile
from pathlib import Path

# tests/ on the path: the brute-force oracle is the package tests/oracle (``import oracle``; it
# never imports dpmatrix), and test helpers are shared as ``from <layer>.test_x import ...``
sys.path.insert(0, str(Path(__file__).parent))

# One BLAS thread per test process unless the caller chose otherwise (see the module docstring).
# Set before numpy is first imported; the limit below covers a BLAS already loaded by a plugin.
# Subprocesses (the CLI, spawned ledger clients) inherit the variables.
_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_caller_chose = "OPENBLAS_NUM_THREADS" in _os.environ
for _var in _BLAS_VARS:
    _os.environ.setdefault(_var, "1")
if not _caller_chose and "numpy" in sys.modules:
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")

# XLA (JAX, under private-pgm's post-processing) compiles each small function at its lowest
# backend optimization level: the post-processing tests compile ~140 functions of tiny arrays,
# and that cut their CPU time by ~18 % (25.4 s -> 21.0 s); the math of each function is the same
if "XLA_FLAGS" not in _os.environ:
    _os.environ["XLA_FLAGS"] = "--xla_backend_optimization_level=0"

# every release is charged to a privacy-budget ledger: tests use a throw-away one, never the
# user's ~/.local/share/dpmatrix/_ledger.sqlite3 (tests that need their own pass --ledger); each
# xdist worker imports this file, so each worker has its own
_os.environ["DPMATRIX_LEDGER"] = _os.path.join(_tempfile.mkdtemp(prefix="dpmatrix-test-ledger-"), "ledger.sqlite3")
# a ledger named by DPMATRIX_LEDGER must exist (a missing one is an error, not a fresh start):
# created here once, as a user would with 'dpmatrix ledger init'
import dpmatrix._ledger as _ledger  # noqa: E402

_ledger.Ledger.create(_os.environ["DPMATRIX_LEDGER"])
