"""Engines agree on what they accept and say it with the same words: one corpus of bad (and
tricky but valid) CSV files read through the numpy, DuckDB and Spark (local mode) engines by the
release workflow's reader (:func:`dpmatrix._workflow.open_source`). Expected counts are the files'
rows counted by hand. Lives next to the Spark fixture (one JVM per run)."""

from __future__ import annotations

import dpmatrix as dm
from dpmatrix._workflow import open_source
from dpmatrix.errors import DataError

CODES = dm.Domain({"a": 2, "b": 2})
LABELS = dm.Domain.from_dict({"a": {"labels": ['x "q"', "plain, too"]}, "b": 2})

# name -> (file text, domain, encoding, expected: counts of (a, b) as a nested list, or the
# words every engine's DataError must contain)
CORPUS = {
    "hex_code": ("a,b\n0x1,0\n1,1\n", CODES, "codes", ["non-integer value", "'0x1'"]),
    "semicolons": ("a;b\n1;0\n0;1\n", CODES, "codes", ["lack column(s)", "'a;b'", "delimiter=';'"]),
    "duplicate_column": ("a,b,a\n1,0,0\n0,1,1\n", CODES, "codes", ["duplicate column names: 'a'"]),
    "header_case": ("A,b\n1,0\n", CODES, "codes", ["lack column(s)", "did you mean 'A'?"]),
    "code_out_of_range": ("a,b\n2,0\n1,1\n", CODES, "codes", ["code outside 0..1", "2"]),
    "float_code": ("a,b\n1.5,0\n", CODES, "codes", ["non-integer value"]),
    # valid: RFC 4180 doubled quotes and a quoted delimiter are one label each
    "rfc4180_quotes": ('a,b\n"x ""q""",0\n"plain, too",1\n"plain, too",1\n', LABELS, "raw", [[1, 0], [0, 2]]),
    "plain_codes": ("a,b\n0,0\n1,1\n1,0\n", CODES, "codes", [[1, 0], [1, 1]]),
}


def _read(path, dom, enc, engine):
    eng = open_source(str(path), dom, engine=engine, encoding=enc)
    try:
        return eng.count([(0, 1)])[(0, 1)].tolist()
    finally:
        close = getattr(eng, "close", None)
        if close is not None:
            close()


def test_one_corpus_three_engines(tmp_path, spark):
    outcomes: dict[str, dict[str, str | list]] = {}
    for name, (text, dom, enc, expected) in CORPUS.items():
        path = tmp_path / f"{name}.csv"
        path.write_text(text)
        got = {}
        for engine in ("numpy", "duckdb", "spark"):
            try:
                got[engine] = _read(path, dom, enc, engine)
            except DataError as exc:
                got[engine] = "DataError: " + str(exc)
        outcomes[name] = got
        if isinstance(expected[0], list):
            assert got == {e: expected for e in got}, (name, got)
        else:
            texts = set(got.values())
            assert len(texts) == 1, (name, got)  # the same message, word for word
            (message,) = texts
            for needle in expected:
                assert needle in message, (name, message)
    assert len(outcomes) == len(CORPUS)
