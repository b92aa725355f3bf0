"""The HTML report as a reader sees it: opened in headless Chromium (Debian's chromium), with a
screenshot, no console error, no network request, visible privacy numbers, non-blank figures, and
every number on the page equal to the one in the manifest, the release's files, or an
independent recomputation.
"""

import json
import math
from xml.etree import ElementTree

import numpy as np
import pytest
from report_checks import (
    IMAGES_JS,
    TAGGED_JS,
    UNTAGGED_DIGITS_JS,
    check_numbers,
    data_url_svg,
    epsilon_at,
    epsilon_from_rho,
    nonblank,
)
from report_data import INCOME_LABELS, adult_codes, save_screenshot

import dpmatrix as dm
import oracle
from dpmatrix._report import write_plan_report
from dpmatrix._statement import privacy_summary
from dpmatrix.release import load_release


def _key(*path) -> str:
    return json.dumps(list(path), separators=(",", ":"))


def oracle_profile(plan) -> dict[str, float]:
    """RMSE, largest, smallest and spread of the per-marginal cell variances of a plain plan,
    from Theorem 4.4 in the oracle (explicit formula, no dpmatrix code) and the plan's σ²."""
    sizes = list(plan.domain.sizes)
    s2 = {tuple(s): float(v) for s, v in zip(plan.closure.sets, plan.sigma2)}
    wk = plan.workload
    var = np.array([oracle.theorem44_cell_variance(sizes, wk.sets[i], s2) for i in range(len(wk))])
    cells = np.array([math.prod(sizes[a] for a in wk.sets[i]) for i in range(len(wk))])
    return {"rmse": math.sqrt(float(np.sum(var * cells) / np.sum(cells))), "max_variance": float(var.max()),
            "min_marginal": float(var.min()), "spread": float(var.max() / var.min())}


def fairness_oracle(plan):
    """The §6.2 comparison recomputed: the plan itself for its objective, a fresh plan (same
    workload, same privacy cost) for the other, each evaluated by the oracle."""
    profiles = {plan.objective: oracle_profile(plan)}
    other = "sum_var" if plan.objective == "max_var" else "max_var"
    profiles[other] = oracle_profile(dm.plan(plan.workload, objective=other, pcost=plan.pcost))
    return lambda objective, stat: profiles[objective][stat]


def check_figures(chromium, *, at_least: int) -> int:
    """Every image is decoded by the browser, its embedded SVG is a well-formed drawing with
    text and shapes, and the region of the screen where it is drawn is not blank."""
    imgs = chromium.evaluate(IMAGES_JS)
    assert len(imgs) >= at_least
    for im in imgs:
        assert im["complete"] and im["natural"] > 0, im["alt"]
        assert im["alt"], "every figure has an alternative text"
        svg = ElementTree.fromstring(data_url_svg(im["src"]))
        drawn = [e for e in svg.iter() if e.tag.split("}")[-1] in ("rect", "line", "polyline", "circle", "polygon")]
        assert len(drawn) > 5 and any(e.tag.endswith("text") for e in svg.iter()), im["alt"]
        assert im["visible"] and im["width"] > 100 and im["height"] > 80
        clip = {k: im[k] for k in ("x", "y", "width", "height")}
        std, ink = nonblank(chromium.screenshot(clip))
        assert std > 8 and ink > 0.01, ("blank on screen", im["alt"], std, ink)
    return len(imgs)


def test_release_report_in_chromium(chromium, adult_release, tmp_path):
    page = adult_release / "report.html"
    loaded = chromium.open(page)
    assert loaded.errors == []
    # self-contained: the page itself is the only file, everything else is inline data
    assert [u for u in loaded.requests if not u.startswith("data:")] == [page.resolve().as_uri()]
    shot = save_screenshot(chromium.screenshot(), "release-report.png", tmp_path)
    std, ink = nonblank(shot.read_bytes())
    assert std > 8 and ink > 0.02
    print(f"screenshot: {shot}")

    manifest = json.loads((adult_release / "manifest.json").read_text())
    tagged = chromium.evaluate(TAGGED_JS)
    # the privacy guarantee is on screen (not folded away), in every unit
    visible = {t["key"] for t in tagged if t["visible"] and t["key"]}
    for unit in ("rho", "epsilon", "delta", "mu", "pcost"):
        assert _key("privacy", unit) in visible, unit
    header = chromium.evaluate("document.querySelector('header').innerText")
    assert "ρ = 0.5" in header and "ε = " in header
    # a seeded numpy-generator release is flagged (a user's generator is recorded as
    # seeded), never called secure
    assert "NOT PRIVATE" in header and "secure source" not in header

    plan = load_release(adult_release).plan
    counts = check_numbers(tagged, manifest, folder=adult_release, fair=fairness_oracle(plan))
    n_marg = len(manifest["marginals"])
    assert counts["key"] >= 3 * n_marg  # cells, weight, variance of every marginal at least
    assert counts["src"] > 100 and counts["derive"] > 2 * n_marg
    assert chromium.evaluate(UNTAGGED_DIGITS_JS) == []

    # every released marginal is on the page (all are small here), the labels from the domain
    # included; its links are the release's own files
    ids = chromium.evaluate("Array.from(document.querySelectorAll('.marginal')).map(e => e.id)")
    assert sorted(ids) == sorted(f"m{i}" for i in range(n_marg))
    # smallest first within each order (a reader sees the short tables before the long ones)
    shown = [manifest["marginals"][int(i[1:])] for i in ids]
    assert shown == sorted(shown, key=lambda m: (len(m["attributes"]), m["cells"]))
    # each table links what a browser opens (its CSV; none in this Parquet-only release), else a
    # copyable command that prints it; the Parquet dataset is linked once
    links = chromium.evaluate("Array.from(document.querySelectorAll('.files a')).map(a => a.getAttribute('href'))")
    assert sorted(links) == sorted(f for m in manifest["marginals"] for f in m.get("files", {}).values())
    lines = chromium.evaluate("Array.from(document.querySelectorAll('.files code.q')).map(c => c.innerText)")
    assert len(lines) == n_marg and all(x.startswith("dpmatrix query release --marginal ") for x in lines)
    assert chromium.evaluate("Array.from(document.querySelectorAll('a')).filter(a => a.getAttribute('href') === 'tables/').length") == 1
    text = chromium.evaluate("document.body.innerText")
    assert all(label in text for label in INCOME_LABELS)
    # one figure per marginal (but the total), plus ε(δ), fairness and budget shares; max_var
    # gives every marginal the same std here, which is said in words instead of equal bars
    assert "Every marginal has the same worst-case standard deviation" in text
    assert check_figures(chromium, at_least=3 + n_marg - 1) == 3 + n_marg - 1


def test_plan_report_in_chromium(chromium, adult_plan, tmp_path):
    page = write_plan_report(adult_plan, tmp_path / "plan.html")
    loaded = chromium.open(page)
    assert loaded.errors == []
    assert [u for u in loaded.requests if not u.startswith("data:")] == [page.resolve().as_uri()]
    save_screenshot(chromium.screenshot(), "plan-report.png", tmp_path)

    # the plan's numbers, gathered here from its own methods in the manifest's layout
    plan, wk = adult_plan, adult_plan.workload
    info = plan.marginal_table()
    facts = {
        "library": {"version": dm.__version__},
        # the guarantee of the plan's default release: secure discrete noise, stated through
        # zCDP (Canonne-Kamath-Steinke), no mu-GDP claimed
        "privacy": {"rho": plan.rho, "pcost": plan.pcost, "mu": None,
                    "epsilon": privacy_summary(plan, delta=1e-9)["epsilon"],
                    "delta": 1e-9, "accounting": "discrete_gaussian_zcdp"},
        "accuracy": {"rmse": plan.rmse(), "max_variance": plan.max_variance()},
        "confidence_level": 0.95,
        "domain": plan.domain.to_dict(),
        "residuals": [{"attributes": list(plan.domain.names_of(s)), "sigma2": float(v)}
                      for s, v in zip(plan.closure.sets, plan.sigma2)],
        "marginals": [{"attributes": list(wk.names(i)), "cells": int(wk.cells[i]),
                       "weight": float(wk.weights[i]), "max_variance": float(info["max_variance"][i])}
                      for i in range(len(wk))],
        # the distance to the singular value bound (its numbers are checked against a
        # dense SVD in tests/planners/test_optimality*.py)
        "lower_bound": plan.lower_bound_facts(),
    }  # fmt: skip
    # ... which agree with the explicit formulas (Theorem 4.4; the analytic Gaussian curve)
    by_hand = oracle_profile(plan)
    assert math.isclose(facts["accuracy"]["max_variance"], by_hand["max_variance"], rel_tol=1e-9)
    assert math.isclose(facts["accuracy"]["rmse"], by_hand["rmse"], rel_tol=1e-9)
    assert math.isclose(facts["privacy"]["epsilon"], epsilon_from_rho(1e-9, plan.rho), rel_tol=1e-9)
    # ... and the continuous claim (analytic curve) is below the stated discrete guarantee
    assert epsilon_at(1e-9, plan.pcost) < facts["privacy"]["epsilon"]

    tagged = chromium.evaluate(TAGGED_JS)
    counts = check_numbers(tagged, facts, fair=fairness_oracle(plan))
    assert counts["key"] >= 3 * len(wk) and counts["src"] == 0
    assert chromium.evaluate(UNTAGGED_DIGITS_JS) == []
    text = chromium.evaluate("document.body.innerText")
    assert "chosen when measuring" in text and "Released marginals" not in text
    # the §6.2 trade-off is on the page: max_var has the smaller worst case, sum_var the smaller RMSE
    fair = {t["derive"] or t["key"]: float(t["value"]) for t in tagged
            if (t["derive"] or "").startswith('["fair"')}
    assert fair[_key("fair", "sum_var", "max_variance")] > plan.max_variance()
    assert fair[_key("fair", "sum_var", "rmse")] < plan.rmse()
    assert check_figures(chromium, at_least=3) == 3

    # a sum_var plan: unequal marginals, drawn as sorted bars
    other = write_plan_report(dm.plan(wk, rho=0.5, objective="sum_var"), tmp_path / "sum.html")
    assert chromium.open(other).errors == []
    assert check_figures(chromium, at_least=4) == 4


@pytest.mark.parametrize("level", [0.9])
def test_numbers_follow_the_release_level_and_delta(chromium, adult_plan, tmp_path, level):
    """A release at another confidence level and δ: the page's margins and ε follow it."""
    from dpmatrix._report import write_release_report
    from dpmatrix.release import write_release

    small = dm.plan(dm.Workload(adult_plan.domain, [("race", "sex"), ("income>50K",)]), mu=0.8)
    out = write_release(small.measure(adult_codes(), rng=np.random.default_rng(5)), tmp_path / "rel",
                        level=level, delta=1e-6)
    page = write_release_report(out)
    assert chromium.open(page).errors == []
    manifest = json.loads((out / "manifest.json").read_text())
    tagged = chromium.evaluate(TAGGED_JS)
    check_numbers(tagged, manifest, folder=out, fair=fairness_oracle(load_release(out).plan))
    assert "90 %" in chromium.evaluate("document.body.innerText")
    assert chromium.evaluate(UNTAGGED_DIGITS_JS) == []


LAYOUT_JS = r"""
(() => {
  const boxes = sel => Array.from(document.querySelectorAll(sel)).map(e => e.getBoundingClientRect())
    .map(r => ({l: r.left + scrollX, t: r.top + scrollY, r: r.right + scrollX, b: r.bottom + scrollY}));
  const nav = document.querySelector('nav.toc').getBoundingClientRect();
  return {scroll: document.documentElement.scrollWidth, inner: innerWidth,
          nav: {l: nav.left, r: nav.right}, figures: boxes('figure.fig img'), cards: boxes('.card'),
          main: boxes('main')[0]};
})()
"""


def _overlap(a, b) -> bool:
    return a["l"] < b["r"] - 0.5 and b["l"] < a["r"] - 0.5 and a["t"] < b["b"] - 0.5 and b["t"] < a["b"] - 0.5


@pytest.mark.parametrize("width", [1024, 1280, 1920])
def test_release_report_layout_holds_from_1024_to_1920_px(chromium, adult_release, tmp_path, width):
    """At each width: nothing wider than the window (no horizontal scrolling), the navigation
    inside the page, no figure or card overlapping another, every figure inside the text
    column; the screenshot is kept for a reader to look at."""
    chromium.width = width
    try:
        assert chromium.open(adult_release / "report.html").errors == []
        lay = chromium.evaluate(LAYOUT_JS)
        shot = save_screenshot(chromium.screenshot(), f"release-report-{width}.png", tmp_path)
    finally:
        chromium.width = 1280
    assert lay["scroll"] <= lay["inner"], lay["scroll"]
    assert 0 <= lay["nav"]["l"] and lay["nav"]["r"] <= lay["inner"]
    for group in ("figures", "cards"):
        boxes = lay[group]
        assert all(not _overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), group
    main = lay["main"]
    assert all(main["l"] <= f["l"] and f["r"] <= main["r"] + 0.5 for f in lay["figures"])
    std, ink = nonblank(shot.read_bytes())
    assert std > 8 and ink > 0.02
