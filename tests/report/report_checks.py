"""Checks of a rendered report page, shared by the report tests.

Every number on a report page is tagged with its origin (see ``dpmatrix/_report/html.py``).
These helpers read the tags out of the live page and recompute each number *without* the
report code: manifest paths are looked up, derived quantities are recomputed from their
definitions (the oracle's Theorem 4.3 coefficients, the analytic-Gaussian δ(ε) formula solved
independently, square roots and normal quantiles), table cells are read from the release's own
CSV and Parquet files.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image
from scipy.optimize import brentq
from scipy.stats import norm

import oracle

# every tagged element of the page, with what it shows and where it says it comes from
TAGGED_JS = r"""
(() => {
  const out = [];
  for (const el of document.querySelectorAll('[data-key],[data-derive],[data-src],[data-fixed]')) {
    const r = el.getBoundingClientRect();
    const d = el.dataset;
    out.push({key: d.key ?? null, derive: d.derive ?? null, src: d.src ?? null,
              row: d.row ?? null, col: d.col ?? null, fixed: el.hasAttribute('data-fixed'),
              value: d.value ?? null, text: d.text ?? null, scale: d.scale ?? null,
              html: el.innerHTML, shown: el.textContent,
              visible: r.width > 0 && r.height > 0 && !!el.offsetParent});
  }
  return out;
})()
"""

# text of the page that holds a digit but no tag: must be empty
UNTAGGED_DIGITS_JS = r"""
(() => {
  const bad = [];
  const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let n;
  while ((n = w.nextNode())) {
    if (!/[0-9]/.test(n.nodeValue)) continue;
    if (n.parentElement.closest('[data-key],[data-derive],[data-src],[data-fixed],[data-label],style')) continue;
    bad.push(n.nodeValue.trim());
  }
  return bad;
})()
"""

IMAGES_JS = r"""
(() => Array.from(document.images).map(img => {
  const r = img.getBoundingClientRect();
  return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height,
          natural: img.naturalWidth, complete: img.complete, src: img.src, alt: img.alt,
          visible: !!img.offsetParent};
}))()
"""


# -- reading numbers off the page -------------------------------------------------------------
def parse_shown(html: str) -> tuple[float, float]:
    """(number, half a unit of its last shown digit) of a displayed number's HTML."""
    text = re.sub(r"<[^>]+>", lambda m: "e" if m.group(0) == "<sup>" else "", html)
    text = text.replace("\u2212", "-").replace(",", "").replace("%", "").strip()
    m = re.fullmatch(r"(-?)(?:([\d.]+) × )?10e(-?\d+)", text)
    if m:  # scientific: "1.23 × 10e-5" or "10e-9"
        mant = m.group(2) or "1"
        exp = int(m.group(3))
        decimals = len(mant.split(".")[1]) if "." in mant else 0
        value = float(m.group(1) + mant) * 10.0**exp
        return value, 0.5 * 10.0 ** (exp - decimals)
    m = re.fullmatch(r"-?\d+(?:\.(\d+))?", text)
    if not m:
        raise AssertionError(f"not a number: {html!r}")
    decimals = len(m.group(1) or "")
    return float(text), 0.5 * 10.0**-decimals


def resolve(facts: Mapping[str, Any], path: list) -> Any:
    node: Any = facts
    for p in path:
        node = node[p]
    return node


def z_value(level: float) -> float:
    return float(norm.ppf(0.5 + level / 2))


def epsilon_at(delta: float, pcost: float) -> float:
    """ε of the analytic Gaussian curve at δ, solved from the oracle's δ(ε) (Definition 2)."""
    if oracle.delta(0.0, pcost) <= delta:
        return 0.0
    return brentq(lambda e: math.log(max(oracle.delta(e, pcost), 1e-300)) - math.log(delta), 0.0, 200.0,
                  xtol=1e-13, rtol=1e-13)


def epsilon_from_rho(delta: float, rho: float) -> float:
    """ε implied by ρ-zCDP at δ (Canonne, Kamath, Steinke 2020, Proposition 12):
    δ = exp((α − 1)(αρ − ε)) / (α − 1) · (1 − 1/α)^α for any α > 1, solved for ε here as
    αρ + (log(1/δ) + (α − 1) log(1 − 1/α) − log α) / (α − 1) (the same expression rearranged:
    α log(1 − 1/α) − log(α − 1) = (α − 1) log(1 − 1/α) − log α) and minimized over α on a fine
    grid in log(α − 1), then refined with a bounded scalar minimization."""
    from scipy.optimize import minimize_scalar

    def eps(t: float) -> float:
        a = 1.0 + math.exp(t)
        return a * rho + (math.log(1 / delta) + (a - 1) * math.log1p(-1 / a) - math.log(a)) / (a - 1)

    grid = np.linspace(-20, 20, 4001)
    t0 = grid[int(np.argmin([eps(t) for t in grid]))]
    res = minimize_scalar(eps, bounds=(t0 - 0.02, t0 + 0.02), method="bounded", options={"xatol": 1e-12})
    return max(float(res.fun), 0.0)


def domain_sizes(facts: Mapping[str, Any]) -> dict[str, int]:
    return {k: (v["size"] if isinstance(v, Mapping) else v) for k, v in facts["domain"].items()}


def residual_costs(facts: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p_A, σ²_A, outputs) of every residual in the facts, from Theorem 4.3 (plain marginals)."""
    sizes = domain_sizes(facts)
    names = list(sizes)
    coef, s2, outs = [], [], []
    for r in facts["residuals"]:
        pos = [names.index(a) for a in r["attributes"]]
        coef.append(oracle.theorem43_pcost_coef([sizes[n] for n in names], pos))
        s2.append(float(r["sigma2"]))
        outs.append(math.prod(sizes[a] - 1 for a in r["attributes"]))
    return np.array(coef), np.array(s2), np.array(outs)


def expected_derived(facts: Mapping[str, Any], rule: list, fair: Callable[[str, str], float] | None,
                     discrete: bool = False) -> float:
    """Recompute a derived number from the facts by the rule named in its tag."""
    kind, args = rule[0], rule[1:]
    level = float(facts.get("confidence_level", 0.95))
    if kind == "sqrt":
        return math.sqrt(float(resolve(facts, args[0])))
    if kind == "moe":
        return z_value(level) * math.sqrt(float(resolve(facts, args[0])))
    if kind == "epsilon_at":
        # discrete Gaussian noise (a release's, or a plan's default secure noise): ε from ρ-zCDP only
        if discrete or facts["privacy"].get("accounting") == "discrete_gaussian_zcdp":
            return epsilon_from_rho(float(args[0]), float(facts["privacy"]["rho"]))
        return epsilon_at(float(args[0]), float(facts["privacy"]["pcost"]))
    if kind in ("pcoef", "share", "outputs", "share_order", "n_measured", "n_measured_k"):
        coef, s2, outs = residual_costs(facts)
        finite = np.isfinite(s2)
        cost = np.where(finite, coef / np.where(finite, s2, 1.0), 0.0)
        orders = np.array([len(r["attributes"]) for r in facts["residuals"]])
        if kind == "pcoef":
            return float(coef[args[0]])
        if kind == "outputs":
            return float(outs[args[0]])
        if kind == "share":
            return float(cost[args[0]] / cost.sum())
        if kind == "share_order":
            return float(cost[orders == args[0]].sum() / cost.sum())
        if kind == "n_measured":
            return float(finite.sum())
        return float(np.sum(finite & (orders == args[0])))
    ms = facts["marginals"]
    if kind == "count":
        return float(len(ms))
    if kind == "sum_cells":
        return float(sum(m["cells"] for m in ms))
    if kind == "rows":  # plain marginals: one row per cell
        return float(ms[args[0]]["cells"])
    if kind == "count_k":
        return float(sum(len(m["attributes"]) == args[0] for m in ms))
    if kind == "order_std":
        stds = [math.sqrt(m["max_variance"]) for m in ms if len(m["attributes"]) == args[0]]
        return min(stds) if args[1] == "min" else max(stds)
    if kind == "fair":
        assert fair is not None, "a fairness number needs the comparison plans"
        return fair(args[0], args[1])
    raise KeyError(f"no independent rule for {rule}")


# -- the checks ---------------------------------------------------------------------------------
def check_numbers(tagged: list[dict], facts: Mapping[str, Any], *, folder: Path | None = None,
                  fair: Callable[[str, str], float] | None = None,
                  structural: set[str] = frozenset({"shown_bars", "omitted_bars", "omitted_rows",
                                                    "shown_residuals", "omitted_residuals", "shown_k", "top",
                                                    "links_left_out"}),
                  discrete: bool = False) -> dict[str, int]:
    """Every tagged number: its text shows its value, and its value is the manifest's (or the
    independently recomputed one, or the release file's cell). Returns counts by kind."""
    counts = {"key": 0, "derive": 0, "src": 0, "fixed": 0, "structural": 0}
    tables: dict[str, pd.DataFrame] = {}
    for t in tagged:
        if t["text"] is not None:  # a string fact (version, creation time)
            assert t["shown"] == t["text"] == resolve(facts, json.loads(t["key"])), t
            counts["key"] += 1
            continue
        if t["value"] is None:  # a constant of the report's prose (a section number)
            assert t["fixed"] and re.fullmatch(r"[\d.]+", t["shown"]), t
            counts["fixed"] += 1
            continue
        value = float(t["value"])
        scale = float(t["scale"] or 1.0)
        shown, half_unit = parse_shown(t["html"].replace(" %", ""))
        assert abs(shown - value * scale) <= half_unit * (1 + 1e-9) + 1e-12 * abs(value * scale), t
        if t["key"] is not None:
            want = float(resolve(facts, json.loads(t["key"])))
            assert value == want, (t, want)
            counts["key"] += 1
        elif t["derive"] is not None:
            rule = json.loads(t["derive"])
            if rule[0] in structural:
                counts["structural"] += 1
                continue
            want = expected_derived(facts, rule, fair, discrete)
            assert math.isclose(value, want, rel_tol=1e-7, abs_tol=1e-12), (t, want)
            counts["derive"] += 1
        elif t["src"] is not None:
            assert folder is not None
            src = t["src"]
            if src not in tables:  # the published table, as Parquet (and CSV if there is one)
                part, _, key = src.partition("#")
                path = folder / part
                assert path.resolve().is_relative_to(folder.resolve()), src
                if key:  # a table of the Parquet dataset, read with pandas' one-call filter
                    tables[src] = pd.read_parquet(path, filters=[("marginal", "==", key)])
                    entry = next(e for e in facts["marginals"] if e.get("key") == key)
                    csv = entry.get("files", {}).get("csv")
                    if csv:
                        tables[src + ":csv"] = pd.read_csv(folder / csv, keep_default_na=False)
                else:  # one file per marginal and format (release format 1)
                    tables[src] = pd.read_parquet(path.with_suffix(".parquet"))
                    tables[src + ":csv"] = pd.read_csv(path.with_suffix(".csv"), keep_default_na=False)
            for fmt in ("", ":csv"):
                if src + fmt not in tables:
                    continue
                cell = tables[src + fmt][t["col"]].iloc[int(t["row"])]
                assert value == float(cell), (t, fmt, cell)
            counts["src"] += 1
        else:
            assert t["fixed"], t
            counts["fixed"] += 1
    return counts


def tagged_from_html(text: str) -> list[dict]:
    """The tagged numbers of a page read from its HTML source (no browser; no visibility)."""
    import html as _html

    out = []
    for m in re.finditer(r'<span (class="num" [^>]*|data-fixed)>(.*?)</span>', text, flags=re.S):
        attrs = dict((k, _html.unescape(v) if v is not None else "")
                     for k, v in re.findall(r'(data-[a-z]+)(?:=["\']([^"\']*)["\'])?', m.group(1)))
        inner = m.group(2)
        out.append({"key": attrs.get("data-key"), "derive": attrs.get("data-derive"),
                    "src": attrs.get("data-src"), "row": attrs.get("data-row"), "col": attrs.get("data-col"),
                    "fixed": "data-fixed" in attrs, "value": attrs.get("data-value"),
                    "text": attrs.get("data-text"), "scale": attrs.get("data-scale"), "html": inner,
                    "shown": _html.unescape(re.sub(r"<[^>]+>", "", inner)), "visible": None})
    return out


def nonblank(png: bytes) -> tuple[float, float]:
    """(standard deviation of the grey levels, fraction of pixels that are not near-white)."""
    img = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return float(img.std()), float(np.mean(img < 235))


def data_url_svg(src: str) -> bytes:
    prefix = "data:image/svg+xml;base64,"
    assert src.startswith(prefix), src[:40]
    return base64.b64decode(src[len(prefix):])


def data_url_png(src: str) -> bytes:
    prefix = "data:image/png;base64,"
    assert src.startswith(prefix), src[:40]
    return base64.b64decode(src[len(prefix):])
