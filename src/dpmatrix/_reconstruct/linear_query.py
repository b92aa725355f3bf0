"""Counts, ranges, sums and differences of counts, with the exact variance of the reconstruction.

A count ``Σ_{cells c selected} x_c`` over a marginal ``x_M`` is the linear query ``q · x_M`` with
``q = ⊗_{a∈M} s_a`` (``s_a`` the indicator of the values selected on attribute ``a``); a difference
of two counts is ``(q₁ − q₂) · x_M``. Its estimate ``q · x̂_M`` is unbiased and its variance is
``qᵀ Cov(x̂_M) q`` — the full covariance of the reconstruction, computed by the plan's estimator
(:meth:`Estimator.query_vector <dpmatrix._reconstruct.estimator.Estimator.query_vector>`; for the
ResidualPlanner family ``Σ_{A⊆M} σ²_A ‖p_A‖²_{K_A}``, RP+ Theorem 4.4 applied to ``q``).

**Summing the variances of the selected cells is wrong**: the cells of a reconstructed marginal are
correlated (they share the noise of every lower-order residual), so ``Σ_c Var(x̂_c)`` ignores the
covariances ``Cov(x̂_c, x̂_d)``, which are negative within a residual and positive through shared
lower-order terms. For the total of a 2-way table the naive sum over-states the variance many
times over (the exact variance is that of the 0-way residual alone).

An attribute along which ``q`` is constant is summed out first (``q = q' ⊗ 1``, so
``q · x_M = q' · x_{M∖a}``): a selection of every value of an attribute needs no marginal on it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .._selection import Codes, selector
from ..errors import NotMeasuredError, WorkloadError

__all__ = ["GroupedAnswer", "count", "match_value", "parse_where", "query_vectors"]

Where = Mapping[str, object]


def match_value(attr, text: str, encoding: str = "labels"):
    """The selection (:func:`dpmatrix._selection.selector` form) meant by the text ``text`` for one
    attribute: ``LO..HI`` an inclusive range, ``V1,V2`` a set, else one value; each value a
    label, a raw number of a binned attribute, or (``encoding="codes"``) a code.

    Examples
    --------
    >>> from dpmatrix._domain import Attribute
    >>> match_value(Attribute("age", 5, "ordinal"), "1..3")
    (1, 3)
    >>> match_value(Attribute("sex", 2, labels=("F", "M")), "F,M")
    ['F', 'M']
    """
    text = str(text).strip()
    if encoding not in ("labels", "codes"):
        raise WorkloadError(f"encoding must be 'labels' or 'codes', got {encoding!r}")
    if encoding == "labels" and attr.labels is not None and text in attr.labels:
        return text  # a label holding ',' or '..' is taken whole

    def one(tok: str):
        tok = tok.strip()
        if encoding == "codes":
            try:
                return int(tok)
            except ValueError:
                raise WorkloadError(f"{tok!r} is not a code of {attr.name!r} (codes are 0..{attr.size - 1})") from None
        if attr.labels is not None:
            return tok
        try:
            x = float(tok)
        except ValueError:
            raise WorkloadError(
                f"{tok!r} is not a value of {attr.name!r}: it has no labels, so give numbers"
                + (" in its units (bin edges for ranges)" if attr.bins is not None else " (its codes)")
            ) from None
        if attr.bins is not None:
            return x
        if not x.is_integer():
            raise WorkloadError(f"{tok!r} is not a code of {attr.name!r} (codes are 0..{attr.size - 1})")
        return int(x)

    if ".." in text:
        lo, _, hi = text.partition("..")
        if attr.kind == "categorical" and attr.labels is not None:  # in codes too: the same values
            raise WorkloadError(
                f"{attr.name!r} is categorical: its values have no order, so a range {text!r} means "
                f"nothing; list the values instead ({attr.name}=V1,V2,...)"
            )
        sel = (one(lo), one(hi))
        if encoding != "codes":
            return sel
        if sel[1] < sel[0]:
            raise WorkloadError(f"empty code range {text!r} for {attr.name!r}")
        return Codes(tuple(range(sel[0], sel[1] + 1)))
    if "," in text:
        vals = [one(t) for t in text.split(",") if t.strip()]
        return Codes(tuple(vals)) if encoding == "codes" else vals
    v = one(text)
    return Codes((v,)) if encoding == "codes" else v


def parse_where(domain, texts: Sequence[str], encoding: str = "labels") -> dict[str, object]:
    """``{attribute: selection}`` from ``ATTR=SELECTION`` texts (ANDed; see :func:`match_value`).

    Examples
    --------
    >>> import dpmatrix as dm
    >>> dom = dm.Domain.from_dict({"age": {"size": 90, "kind": "ordinal"}, "sex": {"labels": ["F", "M"]}})
    >>> parse_where(dom, ["age=25..54", "sex=F"])
    {'age': (25, 54), 'sex': 'F'}
    """
    out: dict[str, object] = {}
    for t in texts:
        name, eq, sel = str(t).partition("=")
        name = name.strip()
        if not eq or not name:
            raise WorkloadError(f"a condition is ATTR=VALUE, ATTR=LO..HI or ATTR=V1,V2; got {t!r}")
        attr = domain.attributes[domain.resolve([name])[0]]
        if attr.name in out:
            raise WorkloadError(f"{attr.name!r} is constrained twice; give one condition per attribute")
        out[attr.name] = match_value(attr, sel, encoding)
    return out


def _indicator(domain, where: Where) -> dict[int, np.ndarray]:
    out = {}
    for name, sel in where.items():
        a = domain.resolve([name])[0]
        if a in out:
            raise WorkloadError(f"{domain.names[a]!r} is constrained twice")
        v = selector(domain.attributes[a], sel)
        if not v.any():
            raise WorkloadError(f"the condition on {domain.names[a]!r} selects no value")
        out[a] = v
    return out


def query_vectors(domain, where: Where | None = None, by: Sequence[str] | str | None = None,
                  contrast: Sequence[Where] | None = None):
    """``(key, queries, groups)``: the attribute positions of the smallest marginal that holds the
    question, its query vectors (one per group of ``by``; shaped like that marginal) and the
    group labels (one tuple per query; ``()`` without ``by``).

    ``where`` selects values per attribute (unnamed attributes are summed over); ``contrast=(A,
    B)`` asks ``count(where ∧ A) − count(where ∧ B)``; ``by`` gives one query per value (or
    combination of values) of its attributes."""
    where = dict(where or {})
    base = _indicator(domain, where)
    if contrast is not None:
        if len(contrast) != 2:
            raise WorkloadError("contrast is a pair (A, B) of conditions: count(where & A) - count(where & B)")
        sides = [_indicator(domain, dict(c)) for c in contrast]
    else:
        sides = [{}]
    by_key = () if by is None else domain.resolve([by] if isinstance(by, str) else list(by))
    attrs = set(base) | set(by_key)
    for s in sides:
        attrs |= set(s)
    key = tuple(sorted(attrs))
    sizes = [domain.sizes[a] for a in key]

    def product(factors: dict[int, np.ndarray]) -> np.ndarray:
        q = np.ones(())
        for a, n in zip(key, sizes):
            q = np.multiply.outer(q, factors.get(a, np.ones(n)))
        return q

    def side(extra: dict[int, np.ndarray], group: dict[int, np.ndarray]) -> np.ndarray:
        f = dict(base)
        for a, v in list(extra.items()) + list(group.items()):
            f[a] = f[a] * v if a in f else v
        return product(f)

    queries, groups = [], []
    for combo in itertools.product(*[range(domain.sizes[a]) for a in by_key]):
        g = {a: _one_hot(domain.sizes[a], c) for a, c in zip(by_key, combo)}
        q = side(sides[0], g)
        if contrast is not None:
            q = q - side(sides[1], g)
        queries.append(q)
        groups.append(tuple(_group_label(domain.attributes[a], c) for a, c in zip(by_key, combo)))
    return _sum_out(key, np.array(queries), by_key) + (groups,)


def _one_hot(n: int, c: int) -> np.ndarray:
    """The indicator of value ``c`` among ``n`` (a row of the identity, without building it)."""
    e = np.zeros(n)
    e[c] = 1.0
    return e


def _group_label(attr, code: int):
    """A group's label as in the tidy tables: the value label, or the plain integer code."""
    if attr.labels is None and getattr(attr, "bins", None) is None:
        return int(code)
    return attr.label(code)


def _sum_out(key: tuple[int, ...], Q: np.ndarray, keep: Sequence[int]):
    """Drop every attribute along which all queries are constant (``q = q' ⊗ 1``)."""
    kept = list(key)
    for j in reversed(range(len(key))):
        ax = j + 1
        first = np.take(Q, [0], axis=ax)
        if key[j] not in keep and np.array_equal(Q, np.broadcast_to(first, Q.shape)):
            Q = np.take(Q, 0, axis=ax)
            kept.pop(j)
    return tuple(kept), list(Q)


@dataclass(frozen=True)
class GroupedAnswer:
    """One :class:`~dpmatrix._reconstruct.measurements.QueryAnswer` per group of a ``by`` query."""

    by: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]
    answers: tuple

    def columns(self):
        """The columns of :meth:`to_frame` as ``(columns, kinds, values)`` lists, without pandas
        (group labels as text, the statistics as floats; :mod:`dpmatrix._table_text`)."""
        stats = ("estimate", "variance", "std", "lower", "upper", "level")
        groups = tuple([g[i] for g in self.groups] for i in range(len(self.by)))
        # a coded attribute's groups are integers (an integer column), a labelled one's text
        kinds = tuple("int" if all(isinstance(v, (int, np.integer)) for v in col) else "text" for col in groups)
        values = tuple(col if k == "int" else [str(v) for v in col] for col, k in zip(groups, kinds))
        values += tuple([float(getattr(a, c)) for a in self.answers] for c in stats)
        return tuple(self.by) + stats, kinds + ("float",) * len(stats), values

    def to_frame(self):
        """Tidy table: the ``by`` columns, then ``estimate, variance, std, lower, upper, level``."""
        import pandas as pd

        rows = [dict(zip(self.by, g)) | a.to_frame().iloc[0].to_dict() for g, a in zip(self.groups, self.answers)]
        return pd.DataFrame(rows, columns=list(self.by) + ["estimate", "variance", "std", "lower", "upper", "level"])


def count(meas, where: Where | None = None, *, by=None, contrast=None, level: float = 0.95):
    """Estimate of a count (or a difference of counts) with its exact variance and interval.

    Parameters
    ----------
    meas : Measurements
        The reconstruction to ask (no data, no budget).
    where : mapping, optional
        Per attribute a value, an inclusive range ``(lo, hi)``, a list, or ``dpmatrix.codes(...)``
        (:mod:`dpmatrix._selection`); conditions are ANDed, other attributes summed over.
    by : str or list of str, optional
        One answer per value of these attributes.
    contrast : pair of mappings, optional
        ``(A, B)``: the answer is ``count(where ∧ A) − count(where ∧ B)``, with the variance of
        the difference (not the sum of the two variances: they are correlated).
    level : float
        Confidence level of the normal interval.

    Returns
    -------
    QueryAnswer or GroupedAnswer
        ``estimate``, exact ``variance``, ``std``, ``lower``, ``upper``; ``to_frame()`` gives
        tidy rows.

    Examples
    --------
    >>> import numpy as np, pandas as pd, dpmatrix as dm
    >>> plan = dm.plan(dm.Workload(dm.Domain({"a": 3, "b": 2}), [("a", "b")]), pcost=1e12)
    >>> meas = plan.measure(pd.DataFrame({"a": [0, 1, 2, 2], "b": [0, 1, 1, 0]}), rng=np.random.default_rng(0))
    >>> round(count(meas, {"a": (1, 2), "b": 1}).estimate, 3)
    2.0
    >>> count(meas, by="b").to_frame()["estimate"].round(3).tolist()
    [2.0, 2.0]
    """
    dom = meas.plan.domain
    grouped = _grouped(meas, where, by, contrast, level)
    if grouped is not None:
        return grouped
    key, queries, groups = query_vectors(dom, where, by, contrast)
    answers = []
    for q in queries:
        try:
            a = meas.query_vector(key, q)
        except NotMeasuredError as exc:
            raise _not_answerable(dom, key, exc) from None
        answers.append(a.at_level(level))
    if by is None:
        return answers[0]
    by_names = dom.names_of(dom.resolve([by] if isinstance(by, str) else list(by)))
    return GroupedAnswer(tuple(by_names), tuple(groups), tuple(answers))


def _not_answerable(dom, key, exc: NotMeasuredError) -> NotMeasuredError:
    """The error of a question whose marginal on ``key`` these measurements cannot answer
    (``exc``: the estimator's reason), saying how to ask instead."""
    return NotMeasuredError(
        f"this question needs the marginal on {list(dom.names_of(key)) or 'total'}, which these "
        f"measurements cannot answer ({exc}); ask about fewer attributes at once (any marginal "
        "of the workload's closure answers), or plan a workload that contains this marginal"
    )


def _grouped(meas, where, by, contrast, level: float):
    """``count(..., by=...)`` unless a ``contrast`` side names a ``by`` attribute: every group's
    query is ``f_g · (e_g ⊗ w)`` with one ``w`` on the other attributes and ``f_g ∈ {0, 1}`` the
    product of the ``where`` indicators of the ``by`` attributes at the group's values (``1``
    when ``where`` names none of them), answered for all groups at once by the estimator
    (:meth:`~dpmatrix._reconstruct.estimator.Estimator.grouped_queries`: O(cells) for plain
    plans instead of one query vector per group); a group the condition leaves out
    (``f_g = 0``) is the zero query: estimate 0, variance 0. ``None`` when a contrast side
    constrains a ``by`` attribute (its groups mix up to three queries; the general path builds
    one query per group)."""
    if by is None:
        return None
    dom = meas.plan.domain
    by_key = dom.resolve([by] if isinstance(by, str) else list(by))
    for side in contrast or ():
        if side and set(dom.resolve(list(dict(side)))) & set(by_key):
            return None
    where = dict(where or {})
    on_by = {name: sel for name, sel in where.items() if dom.resolve([name])[0] in by_key}
    rest = {name: sel for name, sel in where.items() if name not in on_by}
    rest_key, ws, _ = query_vectors(dom, rest, None, contrast)
    key = tuple(sorted(set(rest_key) | set(by_key)))
    by_pos = tuple(key.index(a) for a in by_key)  # ascending: by_key is in domain order
    shape = tuple(dom.sizes[a] for a in key)
    try:
        answers = meas.grouped_answers(key, by_pos, shape, np.asarray(ws[0], dtype=float), level)
    except NotMeasuredError as exc:
        raise _not_answerable(dom, key, exc) from None
    kept = np.ones(())  # f_g over the by attributes' values (C order, as the answers)
    for a, sel in zip(by_key, (_indicator(dom, on_by).get(a) for a in by_key)):
        kept = np.multiply.outer(kept, np.ones(dom.sizes[a]) if sel is None else sel)
    # a left-out group: the zero query's answer (the same QueryAnswer type, estimate and variance 0)
    answers = [a if f else replace(a, estimate=0.0, variance=0.0) for a, f in zip(answers, kept.reshape(-1))]
    groups = [tuple(_group_label(dom.attributes[a], c) for a, c in zip(by_key, combo))
              for combo in itertools.product(*[range(dom.sizes[a]) for a in by_key])]
    return GroupedAnswer(tuple(dom.names_of(by_key)), tuple(groups), tuple(answers))


def naive_cell_sum_variance(meas, key, q: np.ndarray) -> float:
    """``Σ_c q_c² Var(x̂_c)``: what summing the cells' variances by hand gives (wrong unless the
    cells are uncorrelated; kept to show the difference)."""
    return float(np.sum(np.asarray(q) ** 2 * np.broadcast_to(meas.variance(key), np.shape(q))))
