"""The report page: one self-contained HTML file (inline CSS, figures as ``data:`` PNGs, no
script, no network resource).

Every number on the page is written by :func:`num`, which tags it with where it comes from, so
a reader (or a test) can check it against the release:

* ``data-key='["privacy", "rho"]'`` — a path in the manifest (for a plan, in
  :func:`~dpmatrix._report.content.plan_facts`), ``data-value`` the exact number;
* ``data-derive='["sqrt", ["marginals", 3, "max_variance"]]'`` — a number computed from the
  manifest by a rule named in the tag (square root, budget share, ε at another δ, ...);
* ``data-src`` / ``data-row`` / ``data-col`` — a cell of one of the release's saved tables;
* ``data-fixed`` — a constant of the report itself (the δ grid, a section number).

Names and labels (attribute names, category labels, file names) are tagged ``data-label``.
"""

from __future__ import annotations

import html as _html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from . import figures
from .content import (
    MAX_ACCURACY_ROWS,
    MAX_STD_BARS,
    Report,
    TableView,
)

__all__ = ["fmt", "num", "render", "write_report"]

MINUS = "\u2212"


# -- numbers -----------------------------------------------------------------------------------
def fmt(value: float | int | None, sig: int = 4, *, sci: bool = False) -> str:
    """Display text of a number: ``sig`` significant digits (integers in full) with thousands
    separators, scientific notation (``1.2 × 10<sup>−5</sup>``, ``10<sup>−9</sup>``) outside
    [10⁻³, 10⁷) or when ``sci``."""
    if value is None:
        return "—"
    v = float(value)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "∞" if v > 0 else MINUS + "∞"
    if v == 0:
        return "0"
    a = abs(v)
    if 1e-3 <= a < 1e7 and not sci:
        decimals = max(0, sig - 1 - math.floor(math.log10(a)))
        text = f"{a:,.{decimals}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
    else:
        mant, exp = f"{a:.{sig - 1}e}".split("e")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        e = int(exp)
        power = f"10<sup>{MINUS if e < 0 else ''}{abs(e)}</sup>"
        text = power if mant == "1" else f"{mant} × {power}"
    return (MINUS if v < 0 else "") + text


def _attr_json(obj: Any) -> str:
    return _html.escape(json.dumps(obj, separators=(",", ":")), quote=True)


def num(value: float | int | None, *, key: Sequence | None = None, derive: Sequence | None = None,
        src: tuple[str, int, str] | None = None, fixed: bool = False, sig: int = 4, scale: float = 1.0,
        suffix: str = "", sci: bool = False) -> str:
    """One tagged number (see the module docstring). ``scale`` multiplies the shown value only
    (100 for a percentage); ``data-value`` always holds the unscaled number."""
    attrs = []
    if key is not None:
        attrs.append(f"data-key='{_attr_json(list(key))}'")
    if derive is not None:
        attrs.append(f"data-derive='{_attr_json(list(derive))}'")
    if src is not None:
        attrs.append(f'data-src="{_html.escape(src[0])}" data-row="{src[1]}" data-col="{_html.escape(src[2])}"')
    if fixed:
        attrs.append("data-fixed")
    if not (key or derive or src or fixed):
        raise ValueError("every number on the page says where it comes from")
    if value is not None:
        attrs.append(f'data-value="{float(value)!r}"')
    if scale != 1.0:
        attrs.append(f'data-scale="{scale!r}"')
    shown = fmt(None if value is None else float(value) * scale, sig, sci=sci)
    return f'<span class="num" {" ".join(attrs)}>{shown}{suffix}</span>'


def lab(text: str) -> str:
    """A name or label from the domain, escaped and tagged."""
    return f"<span data-label>{_html.escape(str(text))}</span>"


def mname(attrs: Sequence[str]) -> str:
    """Display name of a marginal: ``age × sex``; ``total`` for the 0-way marginal."""
    if not attrs:
        return '<span class="total">total count</span>'
    return " × ".join(lab(a) for a in attrs)


def _k_name(k: int) -> str:
    words = ["Total", "One-way", "Two-way", "Three-way", "Four-way", "Five-way", "Six-way"]
    return words[k] if k < len(words) else f'<span data-fixed>{k}</span>-way'


def _img(fig: figures.Figure, cls: str = "") -> str:
    return (f'<figure class="fig {cls}"><img src="{fig.data_url}" width="{fig.width}" '
            f'height="{fig.height}" alt="{_html.escape(fig.alt)}"></figure>')


def _z(level: float) -> float:
    return float(NormalDist().inv_cdf(0.5 + level / 2))


def _pct(level: float) -> str:
    return num(level, key=["confidence_level"], scale=100, sig=3, suffix=" %")


# -- page ----------------------------------------------------------------------------------------
_CSS = """
:root { --ink:#1b1f24; --muted:#57606a; --line:#d8dee4; --bg:#f6f8fa; --blue:#0072B2;
  --green:#007a5a; --orange:#b25f00; --red:#b33c00; }
* { box-sizing: border-box; }
html { font-size: 16px; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.5;
  font-family: "DejaVu Sans", "Liberation Sans", Arial, Helvetica, sans-serif; }
main { max-width: 1040px; margin: 0 auto; padding: 28px 32px 64px; }
header.top { border-bottom: 3px solid var(--blue); padding-bottom: 14px; margin-bottom: 20px; }
.eyebrow { text-transform: uppercase; letter-spacing: .08em; font-size: .78rem; color: var(--blue);
  font-weight: 700; margin: 0; }
h1 { font-size: 1.85rem; margin: 4px 0 6px; line-height: 1.2; }
h2 { font-size: 1.35rem; margin: 38px 0 4px; padding-top: 6px; border-top: 1px solid var(--line); }
h3 { font-size: 1.08rem; margin: 26px 0 4px; }
h3.group { font-size: 1.2rem; margin-top: 30px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.meta { color: var(--muted); margin: 0; font-size: .92rem; }
p.explain { color: var(--muted); margin: 2px 0 14px; max-width: 60rem; }
.cards { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; margin: 18px 0 8px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; background: var(--bg); }
.card h4 { margin: 0 0 6px; font-size: .78rem; text-transform: uppercase; letter-spacing: .06em;
  color: var(--muted); }
.card .big { font-size: 1.35rem; font-weight: 700; line-height: 1.25; }
.card .small { font-size: .86rem; color: var(--muted); margin-top: 4px; }
nav.toc { font-size: .9rem; margin-top: 12px; display: flex; flex-wrap: wrap; gap: 4px 14px; }
nav.toc a { color: var(--blue); text-decoration: none; white-space: nowrap; }
code.q { font-size: .8rem; background: var(--bg); border: 1px solid var(--line); border-radius: 4px;
  padding: 1px 6px; user-select: all; white-space: pre-wrap; word-break: break-all; }
td.vals { color: var(--muted); font-size: .85rem; max-width: 30rem; }
main { overflow-wrap: anywhere; }
a { color: var(--blue); }
.banner { border-radius: 8px; padding: 12px 16px; margin: 14px 0; font-weight: 600; }
.banner.danger { background: #fbe3d6; border: 2px solid var(--red); color: #6e2300; font-size: 1.05rem; }
.banner.warn { background: #fff1d6; border: 1px solid #e6a23c; color: #5c3a00; font-weight: 500; }
.badge { display: inline-block; border-radius: 999px; padding: 1px 10px; font-size: .8rem;
  font-weight: 700; vertical-align: 1px; }
.badge.ok { background: #d7f2e8; color: var(--green); }
.badge.warn { background: #ffe8bf; color: var(--orange); }
.badge.danger { background: #fbd5c1; color: var(--red); }
.badge.info { background: #dbeaf6; color: var(--blue); }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: .9rem; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 12px 5px 0; text-align: left;
  vertical-align: top; }
th { font-weight: 700; color: var(--muted); font-size: .8rem; text-transform: uppercase;
  letter-spacing: .04em; border-bottom: 2px solid var(--line); }
th.plain { text-transform: none; letter-spacing: 0; font-size: .88rem; }
table.kv td b { white-space: nowrap; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; padding-left: 12px; }
table.kv td:first-child { color: var(--muted); padding-right: 24px; min-width: 13rem; }
table.kv td { border-bottom: 1px solid #eef1f4; }
.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
figure.fig { margin: 10px 0 6px; }
figure.fig img { max-width: 100%; height: auto; display: block; }
details { margin: 6px 0 12px; }
details > summary { cursor: pointer; color: var(--blue); font-size: .92rem; }
.note { font-size: .88rem; color: var(--muted); }
.files a { margin-right: 10px; }
.marginal { margin: 8px 0 22px; }
.mhead { display: flex; align-items: baseline; gap: 18px; flex-wrap: wrap; }
.mhead h3 { margin: 14px 0 0; }
.mhead .files { font-size: .85rem; }
.mbody.side { display: flex; gap: 28px; align-items: flex-start; flex-wrap: wrap; }
.mbody.side figure.fig { flex: 0 0 auto; margin-top: 0; }
.mbody.side .mtable { flex: 1 1 260px; }
p.callout { border-left: 4px solid var(--blue); background: var(--bg); padding: 8px 14px; margin: 12px 0; }
p.headline { font-size: 1.25rem; font-weight: 700; margin: 4px 0; }
p.headline .note { font-weight: 400; }
.two { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 28px; }
footer { margin-top: 48px; border-top: 1px solid var(--line); padding-top: 10px; color: var(--muted);
  font-size: .85rem; }
@media (max-width: 1100px) { .cards { grid-template-columns: repeat(2, 1fr); } }
@media (max-width: 900px) { .cards { grid-template-columns: 1fr 1fr; } .two { grid-template-columns: 1fr; } }
@media print { nav.toc { display: none; } h2 { break-after: avoid; } figure { break-inside: avoid; } }
"""


def render(report: Report) -> str:
    """The HTML text of a report.

    Parameters
    ----------
    report : Report
        From :func:`~dpmatrix._report.content.plan_content` or
        :func:`~dpmatrix._report.content.release_content`.

    Returns
    -------
    str
        A complete, self-contained HTML document.
    """
    sections = [
        ("privacy", "Privacy guarantee", _privacy_section(report)),
        ("noise", "Noise and randomness", _noise_section(report)),
        ("attributes", "Attributes", _attributes_section(report)),
        ("accuracy", "Accuracy before data", _accuracy_section(report)),
    ]
    if report.accuracy.targets:
        sections.append(("targets", "Accuracy targets", _targets_section(report)))
    sections.append(("fairness", "Cell fairness", _fairness_section(report)))
    sections.append(("strategy", "The strategy", _strategy_section(report)))
    if report.bound is not None:
        sections.append(("optimality", "How close to the best possible", _bound_section(report)))
    if report.tables is not None:
        sections.append(("tables", "Released marginals", _tables_section(report)))
    toc = "".join(f'<a href="#{sid}">{title}</a>' for sid, title, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{title}</h2>{html}</section>' for sid, title, html in sections)
    what = "Release" if report.kind == "release" else "Plan"
    title = f"dpmatrix {what.lower()} report"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{title}</title><style>{_CSS}</style></head><body><main>"
        f"{_header(report, toc)}{body}{_footer(report)}</main></body></html>\n"
    )


def write_report(report: Report, path: str | Path) -> Path:
    """Write the page of ``report`` to ``path`` (UTF-8); returns the path."""
    path = Path(path)
    path.write_text(render(report), encoding="utf-8")
    return path


# -- header ----------------------------------------------------------------------------------------
def _randomness(report: Report) -> tuple[str, str, str]:
    """(badge class, short verdict, one-line explanation) of the randomness source."""
    r = report.mechanism.randomness
    if report.kind == "plan" or r is None:
        return ("info", "chosen when measuring",
                "A plan holds no noise yet: the randomness source is chosen when it is run on data.")
    r = str(r)
    if "seed" in r or "insecure" in r:
        return ("danger", "seeded: NOT PRIVATE",
                "The noise was drawn from a generator with a fixed seed. Anyone who finds the seed "
                "can remove the noise, so the privacy guarantee does not hold.")
    if r == "os_csprng":
        return ("ok", "secure source",
                "Exact integer noise drawn from the operating system's cryptographically secure "
                "random source.")
    if r == "numpy_generator":
        return ("warn", "not cryptographic",
                "NumPy's <span data-label>PCG64</span> generator seeded from the operating system: not a cryptographic "
                "source, and floating-point noise is open to known attacks on its low-order digits. "
                "The release does not record whether a fixed testing seed was used.")
    return ("warn", "unknown source", "The release does not say where its noise came from.")


def _header(report: Report, toc: str) -> str:
    p, acc = report.privacy, report.accuracy
    kind = report.kind
    badge, verdict, explain = _randomness(report)
    banner = ""
    if badge == "danger":
        banner = (f'<div class="banner danger" role="alert">Not for publication: {explain}</div>')
    meta = [f"dpmatrix {_version_span(report)}"]
    if report.created:
        meta.append(f'created <span class="num" data-key=\'{_attr_json(["created"])}\' '
                    f'data-text="{_html.escape(report.created)}">{_html.escape(report.created)}</span>')
    if report.ledger:
        meta.append(f"privacy-budget ledger: {_html.escape(report.ledger)}")
    meta.append(f"planner {lab(report.mechanism.planner)}")
    meta.append(f"objective {lab(report.mechanism.objective)}")
    heading = ("A differentially private release" if kind == "release"
               else "A plan for a differentially private release")
    noun = "released" if kind == "release" else "planned"
    if p.pure_epsilon is not None:
        privacy_card = ("Privacy", f"ε = {num(p.pure_epsilon, key=list(p.pure_key))}", "pure ε-DP (δ = 0)")
    else:
        eps_line = (f"ε = {num(p.epsilon, key=['privacy', 'epsilon'])} at δ = "
                    f"{num(p.delta, key=['privacy', 'delta'], sig=3)}")
        privacy_card = ("Privacy", f"ρ = {num(p.rho, key=['privacy', 'rho'])}", f"zCDP; {eps_line}")
    if p.unit is not None:  # the person is what is protected: stated first, per record after
        privacy_card = _unit_card(p)
    cards = [
        privacy_card,
        ("Accuracy",
         f"± {num(_z(acc.level) * math.sqrt(acc.max_variance), derive=['moe', ['accuracy', 'max_variance']], sig=3)}",
         f"worst-case {_pct(acc.level)} margin of error of one {'cell' if acc.plain else 'query'}; "
         f"RMSE {num(acc.rmse, key=['accuracy', 'rmse'])}"),
        ("Marginals", num(report.n_marginals, derive=["count"]),
         f"{noun}, {num(report.total_cells, derive=['sum_cells'])} cells"),
        ("Randomness", f'<span class="badge {badge}">{verdict}</span>', _noise_name(report)),
    ]
    cards_html = "".join(
        f'<div class="card"><h4>{t}</h4><div class="big">{b}</div><div class="small">{s}</div></div>'
        for t, b, s in cards
    )
    return (
        f'<header class="top"><p class="eyebrow">dpmatrix {kind} report</p><h1>{heading}</h1>'
        f'<p class="meta">{" · ".join(meta)}</p>{banner}<div class="cards">{cards_html}</div>'
        f'<nav class="toc">{toc}</nav></header>'
    )


def _version_span(report: Report) -> str:
    v = _html.escape(report.version)
    return f'<span class="num" data-key=\'{_attr_json(["library", "version"])}\' data-text="{v}">{v}</span>'


def _noise_name(report: Report) -> str:
    n = report.mechanism.noise
    if report.kind == "plan" or n is None:
        return "Gaussian noise, added when measuring"
    return {
        "gaussian": "continuous Gaussian noise (floating point)",
        "discrete_gaussian": "discrete Gaussian noise (exact integers)",
        "lattice_gaussian": "discrete Gaussian noise on a fine lattice (exact, for real-valued strategies)",
    }.get(str(n), _html.escape(str(n)) + " noise")


# -- privacy -----------------------------------------------------------------------------------------
def _unit_card(p) -> tuple[str, str, str]:
    """The privacy card of a release with a privacy unit (:func:`dpmatrix._unit.unit_privacy`)."""
    person, key = p.unit["per_person"], ["privacy", "unit", "per_person"]
    who = _html.escape(str(p.unit.get("description", "one person")))
    if p.pure_epsilon is not None:
        return ("Privacy", f"ε = {num(person['pure_epsilon'], key=[*key, 'pure_epsilon'])} per person",
                f"pure ε-DP (δ = 0); protects {who}; per record ε = {num(p.pure_epsilon, key=list(p.pure_key))}")
    return ("Privacy", f"ρ = {num(person['rho'], key=[*key, 'rho'])} per person",
            f"zCDP; ε = {num(person['epsilon'], key=[*key, 'epsilon'])} at δ = "
            f"{num(person['delta'], key=[*key, 'delta'], sig=3)}; protects {who}; per record "
            f"ρ = {num(p.rho, key=['privacy', 'rho'])}")


def _privacy_section(report: Report) -> str:
    p = report.privacy
    rows = []
    if p.pure_epsilon is not None:
        rows.append(("pure ε-DP", f"ε = {num(p.pure_epsilon, key=list(p.pure_key))}",
                     "ε-differential privacy with δ = 0: the strongest form, no small print"))
    if p.rho is not None:
        rows.append(("ρ-zCDP", num(p.rho, key=["privacy", "rho"]),
                     "zero-concentrated DP: ρ of several releases of the same data add up"))
    if p.conversion != "pure":
        rows.append(("(ε, δ)-DP", f"ε = {num(p.epsilon, key=['privacy', 'epsilon'])} at δ = "
                     f"{num(p.delta, key=['privacy', 'delta'], sig=3)}",
                     "exact analytic Gaussian conversion (Balle and Wang)" if p.conversion == "analytic_gaussian"
                     else "by the zCDP conversion of Canonne, Kamath and Steinke (discrete noise)"))
    if p.mu is not None:
        rows.append(("μ-GDP", num(p.mu, key=["privacy", "mu"]),
                     "Gaussian differential privacy: telling whether one person's record is in "
                     "the data is as hard as telling apart two normal distributions this many "
                     "standard deviations apart"))
    else:
        rows.append(("μ-GDP", "not claimed", "Gaussian DP is established for continuous Gaussian "
                     f"noise only; this release used {_noise_name(report)}"))
    if p.pcost is not None:
        rows.append(("privacy cost", num(p.pcost, key=["privacy", "pcost"]),
                     "Σ p_A / σ²_A over the residual mechanisms (ResidualPlanner+, Definition "
                     '<span data-fixed>2</span>); ρ is half of it'))
    if p.unit is not None:  # the numbers above are per record; the person's come first
        rows.insert(0, ("per person", _unit_card(p)[1],
                        f"protects {_html.escape(str(p.unit.get('description', 'one person')))}: each identifier "
                        "keeps at most that many records (a keyed pseudo-random choice); the rows below are "
                        "per record"))  # fmt: skip
    kv = "".join(f"<tr><td>{a}</td><td><b>{b}</b></td><td class=\"note\">{c}</td></tr>" for a, b, c in rows)
    intro = (
        '<p class="explain">Differential privacy limits what anyone can learn about one person '
        "from the release, whatever else they know; smaller numbers mean stronger protection. "
        "The same guarantee is stated below in each unit in common use.</p>"
        f'<table class="kv">{kv}</table>'
        f'<p class="note">Neighbouring datasets: {_html.escape(_neighbours(p.definition))}.</p>'
    )
    if not p.curve:
        return intro
    grid = "".join(
        f'<th class="n plain">δ = {num(d, fixed=True, sig=1, sci=True)}</th>' for d, _ in p.at
    )
    eps = "".join(f'<td class="n">{num(e, derive=["epsilon_at", d])}</td>' for d, e in p.at)
    curve = figures.epsilon_delta_curve(
        [d for d, _ in p.curve], [e for _, e in p.curve], stated=(p.delta, p.epsilon),
        label="analytic Gaussian curve" if p.conversion == "analytic_gaussian" else "zCDP conversion",
    )
    return (
        intro + "<h3>The (ε, δ) trade-off</h3>"
        '<p class="explain">One guarantee, many (ε, δ) pairs: a smaller δ (the chance that the ε '
        "bound fails) comes with a larger ε. Pick the pair your policy asks for.</p>"
        f"{_img(curve)}<table><tr><th></th>{grid}</tr><tr><td>ε</td>{eps}</tr></table>"
    )


def _neighbours(definition: str) -> str:
    d = definition.lower()
    if "adding or removing one record" in d:
        return "they differ by adding or removing one record"
    return definition


# -- noise -------------------------------------------------------------------------------------------
def _noise_section(report: Report) -> str:
    badge, verdict, explain = _randomness(report)
    m = report.mechanism
    rows = [
        ("noise", _noise_name(report)),
        ("randomness source", f'<span class="badge {badge}">{verdict}</span> {explain}'),
        ("planner", f"{lab(m.planner)}" + (f" ({lab(m.construction)} residual construction)"
                                           if m.construction and m.planner != "ResidualPlanner" else "")),
        ("objective", _objective_text(m.objective)),
    ]
    kv = "".join(f"<tr><td>{a}</td><td>{b}</td></tr>" for a, b in rows)
    warn = ""
    if badge == "warn" and report.kind == "release":
        warn = ('<div class="banner warn">Check before publishing: confirm that this release was '
                "made without a testing seed, and prefer the secure noise (the default, --noise auto) "
                "for publication.</div>")
    return ('<p class="explain">Random noise is what protects privacy: its kind fixes which '
            "guarantees hold, and its source must be unpredictable.</p>"
            f'<table class="kv">{kv}</table>{warn}')


def _objective_text(obj: str) -> str:
    return {
        "sum_var": "sum_var: the smallest weighted sum of variances (the best average accuracy)",
        "max_var": "max_var: the smallest largest variance (the best worst case)",
    }.get(obj, f"{lab(obj)} (a user-defined convex loss)")


# -- attributes --------------------------------------------------------------------------------------
def _attributes_section(report: Report) -> str:
    rows = "".join(
        f'<tr><td>{lab(name)}</td><td class="n">{num(size, key=list(path))}</td><td>{lab(kind)}</td>'
        f'<td class="vals">{lab(values)}</td></tr>'
        for name, size, kind, path, values in report.domain
    )
    what = "released" if report.kind == "release" else "planned"
    return ('<p class="explain">The columns the counts are about, and how many values each can '
            f"take: every {what} table counts records by a few of them. The privacy guarantee "
            "assumes this list is public knowledge, written without looking at the data (a domain "
            "inferred from the data reveals which values occur).</p>"
            f'<table><tr><th>attribute</th><th class="n">values</th><th>kind</th><th>labels, bins or codes</th></tr>'
            f'{rows}</table>')


# -- accuracy ----------------------------------------------------------------------------------------
def _accuracy_section(report: Report) -> str:
    acc = report.accuracy
    unit = "cell" if acc.plain else "query"
    z = _z(acc.level)
    ms = sorted(acc.marginals, key=lambda m: (-m.max_variance, m.index))
    stds = np.array([m.max_std for m in ms])
    if len(ms) > 1 and np.allclose(stds, stds[0], rtol=1e-6, atol=0):
        # the max_var optimum often equalizes every marginal: a wall of equal bars says less
        chart = (f'<p class="callout">Every marginal has the same worst-case standard deviation, '
                 f'{num(ms[0].max_std, derive=["sqrt", ["marginals", ms[0].index, "max_variance"]])}: '
                 "no table is less accurate than another.</p>")
    else:
        bars = ms[:MAX_STD_BARS]
        fig = figures.std_bars(
            [" × ".join(m.attributes) or "total" for m in bars], [m.max_std for m in bars],
            title=(f"Standard deviation of a {unit}, by marginal" if len(bars) == len(ms)
                   else f"The {len(bars)} least accurate marginals"),
            xlabel=f"standard deviation of one {unit} (counts)",
        )
        left = len(ms) - len(bars)
        chart = _img(fig) + (
            f'<p class="note">The chart shows the {num(len(bars), derive=["shown_bars"])} marginals '
            f'with the largest standard deviation; {num(left, derive=["omitted_bars"])} more are '
            "in the table and the manifest.</p>" if left else "")
    head = (f'<tr><th>marginal</th><th class="n">cells</th><th class="n">weight</th>'
            f'<th class="n">variance (worst {unit})</th><th class="n">std</th>'
            f'<th class="n">± margin ({_pct(acc.level)})</th></tr>')
    rows = "".join(
        f"<tr><td>{mname(m.attributes)}</td>"
        f'<td class="n">{num(m.cells, key=["marginals", m.index, "cells"])}</td>'
        f'<td class="n">{num(m.weight, key=["marginals", m.index, "weight"])}</td>'
        f'<td class="n">{num(m.max_variance, key=["marginals", m.index, "max_variance"])}</td>'
        f'<td class="n">{num(m.max_std, derive=["sqrt", ["marginals", m.index, "max_variance"]])}</td>'
        f'<td class="n">{num(z * m.max_std, derive=["moe", ["marginals", m.index, "max_variance"]])}</td></tr>'
        for m in ms[:MAX_ACCURACY_ROWS]
    )
    more = len(ms) - min(len(ms), MAX_ACCURACY_ROWS)
    table_note = (f'<p class="note">{num(more, derive=["omitted_rows"])} more marginals, all more '
                  "accurate than these, are listed in the manifest.</p>" if more else "")
    open_attr = " open" if len(ms) <= 15 else ""
    return (
        '<p class="explain">How far a published number may be from the true one, known before any '
        "record is read: it depends on the plan only, never on the data.</p>"
        f'<table class="kv"><tr><td>RMSE over all {unit}s</td><td><b>'
        f'{num(acc.rmse, key=["accuracy", "rmse"])}</b></td><td class="note">root mean squared error '
        f"of a published {unit}</td></tr>"
        f'<tr><td>worst {unit}: variance</td><td><b>{num(acc.max_variance, key=["accuracy", "max_variance"])}'
        f'</b></td><td class="note">the largest variance of any published {unit}</td></tr>'
        f'<tr><td>worst {unit}: standard deviation</td><td><b>'
        f'{num(math.sqrt(acc.max_variance), derive=["sqrt", ["accuracy", "max_variance"]])}</b></td>'
        f'<td class="note">its margin of error is ± '
        f'{num(z * math.sqrt(acc.max_variance), derive=["moe", ["accuracy", "max_variance"]])} '
        f"at {_pct(acc.level)} confidence</td></tr></table>"
        f"{chart}{_order_summary(report)}"
        f"<details{open_attr}><summary>Accuracy of every marginal, least accurate first</summary>"
        f"<table>{head}{rows}</table>{table_note}</details>"
    )


def _order_summary(report: Report) -> str:
    by: dict[int, list[float]] = {}
    for m in report.accuracy.marginals:
        by.setdefault(len(m.attributes), []).append(m.max_std)
    if len(by) < 2:
        return ""
    rows = "".join(
        f"<tr><td>{_k_name(k)}</td><td class=\"n\">{num(len(v), derive=['count_k', k])}</td>"
        f'<td class="n">{num(min(v), derive=["order_std", k, "min"])}</td>'
        f'<td class="n">{num(max(v), derive=["order_std", k, "max"])}</td></tr>'
        for k, v in sorted(by.items())
    )
    return ('<table><tr><th>marginals</th><th class="n">count</th><th class="n">smallest std</th>'
            f'<th class="n">largest std</th></tr>{rows}</table>')


_BINDS = '<span class="badge warn">binds</span>'


def _targets_section(report: Report) -> str:
    ts = report.accuracy.targets or ()
    rows = "".join(
        f"<tr><td>{mname(t.attributes)}</td>"
        f'<td class="n">{num(t.target, key=["targets", i, "target"])}</td>'
        f'<td class="n">{num(t.achieved, key=["targets", i, "achieved"])}</td>'
        f'<td class="n">{num(t.ratio, key=["targets", i, "ratio"])}</td>'
        f"<td>{_BINDS if t.binding else 'slack'}</td></tr>"
        for i, t in enumerate(ts)
    )
    return ('<p class="explain">The plan was chosen to meet these accuracy targets at the least '
            "privacy cost; a binding target is met exactly, the others with room to spare.</p>"
            '<table><tr><th>marginal</th><th class="n">target</th><th class="n">achieved</th>'
            f'<th class="n">achieved / target</th><th></th></tr>{rows}</table>')


# -- fairness ----------------------------------------------------------------------------------------
def _fairness_section(report: Report) -> str:
    f = report.fairness
    intro = ('<p class="explain">The same workload and budget, planned for the best average '
             "(sum_var) and for the best worst case (max_var): the average objective can leave "
             "small tables much less accurate than large ones (ResidualPlanner paper, "
             '§<span data-fixed>6.2</span>).</p>')
    if f.skipped or not f.profiles:
        return intro + f'<p class="note">Not shown: {_html.escape(f.skipped or "no comparison")}.</p>'
    unit = "cell" if report.accuracy.plain else "query"
    fig = figures.fairness_scatter([
        (p.objective + (" (this plan)" if p.own else ""), p.cells, p.orders, p.variance)
        for p in f.profiles
    ])
    head = "".join(f'<th class="n">{p.objective}{" (this plan)" if p.own else ""}</th>' for p in f.profiles)

    def cell(p, stat: str, value: float) -> str:
        if p.own and stat in ("rmse", "max_variance"):
            return f'<td class="n">{num(value, key=["accuracy", stat])}</td>'
        return f'<td class="n">{num(value, derive=["fair", p.objective, stat])}</td>'

    stats = [
        ("rmse", f"RMSE over all {unit}s", lambda p: p.rmse),
        ("max_variance", f"largest variance of a {unit}", lambda p: p.max_variance),
        ("min_marginal", f"smallest average {unit} variance of a marginal", lambda p: min(p.variance)),
        ("spread", "largest / smallest average marginal variance",
         lambda p: max(p.variance) / min(p.variance)),
    ]
    rows = "".join(f"<tr><td>{label}</td>{''.join(cell(p, s, get(p)) for p in f.profiles)}</tr>"
                   for s, label, get in stats)
    return (intro + _img(fig) + f'<table><tr><th></th>{head}</tr>{rows}</table>'
            f'<p class="note">Each point is one marginal; its height is the average variance of its '
            f"{unit}s. Points spread over a wide vertical range mean that some tables are much "
            "less accurate than others.</p>")


# -- strategy ----------------------------------------------------------------------------------------
def _strategy_section(report: Report) -> str:
    s = report.strategy
    labels = [("total (∅)" if k == 0 else f"{k}-way residuals") for k, _, _ in s.by_order]
    fig = figures.budget_share_chart(labels, [sh for _, sh, _ in s.by_order])
    order_rows = "".join(
        f"<tr><td>{_k_name(k)} residuals</td><td class=\"n\">{num(c, derive=['n_measured_k', k])}</td>"
        f'<td class="n">{num(sh, derive=["share_order", k], scale=100, sig=3, suffix=" %")}</td></tr>'
        for k, sh, c in s.by_order
    )
    rows = "".join(
        f"<tr><td>{mname(r.attributes) if r.attributes else '<span class=total>∅ (total)</span>'}</td>"
        f'<td class="n">{num(r.sigma2, key=["residuals", r.index, "sigma2"])}</td>'
        f'<td class="n">{num(r.coefficient, derive=["pcoef", r.index])}</td>'
        f'<td class="n">{num(r.outputs, derive=["outputs", r.index])}</td>'
        f'<td class="n">{num(r.share, derive=["share", r.index], scale=100, sig=3, suffix=" %")}</td></tr>'
        for r in s.residuals
    )
    left = s.n_measured - len(s.residuals)
    more = (f'<p class="note">The {num(len(s.residuals), derive=["shown_residuals"])} largest shares '
            f'are listed; {num(left, derive=["omitted_residuals"])} more residual mechanisms are '
            "in the manifest.</p>" if left > 0 else "")
    return (
        '<p class="explain">How the noise is added: the workload is split into independent '
        "residual parts, each measured once with its own noise scale σ²; a part's share of the "
        "privacy budget is p_A / σ²_A over the total.</p>"
        f'<p>{num(s.n_measured, derive=["n_measured"])} residual mechanisms are measured.</p>'
        f'{_img(fig)}<table><tr><th>residuals</th><th class="n">count</th>'
        f'<th class="n">budget share</th></tr>{order_rows}</table>'
        '<details><summary>Residual mechanisms with the largest budget shares</summary>'
        '<table><tr><th>attributes</th><th class="n">σ²</th><th class="n">p_A</th>'
        f'<th class="n">noisy outputs</th><th class="n">budget share</th></tr>{rows}</table>{more}'
        "</details>"
    )


# -- bound --------------------------------------------------------------------------------
def _bound_section(report: Report) -> str:
    b = report.bound
    assert b is not None
    comp = "".join(
        f"<tr><td>{lab(name)}</td><td class=\"n\">{num(v, key=['lower_bound', 'comparison', i, 'value'])}</td>"
        f'<td class="n">{num(r, key=["lower_bound", "comparison", i, "ratio"])}</td></tr>'
        for i, (name, v, r) in enumerate(b.comparison)
    )
    att = _html.escape(b.attainable) if b.attainable else ""
    comp_html = (f'<table><tr><th>strategy</th><th class="n">{_html.escape(b.quantity)}</th>'
                 f'<th class="n">ratio to the bound</th></tr>{comp}</table>'
                 f'<p class="note">Every ratio is against the same bound, which is {att}.</p>' if comp else "")
    return (
        '<p class="explain">No matrix mechanism can be more accurate than the lower bound at this '
        "budget; a ratio near one means that nothing better exists. A ratio above one means a "
        "better plan exists only if the bound is attainable.</p>"
        f'<table class="kv"><tr><td>lower bound ({_html.escape(b.quantity)})</td><td><b>'
        f'{num(b.lower_bound, key=["lower_bound", "value"])}</b></td><td class="note">{att}</td></tr>'
        f'<tr><td>this plan / bound</td><td><b>{num(b.ratio, key=["lower_bound", "ratio"])}</b></td>'
        f'<td class="note">the bound is {att.split(":")[0]}</td></tr>'
        f"</table>{comp_html}"
    )


# -- released tables ---------------------------------------------------------------------------------
def _files(t: TableView) -> str:
    """The table's own files a browser opens (its CSV), else the one-line command that prints
    it (selectable as a whole, to copy)."""
    if t.files:
        return " ".join(f'<a href="{_html.escape(link)}" data-label>{_html.escape(fmt_.upper())}</a>'
                        for fmt_, link in t.files)
    if t.query:
        return f'<code class="q" data-label title="copy this command">{_html.escape(t.query)}</code>'
    return '<span class="note">no file</span>'


def _dataset_note(tabs) -> str:
    if not tabs.dataset:
        return ""
    d = _html.escape(tabs.dataset)
    return (f'<p class="note">Every table is also in the release\'s Parquet dataset '
            f'<a href="{d}" data-label>{d}</a> (one file set, read with pandas, DuckDB or Arrow; '
            "not viewable in a browser). Counts over several cells (ranges, sums, differences) "
            "have correlated errors: ask them with <code>dpmatrix query "
            f"{_html.escape(tabs.release_name)} --where …</code> for the exact interval rather than "
            "summing cells and their variances by hand.</p>")


def _tables_section(report: Report) -> str:
    tabs = report.tables
    assert tabs is not None
    level = tabs.level
    pct_text = f"{level * 100:.3g} %"
    out = ['<p class="explain">The published numbers: each marginal\'s noisy counts with their '
           f"{_pct(level)} confidence intervals; the full tables are the release's own CSV and "
           "Parquet files, linked below.</p>"]
    if report.links_note:
        out.append(f'<div class="banner warn">Note: {_html.escape(report.links_note)}.</div>')
    out.append(_dataset_note(tabs))
    by_order: dict[int, list[TableView]] = {}
    for t in tabs.inline:
        by_order.setdefault(t.order, []).append(t)
    counts = dict(tabs.count_by_order)
    for k in sorted(by_order):
        shown = by_order[k]
        if k:
            out.append(f'<h3 class="group">{_k_name(k)} marginals</h3>')
        if counts.get(k, 0) > len(shown):
            out.append(f'<p class="note">Showing the {num(len(shown), derive=["shown_k", k])} smallest of '
                       f'{num(counts[k], derive=["count_k", k])}; the others are listed below.</p>')
        for t in shown:
            out.append(_marginal_block(t, level, pct_text))
    if tabs.links or tabs.links_left_out:
        z = _z(level)
        rows = "".join(
            f"<tr><td>{mname(t.attributes)}</td>"
            f'<td class="n">{num(t.cells, key=["marginals", t.index, "cells"])}</td>'
            f'<td class="n">{num(z * math.sqrt(t.max_variance), derive=["moe", ["marginals", t.index, "max_variance"]])}</td>'
            f'<td class="files">{_files(t)}</td></tr>'
            for t in tabs.links
        )
        more = (f'<p class="note">{num(tabs.links_left_out, derive=["links_left_out"])} more '
                "marginals are not listed here: see the manifest and the marginals folder.</p>"
                if tabs.links_left_out else "")
        out.append(
            "<h3>More marginals</h3><p class=\"explain\">Larger marginals, or more than "
            "fit on one page, smallest first: each with its CSV file, or the command that prints it.</p>"
            f'<table><tr><th>marginal</th><th class="n">cells</th><th class="n">worst ± margin '
            f"({_pct(level)})</th><th>files</th></tr>{rows}</table>{more}"
        )
    return "".join(out)


def _marginal_block(t: TableView, level: float, pct_text: str) -> str:
    name = mname(t.attributes)
    parts = [f'<div class="marginal" id="m{t.index}"><div class="mhead"><h3>{name}</h3>'
             f'<span class="files">{_files(t)}</span></div>']
    if not t.estimate:
        parts.append('<p class="note">The saved table could not be read.</p></div>')
        return "".join(parts)
    if not t.attributes:  # the total: one number
        parts.append(
            f'<p class="headline">{num(t.estimate[0], src=(t.source, 0, "estimate"))} '
            f'<span class="note">({_pct(level)} interval {num(t.lower[0], src=(t.source, 0, "lower"))}'
            f' to {num(t.upper[0], src=(t.source, 0, "upper"))}; standard deviation '
            f'{num(t.std[0], src=(t.source, 0, "std"))})</span></p></div>')
        return "".join(parts)
    std = np.asarray(t.std)
    if np.allclose(std, std[0], rtol=1e-9, atol=0):
        parts.append(f'<p class="note">Every cell has standard deviation '
                     f'{num(t.std[0], src=(t.source, 0, "std"))}.</p>')
    else:
        i_lo, i_hi = int(np.argmin(std)), int(np.argmax(std))
        parts.append(f'<p class="note">Standard deviations from {num(t.std[i_lo], src=(t.source, i_lo, "std"))}'
                     f' to {num(t.std[i_hi], src=(t.source, i_hi, "std"))}.</p>')
    fig = ""
    side = False
    if t.show_figure and t.order == 1:
        side = len(t.estimate) <= 14
        fig = _img(figures.interval_bars(
            list(t.axes[0]), t.estimate, t.lower, t.upper, title=f"{t.attributes[0]}: estimates",
            xlabel=t.attributes[0], level_pct=pct_text, width=5.4 if side else figures.WIDTH))
    elif t.show_figure and t.order == 2:
        grid = np.asarray(t.estimate).reshape(len(t.axes[0]), len(t.axes[1]))
        f = figures.heatmap(grid, list(t.axes[0]), list(t.axes[1]), row_name=t.attributes[0],
                            col_name=t.attributes[1], title=f"{t.attributes[0]} × {t.attributes[1]}: estimates")
        side = f.width <= 560
        fig = _img(f)
    table = ""
    n = len(t.estimate)
    if t.show_table:
        open_attr = " open" if n <= 14 else ""
        table = (
            f"<details{open_attr}><summary>Table ({num(n, derive=['rows', t.index])} rows)</summary>"
            f"{_cell_table(t, range(n))}</details>"
        )
    elif t.top:
        table = (
            f"<details open><summary>The {num(len(t.top), derive=['top', t.index])} largest of "
            f"{num(n, derive=['rows', t.index])} cells</summary>{_cell_table(t, t.top)}</details>"
        )
    else:
        table = '<p class="note">The table is too long to print here: see its files.</p>'
    parts.append(f'<div class="mbody{" side" if side else ""}">{fig}<div class="mtable">{table}</div></div></div>')
    return "".join(parts)


def _cell_table(t, rows) -> str:
    """The HTML table of a marginal's cells ``rows`` (all of them, or its largest): labels,
    estimate and interval, each number linked to its source cell."""
    head = "".join(f"<th>{lab(a)}</th>" for a in t.attributes)
    body = "".join(
        "<tr>" + "".join(f"<td>{lab(v)}</td>" for v in t.labels[r])
        + f'<td class="n">{num(t.estimate[r], src=(t.source, r, "estimate"))}</td>'
        + f'<td class="n">{num(t.lower[r], src=(t.source, r, "lower"))}</td>'
        + f'<td class="n">{num(t.upper[r], src=(t.source, r, "upper"))}</td></tr>'
        for r in rows
    )
    return (f'<table><tr>{head}<th class="n">estimate</th><th class="n">lower</th>'
            f'<th class="n">upper</th></tr>{body}</table>')


# -- footer ------------------------------------------------------------------------------------------
def _footer(report: Report) -> str:
    what = ("This page was written from the release's manifest and saved tables; it holds "
            "nothing else about the data." if report.kind == "release" else
            "This page was written from the plan alone: no data has been read.")
    files = ""
    if report.kind == "release":
        prefix = report.link_prefix
        files = (f' The release folder holds <a href="{_html.escape(prefix)}manifest.json" data-label>manifest.json</a>'
                 f' (every number above) and <a href="{_html.escape(prefix)}measurements.parquet" '
                 "data-label>measurements.parquet</a> (the noisy residual answers).")
    return (f"<footer>{what}{files} Made by dpmatrix {_version_span(report)} "
            "(ResidualPlanner: He, Xiao, Toksoz, Ding, Zhang and Kifer).</footer>")
