"""The command line: plan / release / query / demo / infer-domain, errors, privacy hygiene."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpmatrix as dm
from cli_run import run
from dpmatrix.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
ADULT_DOMAIN = SRC / "dpmatrix" / "data" / "adult-domain.json"

RICH = {
    "age": {"bins": [0, 20, 40, 60, 120]},
    "sex": {"labels": ["F", "M"]},
    "race": {"labels": ["a", "b", "other"]},
    "n": 3,
}
N_ROWS = 613
SENTINEL = "SENTINEL_Zq9xK_person"
SENTINEL_AGE = 37.123456789
SEED = 123456789


def raw_frame(unknown_race: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    df = pd.DataFrame(
        {
            "id": [f"person-{i:05d}" for i in range(N_ROWS)],
            "age": np.round(rng.uniform(0, 119, N_ROWS), 1),
            "sex": rng.choice(["F", "M"], N_ROWS),
            "race": rng.choice(["a", "b"], N_ROWS),
            "n": rng.integers(0, 3, N_ROWS),
        }
    )
    df.loc[17, "id"] = SENTINEL
    df.loc[17, "age"] = SENTINEL_AGE
    if unknown_race:
        df.loc[[3, 9, 11], "race"] = "zz"
    return df


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    df = raw_frame()
    df.to_csv(d / "secret_patients.csv", index=False)
    df.to_parquet(d / "secret_patients.parquet", index=False)
    raw_frame(unknown_race=True).to_csv(d / "unknown.csv", index=False)
    (d / "rich.json").write_text(json.dumps(RICH))
    (d / "pgm.json").write_text(json.dumps({"n": 3, "sex_code": 2}))
    return d


# Tests about engines, spilling, noise or queries pass NO_REPORT: rendering the HTML report's
# figures is ~85 % of a small release's time, and the report is tested where it is the subject
# (tests/report/, the privacy-hygiene and listing tests below, tests/test_readme.py).
NO_REPORT = "--no-report"


def release(data, out, *extra, src="secret_patients.csv"):
    return [
        "release", data / src, "--domain", data / "rich.json", "--workload", "all:<=2",
        "--rho", "0.5", "--out", out, "--seed", "7", "--quiet", *extra,
    ]  # fmt: skip


# -- plan --------------------------------------------------------------------------------------
def test_plan_prints_variances_and_privacy_without_data(capsys, tmp_path):
    rc, out, err = run(capsys, "plan", "--domain", ADULT_DOMAIN, "--workload", "all:3", "--rho", "0.5")
    assert rc == 0 and err == ""
    # the guarantee of the default release (secure discrete noise): ε by the zCDP conversion of
    # Canonne-Kamath-Steinke at rho = 0.5 (6.47407, derived independently in
    # tests/reliability/test_privacy_statement.py), no mu; not the continuous claim 6.17394
    assert "rho = 0.5 (zCDP)" in out and "epsilon = 6.47407 at delta = 1e-09" in out
    assert "no mu claimed" in out
    # the continuous claim (analytic curve) only beside it, labelled with the noise it needs
    (cont,) = [ln for ln in out.splitlines() if "mu = 1 " in ln or "6.17394" in ln]
    assert cont.startswith("continuous-Gaussian claim (only with --noise gaussian_float): epsilon = 6.17394")
    assert "age,workclass,fnlwgt" in out and "max_std" in out and "max_variance" in out
    rc, out, _ = run(capsys, "plan", "--domain", ADULT_DOMAIN, "--marginals", "age,sex*2;race",
                     "--epsilon", "1", "--delta", "1e-6", "--format", "csv", "--save", tmp_path / "p.json")  # fmt: skip
    table = pd.read_csv(pd.io.common.StringIO(out))
    assert table["marginal"].tolist() == ["age,sex", "race"] and table["weight"].tolist() == [2.0, 1.0]
    plan = dm.Plan.from_json(tmp_path / "p.json")
    # converted for the default (discrete) noise: its stated ε is the ask, the continuous claim below it
    assert plan.epsilon(1e-6, noise="auto") == pytest.approx(1.0, rel=1e-6)
    assert plan.epsilon(1e-6, noise="auto") <= 1.0 and plan.epsilon(1e-6) < 1.0
    np.testing.assert_allclose(table["max_variance"], [plan.variance(("age", "sex")).max(), plan.variance("race").max()])


def test_plan_residual_construction_option(capsys, tmp_path):
    base = ["plan", "--domain", ADULT_DOMAIN, "--workload", "all:1;age=prefix", "--rho", "0.5",
            "--objective", "sum_var", "--format", "json"]  # fmt: skip
    got = {}
    for c in ("centred", "split", "auto"):
        rc, out, _ = run(capsys, *base, "--construction", c, "--save", tmp_path / f"{c}.json")
        assert rc == 0
        got[c] = dm.Plan.from_json(tmp_path / f"{c}.json")
    assert got["centred"].construction == "centred" and got["split"].construction == "split"
    assert got["auto"].rmse() == pytest.approx(min(got["centred"].rmse(), got["split"].rmse()), rel=1e-12)
    with pytest.raises(SystemExit) as exc:  # argparse usage error
        run(capsys, *base, "--construction", "diagonal")
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


# -- release + query -----------------------------------------------------------------------------
def test_release_and_query_labelled_marginal(capsys, data, tmp_path):
    out_dir = tmp_path / "rel"
    rc, out, err = run(capsys, *release(data, out_dir))
    assert rc == 0, err
    assert sorted(p.name for p in out_dir.iterdir()) == ["README.txt", "manifest.json", "manifest.sha256",
                                                         "measurements.parquet", "report.html", "tables"]
    rc, out, err = run(capsys, "query", out_dir, "--marginal", "age,sex")
    assert rc == 0, err
    lines = out.splitlines()
    header = next(l for l in lines if l.split()[:2] == ["age", "sex"]).split()
    assert header == ["age", "sex", "estimate", "variance", "std", "lower", "upper"]
    assert "[0, 20)" in out and "[60, 120]" in out and " F " in out and " M " in out
    assert "95% confidence interval" in out and "rho = 0.5" in out
    # a closure marginal at another level is reconstructed from the saved measurements
    rc, out, _ = run(capsys, "query", out_dir, "--marginal", "sex", "--level", "0.5", "--format", "csv")
    t = pd.read_csv(pd.io.common.StringIO(out))
    assert t["sex"].tolist() == ["F", "M"]
    np.testing.assert_allclose(t["upper"] - t["estimate"], 0.6744897501960817 * t["std"])
    # listing
    rc, out, _ = run(capsys, "query", out_dir)
    assert rc == 0 and "age,sex" in out and "saved marginals" in out


def test_release_from_saved_plan_and_workload_file(capsys, data, tmp_path):
    rc, _, err = run(capsys, "plan", "--domain", data / "rich.json", "--marginals", "age,sex;race*2",
                     "--rho", "0.25", "--save", tmp_path / "p.json")  # fmt: skip
    assert rc == 0, err
    rc, _, err = run(capsys, "release", data / "secret_patients.csv", "--plan", tmp_path / "p.json",
                     "--out", tmp_path / "rel", "--quiet", NO_REPORT)  # fmt: skip
    assert rc == 0, err
    from dpmatrix.release import load_release

    rel = load_release(tmp_path / "rel")
    # secure by default: discrete noise with σ rounded up spends at most the planned ρ
    assert 0.25 * (1 - 1e-4) <= rel.privacy["rho"] <= 0.25
    assert rel.plan.workload.weights.tolist() == [1.0, 2.0]
    (tmp_path / "wk.json").write_text(json.dumps({"marginals": [["sex", "n"], {"attributes": ["race"], "weight": 3}]}))
    rc, _, err = run(capsys, "release", data / "secret_patients.csv", "--domain", data / "rich.json",
                     "--workload", tmp_path / "wk.json", "--mu", "1", "--out", tmp_path / "rel2", "--quiet", NO_REPORT)  # fmt: skip
    assert rc == 0, err
    assert load_release(tmp_path / "rel2").marginals == [("sex", "n"), ("race",)]


@pytest.mark.parametrize("src", ["secret_patients.csv", "secret_patients.parquet"])
def test_duckdb_and_numpy_engines_give_identical_releases(capsys, data, tmp_path, src):
    from dpmatrix.release import load_release

    rels = []
    for engine in ("duckdb", "numpy"):
        rc, _, err = run(capsys, *release(data, tmp_path / engine, "--engine", engine, NO_REPORT, src=src))
        assert rc == 0, err
        rels.append(load_release(tmp_path / engine))
    a, b = (r.measurements.noisy for r in rels)
    assert a.keys() == b.keys()
    for k in a:  # same counts + same seed => bit-identical noisy answers
        np.testing.assert_array_equal(a[k], b[k])
    for names in rels[0].marginals:
        pd.testing.assert_frame_equal(rels[0].table(names), rels[1].table(names))


def test_duckdb_path_never_reads_through_pandas(capsys, data, tmp_path, monkeypatch):
    """Checked by making every pandas reader raise, and by forbidding any DataFrame to be built
    while the DuckDB engine reads, validates and counts (tables written afterwards are noisy)."""
    from dpmatrix.engines import DuckDBEngine

    def boom(*a, **k):
        raise AssertionError("pandas was used to read the data")

    for mod, name in [(pd, "read_csv"), (pd, "read_parquet"), (pd, "read_table"), (pd.io.parsers, "read_csv")]:
        monkeypatch.setattr(mod, name, boom)

    def no_frames(fn):
        def wrapped(*a, **k):
            saved = pd.DataFrame.__init__
            pd.DataFrame.__init__ = boom
            try:
                return fn(*a, **k)
            finally:
                pd.DataFrame.__init__ = saved

        return wrapped

    monkeypatch.setattr(DuckDBEngine, "__init__", no_frames(DuckDBEngine.__init__))
    monkeypatch.setattr(DuckDBEngine, "count", no_frames(DuckDBEngine.count))
    for src in ("secret_patients.csv", "secret_patients.parquet"):
        rc, _, err = run(capsys, *release(data, tmp_path / src, NO_REPORT, src=src))
        assert rc == 0, err


# -- data errors ---------------------------------------------------------------------------------
def test_out_of_domain_values_error_or_explicit_other(capsys, data, tmp_path):
    args = release(data, tmp_path / "rel", NO_REPORT, src="unknown.csv")
    rc, out, err = run(capsys, *args)
    assert rc == 2 and out == ""
    lines = err.splitlines()
    err = "\n".join(lines[next(i for i, ln in enumerate(lines) if ln.startswith("dpmatrix: error: ")):])
    # after the --seed warning: a few readable lines, the problem, the valid labels and the fix
    assert 2 <= err.count("\n") + 1 <= 16 and "--on-unknown race=other" in err
    assert "'race'" in err and "'zz'" in err and "3 rows" in err and "Traceback" not in err
    assert "the labels are" in err and "codes" not in err.splitlines()[1]
    assert not (tmp_path / "rel").exists()
    rc, _, err = run(capsys, *args, "--on-unknown", "race=other")
    assert rc == 0
    assert err.startswith("dpmatrix: warning: --seed")
    assert re.search(r"dpmatrix: warning: .*race.*3 rows", err)  # explicit, never silent


def test_missing_column(capsys, data, tmp_path):
    dom = dict(RICH, income=2)
    (tmp_path / "d.json").write_text(json.dumps(dom))
    rc, out, err = run(capsys, "release", data / "secret_patients.parquet", "--domain", tmp_path / "d.json",
                       "-w", "all:1", "--rho", "1", "--out", tmp_path / "rel", "--quiet")  # fmt: skip
    assert rc == 2 and "lack column(s)" in err and "'income'" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["plan", "--domain", "{tmp}/nope.json", "-w", "all:1", "--rho", "1"], "does not exist"),
        (["plan", "--domain", "{tmp}/bad.json", "-w", "all:1", "--rho", "1"], "not valid JSON"),
        (["plan", "--domain", "{tmp}/badsize.json", "-w", "all:1", "--rho", "1"], "size must be at least 2"),
        (["plan", "--domain", "{rich}", "-w", "all:1"], "no privacy budget"),
        (["plan", "--domain", "{rich}", "-w", "all:1", "--rho", "1", "--mu", "1"], "exactly one privacy budget"),
        (["plan", "--domain", "{rich}", "-w", "all:1", "--epsilon", "1"], "needs --delta"),
        (["plan", "--domain", "{rich}", "-w", "all:1", "--rho", "0"], "positive"),
        (["plan", "--domain", "{rich}", "-w", "all:1", "--epsilon", "1", "--delta", "2"], "delta"),
        (["plan", "--domain", "{rich}", "--rho", "1"], "no workload"),
        (["plan", "--domain", "{rich}", "-w", "agee,sex", "--rho", "1"], "did you mean 'age'"),
        (["plan", "--domain", "{rich}", "-w", "all:7", "--rho", "1"], "between 0 and 4"),
        (["plan", "--domain", "{rich}", "-w", "{tmp}/nope.json", "--rho", "1"], "does not exist"),
        (["release", "{tmp}/nope.csv", "--domain", "{rich}", "-w", "all:1", "--rho", "1", "--out", "{tmp}/o"], "does not exist"),
        (["release", "{data}/secret_patients.csv", "-w", "all:1", "--rho", "1", "--out", "{tmp}/o"], "--domain"),
        (["release", "{data}/secret_patients.csv", "--domain", "{rich}", "-w", "all:1", "--rho", "1", "--out", "{tmp}", ], "not empty"),
        (["release", "{data}/secret_patients.csv", "--domain", "{rich}", "-w", "all:1", "--rho", "1", "--out", "{tmp}/o", "--on-unknown", "drop"], "--on-unknown"),
        (["release", "{data}/secret_patients.csv", "--domain", "{pgm}", "-w", "all:1", "--rho", "1", "--out", "{tmp}/o"], "sex_code"),
        (["release", "{data}/secret_patients.csv", "--domain", "{rich}", "-w", "all:1", "--rho", "1", "--out", "{tmp}/o", "--tables", "xlsx"], "formats"),
        (["query", "{tmp}/nope"], "does not exist"),
        (["query", "{tmp}"], "no manifest.json"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(capsys, data, tmp_path, argv, message):
    (tmp_path / "bad.json").write_text("{oops")
    (tmp_path / "badsize.json").write_text('{"a": 1}')
    (tmp_path / "junk.txt").write_text("x")
    fill = {"tmp": tmp_path, "rich": data / "rich.json", "pgm": data / "pgm.json", "data": data}
    rc, out, err = run(capsys, *[a.format(**fill) for a in argv], *(["--quiet"] if argv[0] == "release" else []))
    assert rc == 2
    assert err.startswith("dpmatrix: error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err


def test_argparse_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["release"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["plan", "--domain", "x", "--rho", "abc"])
    assert e.value.code == 2


def test_query_errors(capsys, data, tmp_path):
    rc, _, _ = run(capsys, *release(data, tmp_path / "rel", NO_REPORT))
    for marg, msg in [("agee", "did you mean"), ("age,sex,race", "not measured"), ("age,age", "more than once")]:
        rc, _, err = run(capsys, "query", tmp_path / "rel", "--marginal", marg)
        assert rc == 2 and msg in err and err.count("\n") == 1


# -- privacy hygiene -----------------------------------------------------------------------------
def test_artifact_holds_no_record_no_seed_no_count(capsys, data, tmp_path):
    out_dir = tmp_path / "rel"
    argv = release(data, out_dir, "--tables", "parquet,csv")
    argv[argv.index("--seed") + 1] = str(SEED)
    rc, _, err = run(capsys, *argv)
    assert rc == 0, err
    files = [p for p in out_dir.rglob("*") if p.is_file()]
    # manifest, its digest, measurements, report.html, README.txt, the tables' Parquet dataset (one
    # part) and, as asked (--tables parquet,csv), 11 CSV tables
    assert len(files) == 6 + 11
    forbidden_bytes = [
        SENTINEL.encode(), b"person-0", str(SENTINEL_AGE).encode(), np.float64(SENTINEL_AGE).tobytes(),
        str(SEED).encode(), np.int64(SEED).tobytes(), np.int32(SEED).tobytes(), np.float64(SEED).tobytes(),
        b"secret_patients", np.float64(N_ROWS).tobytes(),
    ]  # fmt: skip
    count_token = re.compile(rb"(?<![\d.eE+-])%d(\.0*)?(?![\d.])" % N_ROWS)
    for f in files:
        blob = f.read_bytes()
        for bad in forbidden_bytes:
            assert bad not in blob, (f, bad)
        if f.suffix in (".csv", ".json"):
            assert not count_token.search(blob), f
    # the total is released only with noise
    from dpmatrix.release import load_release

    total = load_release(out_dir).table(())["estimate"].iloc[0]
    assert total != N_ROWS and abs(total - N_ROWS) < 100


# -- infer-domain --------------------------------------------------------------------------------
def test_infer_domain_is_explicit_and_warns(capsys, data, tmp_path):
    rc, out, err = run(capsys, "infer-domain", data / "secret_patients.csv", "--columns", "sex,n,age",
                       "--out", tmp_path / "d.json")  # fmt: skip
    assert rc == 0
    assert "dpmatrix: warning: infer_domain" in err and "NOT covered" in err
    dom = dm.Domain.from_json(tmp_path / "d.json")
    assert dom.names == ("sex", "n", "age") and dom["sex"].labels == ("F", "M")
    rc, _, err = run(capsys, "infer-domain", data / "secret_patients.csv", "--out", tmp_path / "d.json")
    assert rc == 2 and "exists" in err


# -- the README demo, as a user runs it ------------------------------------------------------------
@pytest.mark.slow
def test_readme_demo_and_query_subprocess(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "dpmatrix", "demo", "--out", "demo-release"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    # secure default noise: σ rounded up to a rational spends slightly less than the planned 0.5
    rho = float(re.search(r"privacy: rho = ([0-9.e-]+)", r.stdout).group(1))
    assert 0.5 * (1 - 1e-4) <= rho <= 0.5 and "income>50K" in r.stdout
    rel = tmp_path / "demo-release"
    assert (rel / "manifest.json").exists() and len(json.loads((rel / "manifest.json").read_text())["marginals"]) == 106
    assert [p.name for p in (rel / "tables").iterdir()] == ["part-00000.parquet"]  # no file per marginal
    r = subprocess.run([sys.executable, "-m", "dpmatrix", "query", "demo-release", "--marginal", "sex,income>50K"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert re.search(r"sex\s+income>50K\s+estimate\s+variance\s+std\s+lower\s+upper", r.stdout)
    # the shipped domain labels the codes (UCI adult.names order, tests/core/test_adult_labels.py)
    assert len([l for l in r.stdout.splitlines() if re.match(r"\s*(Female|Male)\s+(<=50K|>50K)\s", l)]) == 4
    # the demo re-runs in place (it replaces only its own earlier release); errors have no traceback
    r = subprocess.run([sys.executable, "-m", "dpmatrix", "query", "demo-release", "--marginal", "nope"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_csv_only_release_is_queried_from_its_csv_tables(capsys, data, tmp_path):
    rc, _, err = run(capsys, *release(data, tmp_path / "rel", "--tables", "csv", "--level", "0.8", NO_REPORT))
    assert rc == 0, err
    assert not list((tmp_path / "rel").rglob("marginals/*.parquet"))
    rc, out, err = run(capsys, "query", tmp_path / "rel", "--marginal", "race,sex")
    assert rc == 0, err
    assert "saved table" in out and "80% confidence interval" in out and "[lower, upper]" in out


def test_release_with_discrete_gaussian_noise(capsys, data, tmp_path):
    out_dir = tmp_path / "rel"
    rc, out, err = run(capsys, *release(data, out_dir, "--noise", "discrete_gaussian", NO_REPORT))
    assert rc == 0, err
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["mechanism"]["noise"] == "discrete_gaussian"
    # the manifest reports the privacy actually spent with sigma rounded up to a rational
    assert 0.5 / (1 + 1e-4) <= manifest["privacy"]["rho"] <= 0.5
    assert manifest["mechanism"]["randomness"] == "seeded_insecure"  # --seed: testing only
    assert manifest["privacy"]["mu"] is None  # Gaussian DP is not claimed for discrete noise
    from dpmatrix._privacy import epsilon_from_zcdp
    assert manifest["privacy"]["epsilon"] == pytest.approx(epsilon_from_zcdp(manifest["privacy"]["rho"], manifest["privacy"]["delta"]))
    rel = dm.load_release(out_dir)
    assert rel.measurements.noise == "discrete_gaussian"
    assert rel.plan.rho == pytest.approx(manifest["privacy"]["rho"], rel=1e-12)
    rc, out, err = run(capsys, "query", out_dir, "--marginal", "age,sex")
    assert rc == 0, err


def test_release_with_spill_is_identical(capsys, data, tmp_path):
    # --spill keeps the noisy answers in a temporary on-disk store: same release, same numbers
    from dpmatrix.release import load_release

    for name, extra in (("mem", ()), ("disk", ("--spill",))):
        rc, _, err = run(capsys, *release(data, tmp_path / name, *extra, NO_REPORT))
        assert rc == 0, err
    a, b = load_release(tmp_path / "mem"), load_release(tmp_path / "disk")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "mem" / "measurements.parquet"),
                                  pd.read_parquet(tmp_path / "disk" / "measurements.parquet"))
    for names in a.marginals:
        pd.testing.assert_frame_equal(a.table(names), b.table(names))
