"""The data domain: an ordered list of named, finite attributes.

A record is a tuple of integer codes, one per attribute, each in ``0..size-1``. The data vector
``x`` of the papers (one count per possible record, ``prod(sizes)`` entries) is never built; the
domain only tells the other phases the names and sizes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._dates import DateBins
from ._jsonfile import read_json
from .errors import DomainError, UnknownAttributeError, WorkloadError

KINDS = ("categorical", "ordinal")

#: Label that marks the catch-all code raw values may be sent to with ``on_unknown="other"``.
OTHER_LABEL = "other"

#: Label of the extra last code of an attribute whose missing values are a category.
MISSING_LABEL = "(missing)"

#: What happens to a record whose value of an attribute is missing (NaN, None, NULL, an empty
#: cell or a declared marker): ``"error"`` (refused, the default), ``"category"`` (one more code,
#: the last, labelled :data:`MISSING_LABEL`, released like any other value) or ``"drop"`` (the
#: record is left out of every marginal of a release that uses the attribute).
MISSING_POLICIES = ("error", "category", "drop")


@dataclass(frozen=True)
class Attribute:
    """One attribute: a name, a number of values, and optional metadata.

    ``kind`` is ``"categorical"`` (unordered values) or ``"ordinal"`` (ordered values: ranges and
    prefix sums make sense). ``labels`` names each code ``0..size-1`` for display; raw values
    are matched to codes by their label string (see :mod:`dpmatrix._encode`).

    ``bins`` (numeric attributes): edges ``e_0 < e_1 < ... < e_k`` defining ``k`` bins; a raw
    value ``v`` gets code ``i`` when ``e_i <= v < e_{i+1}`` (the last bin is closed). ``size`` is
    ``k``, or ``k + 1`` when the extra last code is a catch-all labelled ``"other"``.

    ``dates`` (date attributes, :class:`~dpmatrix._dates.DateBins`): bins of whole calendar
    periods; a date value gets the code of the period holding it (:mod:`dpmatrix._dates`); the
    labels name the periods (``"2015-12"``), ``bins`` is ``None``.

    ``missing`` (see :data:`MISSING_POLICIES`): with ``"category"`` the last code
    (``size - 1``) holds the missing values; ``size`` and ``labels`` include it (its label is
    :data:`MISSING_LABEL`), bins do not.
    """

    name: str
    size: int
    kind: str = "categorical"
    labels: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    bins: tuple[float, ...] | None = None
    missing: str = "error"
    dates: DateBins | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DomainError(f"attribute names must be non-empty strings, got {self.name!r}")
        if isinstance(self.size, bool) or not isinstance(self.size, (int,)) and not hasattr(
            self.size, "__index__"
        ):
            raise DomainError(f"attribute {self.name!r}: size must be an integer, got {self.size!r}")
        size = int(self.size)
        if size < 2:
            raise DomainError(
                f"attribute {self.name!r}: size must be at least 2 (an attribute with {size} "
                "value(s) carries no information); drop it from the domain instead"
            )
        object.__setattr__(self, "size", size)
        if self.kind not in KINDS:
            raise DomainError(
                f"attribute {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}"
            )
        if self.missing not in MISSING_POLICIES:
            raise DomainError(
                f"attribute {self.name!r}: missing must be one of "
                f"{', '.join(map(repr, MISSING_POLICIES))}, got {self.missing!r}"
            )
        if self.labels is not None:
            labels = tuple(str(v) for v in self.labels)
            if len(labels) != size:
                raise DomainError(
                    f"attribute {self.name!r}: {len(labels)} labels given for {size} values"
                )
            if len(set(labels)) != len(labels):
                raise DomainError(f"attribute {self.name!r}: labels must be distinct")
            if self.missing == "category" and labels[-1] != MISSING_LABEL:
                raise DomainError(
                    f"attribute {self.name!r}: with missing='category' the last label must be "
                    f"{MISSING_LABEL!r} (the code of the missing values)"
                )
            if self.missing != "category" and MISSING_LABEL in labels:
                raise DomainError(
                    f"attribute {self.name!r}: the label {MISSING_LABEL!r} is reserved for "
                    "missing values; add \"missing\": \"category\" to the attribute"
                )
            object.__setattr__(self, "labels", labels)
        if self.bins is not None:
            self._check_bins(size)
        if self.dates is not None:
            self._check_dates(size)

    def _check_dates(self, size: int) -> None:
        if not isinstance(self.dates, DateBins):
            raise DomainError(f"attribute {self.name!r}: dates must be a DateBins, got {self.dates!r}")
        if self.bins is not None:
            raise DomainError(f"attribute {self.name!r}: a date attribute has date bins, not numeric bins")
        k = self.dates.n_bins
        if size - (self.missing == "category") != k:
            raise DomainError(f"attribute {self.name!r}: {k + 1} date bin edges define {k} periods but size is {size}")
        if self.labels is None:
            raise DomainError(f"attribute {self.name!r}: a date attribute needs labels (its periods)")

    def _check_bins(self, size: int) -> None:
        try:
            bins = tuple(float(e) for e in self.bins)  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise DomainError(
                f"attribute {self.name!r}: bins must be a list of numbers, got {self.bins!r}"
            ) from None
        if len(bins) < 2:
            raise DomainError(f"attribute {self.name!r}: bins need at least 2 edges (1 bin)")
        if not all(math.isfinite(e) for e in bins):
            raise DomainError(f"attribute {self.name!r}: bin edges must be finite numbers")
        if any(b <= a for a, b in zip(bins, bins[1:])):
            raise DomainError(f"attribute {self.name!r}: bin edges must be strictly increasing")
        k = len(bins) - 1
        size -= self.missing == "category"  # the missing code is not a bin
        if size == k + 1:
            if self.labels is None or OTHER_LABEL not in self.labels or self.labels.index(OTHER_LABEL) != k:
                raise DomainError(
                    f"attribute {self.name!r}: {k + 1} bin edges define {k} bins but size is "
                    f"{size}; an extra code is only allowed as a catch-all whose label is "
                    f"{OTHER_LABEL!r} (give labels ending with {OTHER_LABEL!r})"
                )
        elif size != k:
            raise DomainError(
                f"attribute {self.name!r}: {k + 1} bin edges define {k} bins but size is {size}"
            )
        object.__setattr__(self, "bins", bins)

    def label(self, code: int) -> str:
        """Display label of one code."""
        if self.labels is not None:
            return self.labels[code]
        if code == self.missing_code:
            return MISSING_LABEL
        if self.bins is not None and code < len(self.bins) - 1:
            lo, hi = self.bins[code], self.bins[code + 1]
            close = "]" if code == len(self.bins) - 2 else ")"
            return f"[{fmt_edge(lo)}, {fmt_edge(hi)}{close}"
        return str(code)

    @property
    def missing_code(self) -> int | None:
        """Code of the missing values (the last) with ``missing="category"``, else ``None``."""
        return self.size - 1 if self.missing == "category" else None

    @property
    def n_values(self) -> int:
        """Codes that hold values (``size`` less the missing code)."""
        return self.size - (self.missing == "category")

    @property
    def other_code(self) -> int | None:
        """Code of the catch-all value (label ``"other"``), or ``None`` if there is none."""
        if self.labels is not None and OTHER_LABEL in self.labels:
            return self.labels.index(OTHER_LABEL)
        return None


def fmt_edge(e: float) -> str:
    return str(int(e)) if float(e).is_integer() else repr(float(e))


class Domain:
    """Ordered collection of attributes, e.g. ``Domain({"age": 85, "sex": 2, "race": 5})``.

    Immutable and hashable. Attribute order matters: it fixes the axis order of every marginal
    table and the Kronecker order of every query matrix.
    """

    __slots__ = ("_attrs", "_index", "_names", "_sizes")

    def __init__(self, attributes: Mapping[str, int] | Iterable[Attribute]):
        if isinstance(attributes, Mapping):
            attrs = tuple(Attribute(name, size) for name, size in attributes.items())
        else:
            attrs = tuple(attributes)
            for a in attrs:
                if not isinstance(a, Attribute):
                    raise DomainError(
                        "Domain expects a mapping {name: size} or a sequence of Attribute, "
                        f"got an element {a!r}"
                    )
        if not attrs:
            raise DomainError("a domain needs at least one attribute")
        index: dict[str, int] = {}
        for i, a in enumerate(attrs):
            if a.name in index:
                raise DomainError(f"attribute {a.name!r} appears twice in the domain")
            index[a.name] = i
        object.__setattr__(self, "_attrs", attrs)
        object.__setattr__(self, "_index", index)
        # immutable: computed once (hot loops of the counting engines ask for them per marginal)
        object.__setattr__(self, "_names", tuple(a.name for a in attrs))
        object.__setattr__(self, "_sizes", tuple(a.size for a in attrs))

    def __setattr__(self, key: str, value: Any) -> None:  # pragma: no cover - immutability guard
        raise AttributeError("Domain is immutable")

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def from_sizes(cls, sizes: Sequence[int], prefix: str = "a") -> Domain:
        """Domain with attributes named ``a0, a1, ...`` of the given sizes."""
        return cls({f"{prefix}{i}": int(s) for i, s in enumerate(sizes)})

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Domain:
        """Domain from the private-pgm form ``{"attr": size}`` or the rich form.

        The rich form maps each name to an object with ``size`` (or ``labels``, or ``bins``),
        and optionally ``kind`` (``categorical``/``ordinal``), ``labels`` and numeric ``bins``
        (edges used to discretize raw values; ``size`` defaults to ``len(bins) - 1``); other keys
        are kept in ``Attribute.extra``. A date attribute has ``period`` (year, quarter, month,
        week or day), ``date_format`` (how its data write dates, e.g. ``"%m/%d/%Y"``) and
        ``bins`` written as dates ``"YYYY-MM-DD"`` (period starts, then the start of the period
        after the last; every bin half-open); its labels default to the period names
        (:mod:`dpmatrix._dates`).
        """
        if not isinstance(spec, Mapping) or not spec:
            raise DomainError("a domain specification must be a non-empty JSON object")
        attrs = []
        for name, value in spec.items():
            if isinstance(value, Mapping):
                value = dict(value)
                labels = value.pop("labels", None)
                bins = value.pop("bins", None)
                size = value.pop("size", None)
                missing = value.pop("missing", "error")
                dates = None
                if "period" in value or "date_format" in value:  # bins of calendar periods
                    dates = DateBins.from_spec(name, value.pop("period", None), value.pop("date_format", None), bins)
                    bins = None
                    if labels is None:
                        labels = list(dates.labels())
                if labels is not None and (not isinstance(labels, Sequence) or isinstance(labels, str)):
                    raise DomainError(f"attribute {name!r}: labels must be a list of strings")
                if missing == "category" and labels is not None:
                    labels = [str(v) for v in labels]
                    if MISSING_LABEL not in labels:  # the missing code may be left implicit
                        labels.append(MISSING_LABEL)
                extra_code = 1 if missing == "category" else 0
                if size is None and labels is not None:
                    size = len(labels)
                if size is None and dates is not None:
                    size = dates.n_bins + extra_code
                if size is None and bins is not None:
                    if not isinstance(bins, Sequence) or isinstance(bins, str):
                        raise DomainError(f"attribute {name!r}: bins must be a list of numbers")
                    size = len(bins) - 1 + extra_code
                if size is None:
                    raise DomainError(f"attribute {name!r}: give 'size', 'labels' or 'bins'")
                ordered = bins is not None or dates is not None
                kind = value.pop("kind", "ordinal" if ordered else "categorical")
                attrs.append(Attribute(name, size, kind, labels, value, bins=bins, missing=missing, dates=dates))
            else:
                attrs.append(Attribute(name, value))
        return cls(attrs)

    @classmethod
    def from_json(cls, path: str | Path) -> Domain:
        """Read a domain file (see :meth:`from_dict`)."""
        return cls.from_dict(read_json(path, DomainError, f"domain file {str(path)!r}"))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; plain sizes when no attribute has metadata (private-pgm form)."""
        if all(
            a.kind == "categorical" and a.labels is None and a.bins is None and not a.extra
            and a.missing == "error"
            for a in self._attrs
        ):
            return {a.name: a.size for a in self._attrs}
        out: dict[str, Any] = {}
        for a in self._attrs:
            entry: dict[str, Any] = {"size": a.size, "kind": a.kind}
            if a.labels is not None:
                entry["labels"] = list(a.labels)
            if a.bins is not None:
                entry["bins"] = [int(e) if e.is_integer() else e for e in a.bins]
            if a.dates is not None:
                entry.update(a.dates.to_spec())
            if a.missing != "error":
                entry["missing"] = a.missing
            entry.update(a.extra)
            out[a.name] = entry
        return out

    # -- access -------------------------------------------------------------------------------
    @property
    def attributes(self) -> tuple[Attribute, ...]:
        return self._attrs

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def sizes(self) -> tuple[int, ...]:
        return self._sizes

    def __len__(self) -> int:
        return len(self._attrs)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> Attribute:
        return self._attrs[self.index(name)]

    def size(self, name: str) -> int:
        return self[name].size

    def index(self, name: str) -> int:
        """Position of an attribute; raises :class:`UnknownAttributeError` with a suggestion."""
        try:
            return self._index[name]
        except (KeyError, TypeError):
            import difflib  # suggestions only, on an error

            close = difflib.get_close_matches(str(name), self.names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UnknownAttributeError(
                f"unknown attribute {name!r}{hint} (the domain has: {', '.join(self.names)})"
            ) from None

    def resolve(self, attrs: str | Iterable[str | int]) -> tuple[int, ...]:
        """Sorted attribute positions of a set of names (or positions).

        Raises on unknown names and on an attribute listed twice.
        """
        if isinstance(attrs, str):
            attrs = (attrs,)
        out = []
        for a in attrs:
            if isinstance(a, str):
                out.append(self.index(a))
            elif hasattr(a, "__index__") and not isinstance(a, bool):
                i = int(a)
                if not 0 <= i < len(self):
                    raise UnknownAttributeError(
                        f"attribute position {i} is out of range for a domain of {len(self)}"
                    )
                out.append(i)
            else:
                raise UnknownAttributeError(f"attributes are named by strings, got {a!r}")
        if len(set(out)) != len(out):
            dup = sorted({self.names[i] for i in out if out.count(i) > 1})
            raise WorkloadError(f"attribute(s) {dup} listed more than once in {tuple(attrs)!r}")
        return tuple(sorted(out))

    def names_of(self, idx: Iterable[int]) -> tuple[str, ...]:
        attrs = self._attrs
        return tuple(attrs[i].name for i in idx)

    def cells(self, idx: Iterable[int]) -> int:
        """Number of cells of the marginal on the attribute positions ``idx``."""
        n = 1
        for i in idx:
            n *= self._attrs[i].size
        return n

    # -- value semantics ----------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Domain) and self._attrs == other._attrs

    def __hash__(self) -> int:
        return hash(self._attrs)

    def __reduce__(self):
        # rebuilt through __init__ (pickle's default slot restore would hit the immutability guard)
        return (Domain, (self._attrs,))

    def __repr__(self) -> str:
        inner = ", ".join(f"{a.name!r}: {a.size}" for a in self._attrs[:8])
        more = f", ... ({len(self)} attributes)" if len(self) > 8 else ""
        return f"Domain({{{inner}{more}}})"


def with_missing(domain: Domain, missing: str | Mapping[str, str]) -> Domain:
    """The domain with the missing-value policy of some attributes replaced.

    ``missing`` is one policy of :data:`MISSING_POLICIES` for every attribute, or
    ``{attribute: policy}``. Turning ``"category"`` on adds the code :data:`MISSING_LABEL` as the
    last code; turning it off removes it.

    Examples
    --------
    >>> d = with_missing(Domain([Attribute("sex", 2, labels=("F", "M"))]), "category")
    >>> d["sex"].labels, d["sex"].size
    (('F', 'M', '(missing)'), 3)
    """
    if isinstance(missing, str):
        pol = {n: missing for n in domain.names}
    elif isinstance(missing, Mapping):
        for k in missing:
            domain.index(k)  # unknown names raise with a suggestion
        pol = {n: str(missing.get(n, domain[n].missing)) for n in domain.names}
    else:
        raise DomainError(f"missing must be a string or a mapping, got {missing!r}")
    attrs = []
    for a in domain.attributes:
        p = pol[a.name]
        if p not in MISSING_POLICIES:
            raise DomainError(
                f"missing for {a.name!r} must be one of {', '.join(map(repr, MISSING_POLICIES))}, got {p!r}"
            )
        if p == a.missing:
            attrs.append(a)
            continue
        had, has = a.missing == "category", p == "category"
        size = a.size - had + has
        labels = a.labels
        if labels is not None:
            labels = tuple(labels[:-1] if had else labels) + ((MISSING_LABEL,) if has else ())
        attrs.append(Attribute(a.name, size, a.kind, labels, a.extra, bins=a.bins, missing=p, dates=a.dates))
    return Domain(attrs)
