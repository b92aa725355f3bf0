"""Domain: attribute names, sizes, positions, and its JSON form."""

from __future__ import annotations

import pytest

import dpmatrix as dm
from dpmatrix.errors import DomainError, UnknownAttributeError


def test_names_sizes_and_positions():
    dom = dm.Domain({"age": 5, "sex": 2, "race": 3})
    assert dom.names == ("age", "sex", "race")
    assert dom.sizes == (5, 2, 3)
    assert len(dom) == 3 and "sex" in dom and "nope" not in dom
    assert dom.index("race") == 2
    assert dom.resolve(("race", "age")) == (0, 2)  # sorted positions
    assert dom.resolve("sex") == (1,)
    assert dom.names_of((0, 2)) == ("age", "race")
    assert dom.cells((0, 2)) == 15  # 5 × 3, by hand


def test_unknown_and_repeated_names_are_typed_errors():
    dom = dm.Domain({"age": 5, "sex": 2})
    with pytest.raises(UnknownAttributeError, match="age"):  # the message suggests the close name
        dom.index("agee")
    with pytest.raises(dm.DPMatrixError):
        dom.resolve(("age", "age"))



def test_dict_round_trip_and_equality():
    dom = dm.Domain({"a": 3, "b": 4})
    back = dm.Domain.from_dict(dom.to_dict())
    assert back == dom and hash(back) == hash(dom)
    assert dm.Domain.from_sizes([3, 4]).names == ("a0", "a1")


def test_bad_sizes():
    with pytest.raises(DomainError):
        dm.Domain({"a": 0})


def test_pickle_and_deepcopy_round_trip():
    """A Domain crosses process boundaries (multiprocessing, Spark closures): pickling used to
    raise "Domain is immutable" because the slot restore went through the immutability guard."""
    import copy
    import pickle

    d = dm.Domain.from_dict({"age": {"size": 3, "kind": "ordinal", "labels": ["0-9", "10-19", "20+"]}, "sex": 2})
    for e in (pickle.loads(pickle.dumps(d)), copy.deepcopy(d)):
        assert e == d and hash(e) == hash(d)
        assert e.names == ("age", "sex") and e.sizes == (3, 2)
        assert e.attributes[0].labels == d.attributes[0].labels
        with pytest.raises(AttributeError):
            e.x = 1
