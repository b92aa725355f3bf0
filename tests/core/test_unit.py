"""Privacy unit: per-person contribution bounding and the person-level cost, checked by brute
force over every neighbouring pair of datasets differing in one person on small domains."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from dpmatrix._privacy import Budget
from dpmatrix._unit import Unit, bound_contributions, person_budget, record_budget
from dpmatrix.errors import DataError


def _strategy():
    """All one-way marginals and the total of a 2 x 3 domain (6 cells), stacked by hand."""
    one2, one3 = np.ones((1, 2)), np.ones((1, 3))
    return np.vstack([np.kron(np.eye(2), one3), np.kron(one2, np.eye(3)), np.kron(one2, one3)])


def _person_moves(n_cells: int, k: int):
    """x - x' of every pair differing in one person with up to k records (any cells, repeats)."""
    for m in range(1, k + 1):
        for cells in itertools.combinations_with_replacement(range(n_cells), m):
            d = np.zeros(n_cells)
            for c in cells:
                d[c] += 1
            yield d


@pytest.mark.parametrize("k", [1, 2, 3])
def test_gaussian_person_cost_is_k_squared_record_cost_by_brute_force(k):
    B = _strategy()
    sigma2 = np.array([1.0, 2.0, 0.5, 0.7, 3.0, 1.5])[: B.shape[0] - 1].tolist() + [4.0]
    Sinv = np.diag(1 / np.asarray(sigma2))
    record = float(np.max(np.diag(B.T @ Sinv @ B)))  # the definition: largest diagonal
    worst = max(float((B @ d) @ Sinv @ (B @ d)) for d in _person_moves(B.shape[1], k))
    assert worst == pytest.approx(k * k * record, rel=1e-12)
    # a plan made for record_budget(person budget) costs exactly the person budget per person
    person = Budget(worst)
    assert record_budget(person, Unit("id", k)).pcost == pytest.approx(record, rel=1e-12)
    assert person_budget(Budget(record), Unit("id", k)).pcost == pytest.approx(worst, rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_pure_person_epsilon_is_k_times_record_epsilon_by_brute_force(k):
    B = _strategy()
    b = np.array([0.5, 1.0, 2.0, 1.0, 0.25, 1.0])[:, None]  # Laplace scale per row
    record = float(np.max(np.abs(B / b).sum(axis=0)))  # max column L1 of the scaled strategy
    worst = max(float(np.abs((B @ d) / b[:, 0]).sum()) for d in _person_moves(B.shape[1], k))
    assert worst == pytest.approx(k * record, rel=1e-12)
    assert record_budget(Budget.pure(worst), Unit("id", k)).pure_epsilon == pytest.approx(record)


def test_bound_contributions_keeps_at_most_k_per_person_chosen_by_own_records_only():
    df = pd.DataFrame({"id": ["a"] * 5 + ["b"] * 2 + ["c"], "x": list("pqrstuvw"), "y": range(8)})
    key = b"k" * 32
    kept = bound_contributions(df, Unit("id", 3), key=key)
    assert "id" not in kept.columns and len(kept) == 3 + 2 + 1
    assert set(kept.index) <= set(df.index) and {6, 7, 5} <= set(kept.index)  # b, c keep all
    # stability: another person's records never change who of "a" is kept
    more = pd.concat([df, pd.DataFrame({"id": ["d"] * 4, "x": list("wxyz"), "y": range(4)})], ignore_index=True)
    kept2 = bound_contributions(more, Unit("id", 3), key=key)
    a_rows = lambda t: sorted(t.loc[[i for i in t.index if i < 5]].index)  # noqa: E731
    assert a_rows(kept) == a_rows(kept2)
    # a fresh OS key by default: the choice is not fixed in advance (over many draws both differ)
    picks = {tuple(sorted(bound_contributions(df, Unit("id", 1)).index)) for _ in range(40)}
    assert len(picks) > 1


def test_unit_errors_are_typed_and_say_what_to_do():
    for k in (0, -1, 1.5, True):
        with pytest.raises(DataError, match="max_records must be an integer of at least 1"):
            Unit("id", k)
    df = pd.DataFrame({"id": ["a", None, "b", ""], "x": [1, 2, 3, 4]})
    with pytest.raises(DataError, match="2 record\\(s\\) have no identifier .* missing_ids='drop'"):
        bound_contributions(df, Unit("id", 1))
    assert len(bound_contributions(df, Unit("id", 1, missing_ids="drop"))) == 2
    assert "left out" in Unit("id", 2, missing_ids="drop").describe()
    with pytest.raises(DataError, match="did you mean 'ID'"):
        bound_contributions(df.rename(columns={"id": "ID"}), Unit("id", 1))
