"""The report from the command line, and its privacy hygiene: `dpmatrix release` writes
report.html into the folder (unless --no-report), `dpmatrix report DIR`, `dpmatrix plan
--report`; the report holds no record, no record count, no seed and no path of the machine."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from report_checks import check_numbers, tagged_from_html

from dpmatrix.cli import main

N_ROWS = 587
SENTINEL = "SENTINEL_Wq3vP_person"
SENTINEL_AGE = 41.987654321
SEED = 918273645
DOMAIN = {"age": {"bins": [0, 20, 40, 60, 120], "kind": "ordinal"}, "sex": {"labels": ["F", "M"]},
          "race": {"labels": ["a", "b", "other"]}, "n": 3}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("private_input")
    rng = np.random.default_rng(11)
    df = pd.DataFrame({
        "id": [f"person-{i:05d}" for i in range(N_ROWS)],
        "age": np.round(rng.uniform(0, 119, N_ROWS), 1),
        "sex": rng.choice(["F", "M"], N_ROWS),
        "race": rng.choice(["a", "b", "other"], N_ROWS),
        "n": rng.integers(0, 3, N_ROWS),
    })  # fmt: skip
    df.loc[5, "id"] = SENTINEL
    df.loc[5, "age"] = SENTINEL_AGE
    df.to_csv(d / "confidential_records.csv", index=False)
    (d / "domain.json").write_text(json.dumps(DOMAIN))
    return d


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def release_argv(data, out, *extra):
    return ["release", data / "confidential_records.csv", "--domain", data / "domain.json",
            "--workload", "all:<=2", "--rho", "0.5", "--out", out, "--seed", str(SEED), *extra]


def test_release_writes_a_report_without_records_counts_seeds_or_paths(capsys, data, tmp_path):
    out = tmp_path / "rel"
    rc, stdout, err = run(capsys, *release_argv(data, out))
    assert rc == 0, err
    page = out / "report.html"
    assert page.is_file() and "report.html" in stdout
    assert not list(out.glob(".*partial*"))
    html = page.read_text(encoding="utf-8")
    blob = page.read_bytes()
    for bad in (SENTINEL, "person-0", str(SENTINEL_AGE), str(SEED), "confidential_records",
                str(data), str(tmp_path), "/tmp/", "/home/", "/root", "file:", "http:", "https:"):
        assert bad.encode() not in blob, bad
    for raw in (np.float64(SENTINEL_AGE).tobytes(), np.int64(SEED).tobytes()):
        assert raw not in blob
    # the record count appears only as the display of a published noisy number, never as a fact
    text = re.sub(r'src="data:image/png;base64,[^"]+"', "", html)

    def drop_published(m):
        value = re.search(r'data-value="([^"]+)"', m.group(1))
        assert value is None or float(value.group(1)) != N_ROWS, m.group(0)
        return "<span></span>"

    rest = re.sub(r'<span (class="num" [^>]*)>(.*?)</span>', drop_published, text, flags=re.S)
    assert not re.search(rf"(?<![\d.,]){N_ROWS}(?![\d])", rest)
    # every number on the page is the manifest's or the saved tables' (labels and bins included)
    manifest = json.loads((out / "manifest.json").read_text())
    counts = check_numbers(tagged_from_html(html), manifest, folder=out,
                           structural={"fair", "shown_bars", "omitted_bars", "omitted_rows", "shown_residuals",
                                       "omitted_residuals", "shown_k", "links_left_out"})
    assert counts["src"] > 50
    for label in ("[20, 40)", "[60, 120]", "other"):
        assert f"<span data-label>{label}</span>" in html


def test_no_report_option_and_report_command(capsys, data, tmp_path):
    out = tmp_path / "rel"
    rc, _, err = run(capsys, *release_argv(data, out, "--no-report", "--quiet"))
    assert rc == 0, err
    assert not (out / "report.html").exists()
    rc, stdout, err = run(capsys, "report", out, "--no-fairness")
    assert rc == 0, err
    assert (out / "report.html").is_file() and "report written" in stdout
    html = (out / "report.html").read_text()
    assert "Not shown: the comparison was not asked for" in html
    # elsewhere, with links back into the release folder
    (tmp_path / "pages").mkdir()
    rc, _, err = run(capsys, "report", out, "--out", tmp_path / "pages" / "r.html", "--quiet")
    assert rc == 0, err
    links = re.findall(r'<a href="([^"]+)" data-label>', (tmp_path / "pages" / "r.html").read_text())
    assert links and all((tmp_path / "pages" / x).resolve().exists() for x in links)


def test_report_command_errors_are_one_line(capsys, tmp_path):
    rc, _, err = run(capsys, "report", tmp_path)
    assert rc == 2 and err.startswith("dpmatrix: error:") and "manifest.json" in err
    assert err.count("\n") == 1


def test_plan_report_option(capsys, data, tmp_path):
    page = tmp_path / "plan.html"
    rc, stdout, err = run(capsys, "plan", "--domain", data / "domain.json", "--workload", "all:<=2",
                          "--epsilon", "1", "--delta", "1e-6", "--report", page)
    assert rc == 0, err
    assert f"report written to {page}" in stdout
    html = page.read_text()
    assert "A plan for a differentially private release" in html and "Released marginals" not in html
    # the ε of the budget, at the budget's δ, is the one stated
    eps = re.search(r"data-key='\[&quot;privacy&quot;,&quot;epsilon&quot;\]' data-value=\"([^\"]+)\"", html)
    assert abs(float(eps.group(1)) - 1.0) < 1e-9
