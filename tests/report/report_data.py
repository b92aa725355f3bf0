"""The small Adult release used by the report tests (shipped data, five attributes)."""

import os
from pathlib import Path

import pandas as pd

import dpmatrix as dm

DATA = Path(__file__).resolve().parents[2] / "src" / "dpmatrix" / "data"

#: a few Adult attributes: one with 16 values (vertical bar chart), small categorical ones, and
#: the binary income indicator with labels (so labels from the domain reach the page)
ADULT_ATTRS = ("education-num", "marital-status", "race", "sex", "income>50K")
INCOME_LABELS = ["<=50K", ">50K"]


def adult_domain() -> dm.Domain:
    sizes = dm.Domain.from_json(DATA / "adult-domain.json")
    spec = {a: sizes.sizes[sizes.index(a)] for a in ADULT_ATTRS}
    spec["income>50K"] = {"size": 2, "labels": INCOME_LABELS}
    return dm.Domain.from_dict(spec)


def adult_codes() -> pd.DataFrame:
    return pd.read_csv(DATA / "adult.csv", usecols=list(ADULT_ATTRS))[list(ADULT_ATTRS)]


def save_screenshot(png: bytes, name: str, tmp_path: Path) -> Path:
    """Keep a screenshot next to the test's files (and in $DPMATRIX_SCREENSHOTS if set)."""
    path = tmp_path / name
    path.write_bytes(png)
    extra = os.environ.get("DPMATRIX_SCREENSHOTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        (Path(extra) / name).write_bytes(png)
    return path
