"""Tampered files refused by name, lowered privacy caught, manifest paths
confined to the folder; --no-verify / verify=False skips only the digests."""

from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pytest

import dpmatrix as dm
from dpmatrix.cli import main
from dpmatrix.release import load_release

from ._support import DOMAIN, assert_one_line_error, frame, release_args, run


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """One CLI release for the module (a release takes a second, mostly its report)."""
    folder = tmp_path_factory.mktemp("integrity")
    frame().to_csv(folder / "people.csv", index=False)
    (folder / "domain.json").write_text(json.dumps(DOMAIN))
    assert main([str(a) for a in release_args(folder, folder / "rel", "--tables", "parquet,csv")]) == 0
    return folder / "rel"


@pytest.fixture()
def rel(small, pristine):
    """A fresh copy of the release for each test to tamper with (symlinks copied as links)."""
    out = small / "rel"
    shutil.copytree(pristine, out, symlinks=True)
    return out


def _manifest(out):
    return json.loads((out / "manifest.json").read_text())


def _rewrite_manifest(out, m, fix_digest: bool):
    text = json.dumps(m, indent=1) + "\n"
    (out / "manifest.json").write_text(text)
    if fix_digest:  # a forger who knows the format recomputes the manifest's digest
        (out / "manifest.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "  manifest.json\n")


def _table_file(out, attrs=("sex",), fmt="csv"):
    """The file holding a marginal's table: its CSV, or the part of the Parquet dataset."""
    (e,) = [e for e in _manifest(out)["marginals"] if e["attributes"] == list(attrs)]
    return e["table"]["file"] if fmt == "parquet" else e["files"][fmt]


def test_edited_table_is_refused_by_name(rel, capsys):
    name = _table_file(rel, fmt="parquet")
    df = pd.read_parquet(rel / name)  # the whole dataset, edited and written back by pandas
    df["estimate"] += 1000
    df.to_parquet(rel / name, index=False)
    rc, _, err = run(capsys, "query", rel, "--marginal", "sex")
    assert_one_line_error(rc, err, name, "modified")
    rc, out, err = run(capsys, "query", rel, "--marginal", "sex", "--no-verify")
    assert rc == 0 and "1" in out


def test_edited_csv_table_is_refused_by_name(rel, capsys):
    name = _table_file(rel, fmt="csv")
    lines = (rel / name).read_text().splitlines()
    lines[1] = lines[1].replace(",", ",9", 1)  # the first estimate gets a leading 9
    (rel / name).write_text("\n".join(lines) + "\n")
    with pytest.raises(dm.ReleaseError, match=f"{name}.*modified"):
        load_release(rel).table(("sex",), "csv")
    rc, _, err = run(capsys, "query", rel, "--marginal", "sex")  # the Parquet copy is intact
    assert rc == 0, err


def test_edited_measurements_are_refused(rel, capsys):
    data = bytearray((rel / "measurements.parquet").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (rel / "measurements.parquet").write_bytes(bytes(data))
    rc, _, err = run(capsys, "query", rel, "--marginal", "age,smoker", "--level", "0.9")
    assert_one_line_error(rc, err, "measurements.parquet", "modified")
    # a saved table at the release's level does not need the measurements: still served
    rc, _, err = run(capsys, "query", rel, "--marginal", "sex")
    assert rc == 0, err


def test_lowered_rho_is_caught(rel, capsys):
    m = _manifest(rel)
    true_rho = m["privacy"]["rho"]
    m["privacy"]["rho"] = 0.01
    _rewrite_manifest(rel, m, fix_digest=False)
    rc, _, err = run(capsys, "query", rel)
    assert_one_line_error(rc, err, "manifest.json", "modified")
    # with a recomputed digest, the stated rho still disagrees with the manifest's noise scales
    _rewrite_manifest(rel, m, fix_digest=True)
    rc, _, err = run(capsys, "query", rel, "--no-verify")
    assert_one_line_error(rc, err, "states rho = 0.01", f"spend rho = {true_rho:.6g}")


def test_negative_sigma2_in_manifest_is_refused(rel):
    m = _manifest(rel)
    next(r for r in m["residuals"] if r["sigma2"] != "inf")["sigma2"] = -1.0
    _rewrite_manifest(rel, m, fix_digest=True)
    with pytest.raises(dm.PlanError, match="sigma2 must be a positive number"):
        load_release(rel)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("target", ["/etc/passwd", "../outside.csv", "marginals/../../outside.csv"])
def test_paths_outside_the_folder_are_refused(rel, capsys, target, fmt):
    (rel.parent / "outside.csv").write_text("sex,estimate\nF,1\n")
    m = _manifest(rel)
    old = _table_file(rel, fmt=fmt)
    for e in m["marginals"]:
        if e["attributes"] == ["sex"]:
            if fmt == "csv":
                e["files"]["csv"] = target
            else:
                e["table"]["file"] = target
    m["files"][target] = m["files"].pop(old)
    m["tables"]["formats"] = [fmt]
    _rewrite_manifest(rel, m, fix_digest=True)
    rc, out, err = run(capsys, "query", rel, "--marginal", "sex", "--no-verify")
    assert_one_line_error(rc, err, "outside the release folder")
    assert "root" not in out


def test_symlink_leading_out_is_refused(rel, capsys):
    name = _table_file(rel, fmt="parquet")
    (rel / name).unlink()
    (rel / name).symlink_to("/etc/hostname")
    rc, _, err = run(capsys, "query", rel, "--marginal", "sex", "--no-verify")
    assert_one_line_error(rc, err, "outside the release folder")
