"""What the report says in the cases a reviewer must not miss: discrete and seeded noise, size
caps on big releases, links that stay inside the release, the optional target and lower-bound
sections, and planners other than ResidualPlanner."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from report_checks import check_numbers, tagged_from_html
from report_data import adult_codes, adult_domain

import dpmatrix as dm
from dpmatrix._report import content, plan_facts, write_plan_report, write_release_report
from dpmatrix._report.html import fmt
from dpmatrix.release import write_release


def page_text(html: str) -> str:
    """Visible text of a page, roughly (tags dropped, images removed)."""
    html = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def derived(html: str, rule: list) -> float:
    key = json.dumps(rule, separators=(",", ":")).replace('"', "&quot;")
    m = re.search(r"data-derive='" + re.escape(key) + r"' data-value=\"([^\"]+)\"", html)
    assert m, rule
    return float(m.group(1))


# -- number formatting ---------------------------------------------------------------------------
@pytest.mark.parametrize("value, text", [
    (0.5, "0.5"), (6.1739350466709, "6.174"), (48842.37, "48,842"), (-3.2149, "\u22123.215"),
    (1e-9, "10<sup>\u22129</sup>"), (1.23456e-5, "1.235 × 10<sup>\u22125</sup>"),
    (2.5e7, "2.5 × 10<sup>7</sup>"), (0.0, "0"), (math.inf, "∞"), (0.001, "0.001"),
])  # fmt: skip
def test_number_display(value, text):
    assert fmt(value) == text


# -- noise and randomness ------------------------------------------------------------------------
def small_plan(**budget):
    wk = dm.Workload(adult_domain(), [("race", "sex"), ("income>50K",), ("marital-status",)])
    return dm.plan(wk, **(budget or {"rho": 0.5}))


def test_discrete_noise_from_the_secure_source(tmp_path):
    """Discrete Gaussian noise: ε from the zCDP conversion (recomputed independently), μ-GDP not
    claimed, the secure source called secure."""
    meas = small_plan().measure(adult_codes(), noise="discrete_gaussian", rng=None)
    out = write_release(meas, tmp_path / "rel", delta=1e-8)
    html = write_release_report(out, fairness=False).read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["privacy"]["mu"] is None and manifest["mechanism"]["randomness"] == "os_csprng"
    counts = check_numbers(tagged_from_html(html), manifest, folder=out, discrete=True)
    assert counts["derive"] >= 4  # the ε(δ) table among them
    text = page_text(html)
    assert "not claimed" in text and "secure source" in text and "Not for publication" not in text
    assert 'data-key=\'[&quot;privacy&quot;,&quot;mu&quot;]\'' not in html
    assert "zCDP conversion" in text


def test_seeded_discrete_noise_is_flagged_not_for_publication(tmp_path):
    from dpmatrix._measure.discrete import InsecureRandomnessWarning

    with pytest.warns(InsecureRandomnessWarning):
        meas = small_plan().measure(adult_codes(), noise="discrete_gaussian", rng=np.random.default_rng(1))
    out = write_release(meas, tmp_path / "rel")
    html = write_release_report(out, fairness=False).read_text()
    header = page_text(html.split("</header>")[0])
    assert "Not for publication" in header and "seeded: NOT PRIVATE" in header
    assert 'role="alert"' in html


# -- size caps and links -------------------------------------------------------------------------
def test_big_release_is_capped_and_says_what_was_left_out(tmp_path, monkeypatch):
    plan = dm.plan(dm.Workload.marginals(adult_domain(), 2, upto=True), objective="sum_var", rho=1.0)
    out = write_release(plan.measure(adult_codes(), rng=np.random.default_rng(2)), tmp_path / "rel",
                        formats=("parquet", "csv"))
    monkeypatch.setattr(content, "MAX_INLINE", {0: 1, 1: 2, 2: 1})
    monkeypatch.setattr(content, "MAX_LINKS", 3)
    monkeypatch.setattr(content, "MAX_STD_BARS", 5)
    monkeypatch.setattr(content, "MAX_RESIDUAL_ROWS", 4)
    monkeypatch.setattr("dpmatrix._report.html.MAX_STD_BARS", 5)
    html = write_release_report(out, fairness=False).read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    n = len(manifest["marginals"])  # 1 + 5 + 10
    assert n == 16
    inline = re.findall(r'<div class="marginal" id="m(\d+)">', html)
    assert len(inline) == 1 + 2 + 1
    assert derived(html, ["shown_k", 1]) == 2 and derived(html, ["count_k", 1]) == 5
    assert derived(html, ["shown_k", 2]) == 1 and derived(html, ["count_k", 2]) == 10
    links = re.findall(r'<a href="([^"]+)" data-label>', html)
    # the CSV of each inline and listed marginal; the Parquet dataset (every table, not
    # viewable in a browser) once, as a folder
    assert len([x for x in links if x.startswith("marginals/") and x.endswith(".csv")]) == 4 + 3
    assert [x for x in links if x.startswith("tables")] == ["tables/"]
    assert all((out / x).exists() for x in links)
    # the inline tables are the smallest of each order, not the first in workload order
    ms = manifest["marginals"]
    for k, shown in ((1, 2), (2, 1)):
        of_k = sorted((int(e["cells"]), i) for i, e in enumerate(ms) if len(e["attributes"]) == k)
        assert {i for _, i in of_k[:shown]} == {int(i) for i in inline if len(ms[int(i)]["attributes"]) == k}
    assert derived(html, ["links_left_out"]) == n - 4 - 3
    assert derived(html, ["omitted_bars"]) == n - 5
    assert derived(html, ["omitted_residuals"]) == 16 - 4
    assert html.count("<img ") == 3 + 2 + 1  # ε(δ), std bars, budget shares; 2 one-way charts; 1 heatmap
    check_numbers(tagged_from_html(html), manifest, folder=out)


def test_links_from_a_report_saved_elsewhere(tmp_path):
    out = write_release(small_plan().measure(adult_codes(), rng=np.random.default_rng(3)), tmp_path / "rel")
    (tmp_path / "reports").mkdir()
    (tmp_path / "a" / "b" / "c" / "d").mkdir(parents=True)
    near = write_release_report(out, tmp_path / "reports" / "r.html", fairness=False)
    html = near.read_text()
    links = re.findall(r'<a href="([^"]+)" data-label>', html)
    assert links and all(x.startswith("../rel/") for x in links)
    assert all((near.parent / x).resolve().exists() for x in links)
    # far away: no path of the machine is spelled out; links stay relative to the release
    far = write_release_report(out, tmp_path / "a" / "b" / "c" / "d" / "r.html", fairness=False)
    html = far.read_text()
    links = re.findall(r'<a href="([^"]+)" data-label>', html)
    assert links and all(x.startswith(("tables/", "manifest.json", "measurements.parquet")) for x in links)
    assert "relative to the release folder" in html
    assert str(tmp_path) not in html and "/tmp" not in html


def test_manifest_links_outside_the_release_are_not_followed(tmp_path):
    out = write_release(small_plan().measure(adult_codes(), rng=np.random.default_rng(4)), tmp_path / "rel")
    secret = tmp_path / "secret.csv"
    pd.DataFrame({"race": [0], "sex": [0], "estimate": [1234567.0], "std": [1.0], "lower": [0.0],
                  "upper": [2.0]}).to_csv(secret, index=False)
    m = json.loads((out / "manifest.json").read_text())
    m["marginals"][0]["files"] = {"csv": "../secret.csv", "parquet": str(secret)}
    m["marginals"][0]["table"]["file"] = str(secret)  # and its place in the Parquet dataset
    (out / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(dm.ReleaseError, match="modified after the release was written"):
        write_release_report(out, fairness=False)  # the integrity check refuses the edit first
    html = write_release_report(dm.load_release(out, verify=False), out / "report.html", fairness=False).read_text()
    assert "secret" not in html and "1,234,567" not in html
    # the table keeps a way to be read: the one-line command that prints it
    assert "dpmatrix query rel --marginal" in page_text(html)


# -- optional sections (issues 13 and 15) --------------------------------------------------------
def test_target_and_bound_sections_appear_only_when_the_plan_has_them(tmp_path, monkeypatch):
    wk = dm.Workload(adult_domain(), [("race", "sex"), ("income>50K",), ("marital-status",)])
    plan = dm.plan(wk, rho=0.5, objective="sum_var")
    html = write_plan_report(plan, tmp_path / "p.html", fairness=False).read_text()
    assert 'id="targets"' not in html
    # every Gaussian plan has lower_bound() / optimality_ratio(): the real values
    # render (a sum_var ResidualPlanner plan on marginals reaches the bound: ratio 1)
    facts = plan_facts(plan)
    assert facts["lower_bound"]["value"] == pytest.approx(plan.loss(), rel=1e-9)
    assert facts["lower_bound"]["ratio"] == pytest.approx(1.0, abs=1e-9)
    assert check_numbers(tagged_from_html(html), facts)["key"] > 0
    bound = html.split('id="optimality"')[1].split("</section>")[0]
    assert "weighted total variance" in bound and f"{plan.loss():.4g}"[:4] in bound

    targets = pd.DataFrame({"marginal": ["race,sex", "income>50K"], "target": [30.0, 12.0],
                            "achieved": [30.0, 9.5], "ratio": [1.0, 9.5 / 12.0], "binding": [True, False]})
    # a residual plan that states targets and a bound of its own (the HasTargets capability)
    monkeypatch.setattr(dm.ResidualPlan, "target_table", lambda self: targets, raising=False)
    monkeypatch.setattr(dm.ResidualPlan, "certificate", lambda self: {}, raising=False)
    monkeypatch.setattr(dm.ResidualPlan, "lower_bound_facts", lambda self: {"value": 123.25, "ratio": 1.0625})
    html = write_plan_report(plan, tmp_path / "p2.html", fairness=False).read_text()
    assert 'id="targets"' in html and 'id="optimality"' in html
    facts = plan_facts(plan)
    assert facts["targets"][1]["achieved"] == 9.5 and facts["lower_bound"] == {"value": 123.25, "ratio": 1.0625}
    counts = check_numbers(tagged_from_html(html), facts)
    assert counts["key"] > 0
    section = html.split('id="targets"')[1].split("</section>")[0]
    assert section.count("binds") == 1 and "slack" in section
    bound = html.split('id="optimality"')[1].split("</section>")[0]
    assert "123.2" in bound and "1.062" in bound


# -- other planners ------------------------------------------------------------------------------
def test_generalized_marginals_plan_report(tmp_path):
    """ResidualPlanner+ (prefix queries): numbers per query, the construction named."""
    dom = dm.Domain({"age": 6, "sex": 2, "race": 3})
    wk = dm.Workload.marginals(dom, 2, upto=True, query_types={"age": "prefix"})
    plan = dm.plan(wk, rho=0.5, objective="sum_var")
    html = write_plan_report(plan, tmp_path / "p.html").read_text()
    text = page_text(html)
    assert "worst query" in text and "residual construction" in text
    facts = plan_facts(plan)
    structural = {"pcoef", "share", "outputs", "share_order", "n_measured", "n_measured_k", "fair",
                  "shown_bars", "omitted_bars", "omitted_rows", "shown_residuals", "omitted_residuals"}
    check_numbers(tagged_from_html(html), facts, structural=structural)
    # the budget shares shown add up to the whole budget
    shares = [derived(html, ["share_order", k]) for k in range(3)]
    assert math.isclose(sum(shares), 1.0, rel_tol=1e-12)


def test_querysmasher_plan_report(tmp_path):
    wk = dm.Workload(dm.Domain({"a": 4, "b": 3, "c": 2}), [("a", "b"), ("c",)])
    plan = dm.plan(wk, pcost=1.0, planner="querysmasher")
    html = write_plan_report(plan, tmp_path / "qs.html").read_text()
    text = page_text(html)
    assert "optimizes the sum of variances only" in text
    shares = [derived(html, ["share_order", k]) for k in range(3)]
    assert math.isclose(sum(shares), 1.0, rel_tol=1e-12)
    # each share is the residual space's sub-mechanism cost over the plan's privacy cost
    # (pcost = Σ pcost(M_A) / σ²_A, QuerySmasher §5)
    costs = [plan.solutions[r.structure].pcost / r.sigma2 for r in plan.residuals.values()]
    assert math.isclose(sum(costs), plan.pcost, rel_tol=1e-12)
    for j, c in enumerate(costs):
        assert math.isclose(derived(html, ["share", j]), c / plan.pcost, rel_tol=1e-12)


def test_plan_and_release_report_methods(tmp_path):
    from dpmatrix.release import load_release

    plan = small_plan()
    page = plan.report(tmp_path / "plan.html", fairness=False)
    assert page == tmp_path / "plan.html" and "A plan for a differentially private release" in page.read_text()
    out = write_release(plan.measure(adult_codes(), rng=np.random.default_rng(6)), tmp_path / "rel")
    page = load_release(out).report(fairness=False)
    assert page == out / "report.html" and "A differentially private release" in page.read_text()


def test_pure_epsilon_privacy_is_stated_without_a_delta_curve():
    """Hook for pure ε-DP planners: a privacy entry with δ = 0 is shown as pure ε-DP
    (with ρ = ε²/2 when given), without an ε(δ) curve and without μ-GDP."""
    from dpmatrix._report.html import render

    plan = small_plan()
    facts = plan_facts(plan)
    facts["privacy"] = {"epsilon": 1.5, "delta": 0.0, "rho": 1.5**2 / 2, "mu": None}
    facts["mechanism"] = {"noise": "discrete_laplace", "randomness": "os_csprng", "planner": "pure"}
    html = render(content._content("release", facts, plan, fairness=False, folder=None, prefix=""))
    text = page_text(html)
    assert "pure ε-DP" in text and "The (ε, δ) trade-off" not in text and "not claimed" in text
    assert "discrete_laplace noise" in text
    check_numbers(tagged_from_html(html), facts, structural={
        "fair", "pcoef", "share", "outputs", "share_order", "n_measured", "n_measured_k", "shown_bars",
        "omitted_bars", "omitted_rows", "shown_residuals", "omitted_residuals"})
    assert html.count('data-key=\'[&quot;privacy&quot;,&quot;epsilon&quot;]\'') == 2  # card and table
