"""Plans and releases written before the implementation modules became private still load.

``tests/data/legacy_main/`` holds files written by ``make_legacy.py`` with the code as it was
before the rename (see ``SOURCE.txt``): four plans (ResidualPlanner, QuerySmasher, pure ε-DP,
LSA/explicit) and two releases (ResidualPlanner, pure) of R's ``esoph`` table. Plan files and
manifests name their class by a format string (``"dpmatrix.plan/1"``), not a module path, so a
renamed module does not change what they mean; these tests keep it that way.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import dpmatrix as dm
from stored_arrays import as_lists

DATA = Path(__file__).parent / "data" / "legacy_main"

PLANS = {
    "residual": dm.ResidualPlan,
    "querysmasher": dm.QuerySmasherPlan,
    "pure": dm.PurePlan,
    "lsa": dm.ExplicitStrategyPlan,
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_an_old_plan_file_reads_back_as_its_class_and_writes_the_same_description(name):
    spec = json.loads((DATA / f"plan_{name}.json").read_text())
    plan = dm.plan_from_dict(spec)
    assert type(plan) is PLANS[name]
    got = json.loads(json.dumps(plan.to_dict()))
    # the privacy statement's prose may name a module (the lattice sampler's, renamed since):
    # it is text for a reader, not read back; every number and every other entry is the same
    for d in (got, spec):
        d.get("privacy", {}).pop("definition", None)
    # a QuerySmasher plan now also stores its solved sub-mechanisms (read back without solving);
    # the old file has none, is re-planned, and every entry it has is written the same
    if "solutions" not in spec:
        got.pop("solutions", None)
    # an explicit strategy (and its query matrices) are now stored as exact float64 bytes with
    # the eigendecomposition beside it; written out as lists, every number is the same
    assert as_lists(got) == spec


@pytest.mark.parametrize("name", ["release_residual", "release_pure"])
def test_an_old_release_loads_verified_and_gives_the_answers_it_stored(name):
    folder = DATA / name
    rel = dm.load_release(folder)  # verify=True: every file against the manifest's SHA-256
    stored = pq.read_table(folder / "tables" / "part-00000.parquet").to_pandas()
    assert len(rel.marginals) == 3
    for attrs in rel.marginals:
        key = ",".join(attrs)
        want = stored[stored["marginal"] == key]
        got = rel.marginal(attrs)
        assert len(got) == len(want) > 0
        merged = got.merge(want, on=list(attrs), suffixes=("", "_stored"))
        assert len(merged) == len(want)
        for col in ("estimate", "variance", "lower", "upper"):
            np.testing.assert_allclose(merged[col], merged[f"{col}_stored"], rtol=1e-9, atol=1e-9)
