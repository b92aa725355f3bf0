"""The privacy unit: protect a person who contributes up to ``k`` records, not one record.

Many tables repeat a person (visits, stops, transactions). With
``Unit(id_column="person", max_records=k)`` the guarantee is about adding or removing *one
person*: before counting, each identifier keeps at most ``k`` of its records
(:func:`bound_contributions`), and the privacy cost of every mechanism is charged for a change of
up to ``k`` records (:func:`record_budget`).

Sensitivity (derivation). Let ``x`` be the vector of cell counts and ``B`` a mechanism's
strategy (the linear map whose answers get noise). Removing one person removes at most ``k``
records, so ``x - x' = sum_{j<=k} e_{c_j}`` for cells ``c_j``, possibly all the same cell.

* Gaussian (noise covariance ``Σ``): the privacy cost of the pair is
  ``||Σ^{-1/2} B (x - x')||² = ||sum_j Σ^{-1/2} B e_{c_j}||²``
  ``<= (sum_j ||Σ^{-1/2} B e_{c_j}||)² <= k² max_c (BᵀΣ⁻¹B)_{cc}`` (triangle inequality), with
  equality when all ``k`` records fall into the cell with the largest diagonal. So
  ``pcost_person = k² · pcost_record``: ρ-zCDP per person is ``k²`` times ρ per record, and a
  plan for a person-level budget ρ is made for the record-level budget ``ρ / k²``.
* Pure ε-DP (Laplace noise of scale ``b``): ``||B(x - x')||₁ / b <= sum_j ||B e_{c_j}||₁ / b
  <= k · max_c ||B e_c||₁ / b``, equality again when the ``k`` records share the worst column.
  So ``ε_person = k · ε_record``.

Both bounds are attained, so they are the exact person-level costs; ``tests/core/test_unit.py``
checks them by brute force over every neighbouring pair on small domains.

Which records are kept. Per identifier, the ``k`` records with the smallest keyed hash
``HMAC-SHA256(key, id ‖ record)`` (the record's values in the domain's attributes, as text):
the choice depends only on that identifier's own records and a secret key drawn from the OS
for each release, so adding or removing another person never changes who is kept (the
stability the sensitivity argument needs), and nobody can predict or steer the choice.
Records whose identifier is missing are refused (``missing_ids="error"``, the default) or
dropped (``missing_ids="drop"``, stated with the unit).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ._privacy import Budget
from ._statement import privacy_summary, pure_summary
from .errors import BudgetError, DataError

if TYPE_CHECKING:  # pandas is imported where records are bounded, not to state a unit
    import pandas as pd

__all__ = [
    "Unit", "bound_contributions", "person_budget", "record_budget", "unit_from_spec", "unit_privacy", "unit_spec",
]  # fmt: skip

MISSING_IDS = ("error", "drop")


@dataclass(frozen=True)
class Unit:
    """A person identified by ``id_column`` who contributes at most ``max_records`` records.

    Parameters
    ----------
    id_column : str
        Column holding the person's identifier (it is not an attribute of the release).
    max_records : int
        ``k >= 1``: records kept per person; the privacy cost is that of ``k`` records.
    missing_ids : {"error", "drop"}, default "error"
        Records without an identifier: refused, or left out.

    Examples
    --------
    >>> Unit("person", 3).describe()
    'a person (column person) with up to 3 records'
    """

    id_column: str
    max_records: int
    missing_ids: str = "error"

    def __post_init__(self) -> None:
        if not isinstance(self.id_column, str) or not self.id_column:
            raise DataError(f"privacy unit: id_column must be a column name, got {self.id_column!r}")
        k = self.max_records
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) < 1:
            raise DataError(
                f"privacy unit: max_records must be an integer of at least 1, got {k!r} (the "
                "number of records one person may contribute; 1 protects single records)"
            )
        object.__setattr__(self, "max_records", int(k))
        if self.missing_ids not in MISSING_IDS:
            raise DataError(f"privacy unit: missing_ids must be one of {MISSING_IDS}, got {self.missing_ids!r}")

    def describe(self) -> str:
        """The unit in words, as every statement names it."""
        rec = "record" if self.max_records == 1 else "records"
        drop = "; records without an identifier are left out" if self.missing_ids == "drop" else ""
        return f"a person (column {self.id_column}) with up to {self.max_records} {rec}{drop}"

    def to_dict(self) -> dict:
        return {"id_column": self.id_column, "max_records": self.max_records, "missing_ids": self.missing_ids}


def record_budget(budget: Budget, unit: Unit) -> Budget:
    """The per-record budget to plan with so that the person-level cost is ``budget``.

    Gaussian plans: ``pcost_record = pcost_person / k²``; pure ε-DP plans:
    ``ε_record = ε_person / k`` (module docstring).

    Examples
    --------
    >>> record_budget(Budget.zcdp(0.9), Unit("id", 3)).rho
    0.1
    >>> record_budget(Budget.pure(1.5), Unit("id", 3)).pure_epsilon
    0.5
    """
    if not isinstance(budget, Budget):
        raise BudgetError(f"record_budget expects a dpmatrix.Budget, got {type(budget).__name__}")
    k = unit.max_records
    if budget.is_pure:
        return Budget.pure(budget.pure_epsilon / k)
    return Budget(budget.pcost / (k * k))


def person_budget(budget: Budget, unit: Unit) -> Budget:
    """Inverse of :func:`record_budget`: the person-level cost of a per-record plan."""
    k = unit.max_records
    if budget.is_pure:
        return Budget.pure(budget.pure_epsilon * k)
    return Budget(budget.pcost * k * k)


def _budget_numbers(budget: Budget) -> dict:
    if budget.is_pure:
        return {"epsilon": budget.pure_epsilon}
    return {"rho": budget.rho, "pcost": budget.pcost}


def unit_spec(unit: Unit, budget: Budget) -> dict:
    """The ``privacy_unit`` entry of a saved plan: the unit, and the budget it implies.

    ``budget`` is the plan's own (per-record) budget; ``per_record`` repeats it and
    ``per_person`` is :func:`person_budget` of it (ρ·k², ε·k), which a release of the plan states
    and charges. :func:`unit_from_spec` reads the entry back and checks the two agree.

    Examples
    --------
    >>> unit_spec(Unit("person", 3), Budget.zcdp(0.1))["per_person"]["rho"]
    0.9000000000000001
    """
    return {
        **unit.to_dict(),
        "description": unit.describe(),
        "per_record": _budget_numbers(budget),
        "per_person": _budget_numbers(person_budget(budget, unit)),
    }


def unit_from_spec(spec: object, budget: Budget, what: str = "plan") -> Unit:
    """The :class:`Unit` of a saved plan's ``privacy_unit`` entry (see :func:`unit_spec`).

    Raises :class:`~dpmatrix.errors.DataError` when the entry is malformed, and when its stated
    per-person budget is not ``person_budget(budget, unit)`` (relative tolerance 1e-9) for the
    plan's budget ``budget``: an edited ``max_records`` would otherwise change what a release
    charges and states without changing the noise.

    Examples
    --------
    >>> spec = unit_spec(Unit("person", 2), Budget.zcdp(0.25))
    >>> unit_from_spec(spec, Budget.zcdp(0.25)).describe()
    'a person (column person) with up to 2 records'
    """
    import math

    if not isinstance(spec, dict):
        raise DataError(f"{what}: privacy_unit must be an object with id_column and max_records, got {spec!r}")
    try:
        unit = Unit(str(spec["id_column"]), spec["max_records"], missing_ids=str(spec.get("missing_ids", "error")))
    except KeyError as exc:
        raise DataError(f"{what}: privacy_unit has no {exc.args[0]!r}") from None
    stated = spec.get("per_person")
    want = _budget_numbers(person_budget(budget, unit))
    key = "epsilon" if "epsilon" in want else "rho"
    try:
        ok = isinstance(stated, dict) and math.isclose(float(stated[key]), want[key], rel_tol=1e-9)
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        raise DataError(
            f"{what}: privacy_unit states a per-person {key} of "
            f"{stated.get(key) if isinstance(stated, dict) else None!r}, but the plan's noise with up to "
            f"{unit.max_records} records per person spends {key} = {want[key]:.6g}: the file was edited after "
            "it was planned; refusing it (plan again with --privacy-id/--max-records)"
        )
    return unit


@dataclass(frozen=True)
class _Spend:
    """The numbers a privacy statement is rendered from (see :mod:`dpmatrix._statement`)."""

    rho: float = 0.0
    pcost: float = 0.0
    pure_epsilon: float = 0.0


def unit_privacy(privacy: dict, unit: Unit, *, noise: str, delta: float) -> dict:
    """A manifest ``privacy`` section that names the unit.

    The top-level numbers stay those of the mechanisms (per record, checked against the noise
    scales when a release is loaded); ``"unit"`` adds the person: the id column, ``k``, the
    sentence, and ``"per_person"`` — the same statement for a change of one person with up to
    ``k`` records (ρ·k², ε·k for pure ε-DP; module docstring), which is what the ledger is
    charged and what the console, README and report state first.

    Examples
    --------
    >>> rec = privacy_summary(_Spend(rho=0.1, pcost=0.2), noise="discrete_gaussian", delta=1e-9)
    >>> out = unit_privacy(rec, Unit("person", 3), noise="discrete_gaussian", delta=1e-9)
    >>> round(out["unit"]["per_person"]["rho"], 12), out["unit"]["statement"][:37]
    (0.9, 'rho = 0.9 (zCDP) per person: protects')
    """
    k = unit.max_records
    if noise == "discrete_laplace" or privacy.get("pure_epsilon") is not None:
        person = pure_summary(_Spend(pure_epsilon=float(privacy["pure_epsilon"]) * k))
        head = f"epsilon = {person['pure_epsilon']:.6g} (pure DP)"
    else:
        person = privacy_summary(_Spend(rho=float(privacy["rho"]) * k * k, pcost=float(privacy["pcost"]) * k * k),
                                 noise=noise, delta=delta)  # fmt: skip
        head = f"rho = {person['rho']:.6g} (zCDP)"
    who = unit.describe()
    person.pop("reproducible", None)
    person["definition"] = person["definition"].replace("one record", who)
    return {
        **privacy,
        "definition": privacy["definition"] + " (per record; per person: unit.per_person)",
        "unit": {
            **unit.to_dict(),
            "description": who,
            "statement": f"{head} per person: protects {who}; each identifier keeps at most {k} of its "
            "records (the k with the smallest keyed hash of identifier and record)",
            "per_person": person,
        },
    }


def _keyed_ranks(ids: pd.Series, rows: pd.DataFrame, key: bytes) -> np.ndarray:
    out = np.empty(len(rows), dtype=object)
    text = rows.astype(str).agg("\x1f".join, axis=1).to_numpy()
    for i, (pid, rec) in enumerate(zip(ids.astype(str).to_numpy(), text)):
        out[i] = hmac.new(key, f"{pid}\x1e{rec}".encode(), hashlib.sha256).digest()
    return out


def bound_contributions(
    df: pd.DataFrame, unit: Unit, columns: Sequence[str] | None = None, *, key: bytes | None = None,
    na_values: Sequence[str] = (),
) -> pd.DataFrame:
    """Keep at most ``unit.max_records`` records per identifier (module docstring: which ones).

    Parameters
    ----------
    df : pandas.DataFrame
        Records with the identifier column.
    unit : Unit
    columns : sequence of str, optional
        The record's content hashed with the identifier (default: every column but the id).
    key : bytes, optional
        Secret HMAC key; default 32 bytes from the OS (:func:`secrets.token_bytes`). Give one
        only to reproduce a selection in tests.
    na_values : sequence of str, optional
        Text markers that also mean a missing identifier (as for the attributes' values).

    Returns
    -------
    pandas.DataFrame
        The kept records, in their original order, without the identifier column.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"id": [1, 1, 1, 2], "x": ["a", "b", "c", "d"]})
    >>> len(bound_contributions(df, Unit("id", 2)))
    3
    """
    import pandas as pd

    from ._encode import missing_columns_message
    from ._values import missing_mask

    if unit.id_column not in df.columns:
        raise DataError("privacy unit: " + missing_columns_message([unit.id_column], [str(c) for c in df.columns]))
    ids = df[unit.id_column]
    miss = missing_mask(ids, na_values)
    if miss.any():
        if unit.missing_ids == "error":
            raise DataError(
                f"privacy unit: {int(miss.sum())} record(s) have no identifier in column "
                f"{unit.id_column!r}; fix: fill them in, or leave them out with missing_ids='drop' "
                "(CLI --missing-ids drop; stated with the unit)"
            )
        df, ids = df[~miss], ids[~miss]
    cols = [c for c in (columns if columns is not None else df.columns) if c != unit.id_column]
    ranks = _keyed_ranks(ids, df[cols], key if key is not None else secrets.token_bytes(32))
    order = pd.DataFrame({"id": ids.astype(str).to_numpy(), "r": ranks, "pos": np.arange(len(df))})
    order = order.sort_values(["id", "r"], kind="stable")
    keep_pos = order.groupby("id", sort=False).head(unit.max_records)["pos"].to_numpy()
    kept = df.iloc[np.sort(keep_pos)]
    return kept.drop(columns=[unit.id_column])
