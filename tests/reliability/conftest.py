"""Fixtures of the fault-injection suite (helpers live in ``_support``)."""

from __future__ import annotations

import json

import pytest

from ._support import DOMAIN, frame


@pytest.fixture()
def small(tmp_path):
    """A data file, its domain file and a private ledger path in a fresh folder."""
    frame().to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "domain.json").write_text(json.dumps(DOMAIN))
    return tmp_path
