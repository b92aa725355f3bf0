"""Fixtures of the report tests: a headless Chromium, a small Adult release and its plan.

The browser tests are not optional: when Debian's ``chromium`` package is missing they FAIL
(``apt-get install -y chromium``), they are never skipped.
"""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from report_data import adult_codes, adult_domain  # noqa: E402

import dpmatrix as dm  # noqa: E402
from dpmatrix.release import write_release  # noqa: E402


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the session (fails, never skips, when it is not installed)."""
    from report_browser import CHROMIUM, Browser

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: the report tests need Debian's chromium package "
                    "(apt-get install -y chromium)", pytrace=False)
    with Browser(width=1280, height=900) as b:
        yield b


@pytest.fixture(scope="session")
def adult_plan():
    wk = dm.Workload.marginals(adult_domain(), 2, upto=True)
    return dm.plan(wk, rho=0.5, objective="max_var")


@pytest.fixture(scope="session")
def adult_release(tmp_path_factory, adult_plan):
    """A release folder of all ≤2-way marginals of five Adult attributes, with its report."""
    from dpmatrix._report import write_release_report

    out = tmp_path_factory.mktemp("adult") / "release"
    meas = adult_plan.measure(adult_codes(), rng=np.random.default_rng(20240601))
    write_release(meas, out)
    write_release_report(out)
    return out
