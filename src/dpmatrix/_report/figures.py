"""Figures of the HTML report, written directly as SVG text (no plotting library).

Every function takes plain numbers and returns a :class:`Figure`: an SVG document (base64 in a
``data:`` URL, drawn by the browser as a vector image), its display size in CSS pixels and an
alternative text. Writing the few chart types the report needs as SVG strings costs
microseconds per chart where a matplotlib PNG cost ~90 ms (the report of a 30-attribute release
drew 54 of them), and the charts stay sharp at any zoom.

Colours come from the Okabe–Ito palette (distinguishable with every common colour-vision
deficiency) and the perceptually uniform, colour-blind-safe *viridis* map (16 stops, linearly
interpolated). Legends are placed above the plotting area, never over the data.
"""

from __future__ import annotations

import base64
import html as _html
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Figure",
    "OKABE_ITO",
    "budget_share_chart",
    "epsilon_delta_curve",
    "fairness_scatter",
    "heatmap",
    "interval_bars",
    "std_bars",
]

#: Okabe & Ito (2008) colour-blind-safe palette
OKABE_ITO = {
    "blue": "#0072B2", "vermillion": "#D55E00", "green": "#009E73", "orange": "#E69F00",
    "sky": "#56B4E9", "purple": "#CC79A7", "yellow": "#F0E442", "black": "#000000",
}  # fmt: skip

#: viridis at 16 evenly spaced points (matplotlib's _viridis_data, rounded to 8-bit)
_VIRIDIS = ((68, 1, 84), (72, 26, 108), (71, 47, 125), (65, 68, 135), (57, 86, 140), (49, 104, 142),
            (42, 120, 142), (35, 136, 142), (31, 152, 139), (34, 168, 132), (53, 183, 121),
            (84, 197, 104), (122, 209, 81), (165, 219, 54), (210, 226, 27), (253, 231, 37))

#: marker shape and colour of a marginal with k attributes (fairness figure)
_K_STYLE = [("star", "black"), ("square", "orange"), ("circle", "blue"), ("triangle", "vermillion"),
            ("diamond", "green"), ("down", "purple")]  # fmt: skip

#: width of every full-width figure in CSS px (the page's text column)
WIDTH = 9.6  # inches at 96 px per inch, kept for callers that size side-by-side figures
_PX = 96
_FONT = 13.0  # px
_CHAR = 7.1  # approximate width of one character at _FONT (DejaVu Sans)
_GRID = "#d9d9d9"
_INK = "#1b1f24"
_MUTED = "#57606a"


@dataclass(frozen=True)
class Figure:
    """A rendered figure: SVG text, display size (CSS px) and alt text."""

    svg: str
    width: int
    height: int
    alt: str

    @property
    def data_url(self) -> str:
        return "data:image/svg+xml;base64," + base64.b64encode(self.svg.encode("utf-8")).decode("ascii")


class _Canvas:
    """SVG elements in CSS pixels, assembled into one document."""

    def __init__(self, width: float, height: float):
        self.w, self.h = float(width), float(height)
        self.parts: list[str] = []

    def add(self, s: str) -> None:
        self.parts.append(s)

    def rect(self, x, y, w, h, fill, **kw) -> None:
        extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in kw.items())
        self.add(f'<rect x="{x:.2f}" y="{y:.2f}" width="{max(w, 0):.2f}" height="{max(h, 0):.2f}" fill="{fill}"{extra}/>')

    def line(self, x1, y1, x2, y2, stroke, width=1.0, dash: str | None = None) -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{x1:.2f}" y1="{y1:.2f}" x2="{x2:.2f}" y2="{y2:.2f}" stroke="{stroke}" '
                 f'stroke-width="{width}"{d}/>')

    def text(self, x, y, s: str, *, anchor="start", size=_FONT, fill=_INK, bold=False, rotate=None,
             baseline="middle") -> None:
        tr = f' transform="rotate({rotate} {x:.2f} {y:.2f})"' if rotate is not None else ""
        wt = ' font-weight="bold"' if bold else ""
        self.add(f'<text x="{x:.2f}" y="{y:.2f}" text-anchor="{anchor}" dominant-baseline="{baseline}" '
                 f'font-size="{size}" fill="{fill}"{wt}{tr}>{_html.escape(str(s))}</text>')

    def polyline(self, xs, ys, stroke, width=2.0) -> None:
        pts = " ".join(f"{x:.2f},{y:.2f}" for x, y in zip(xs, ys))
        self.add(f'<polyline points="{pts}" fill="none" stroke="{stroke}" stroke-width="{width}" '
                 'stroke-linejoin="round"/>')

    def marker(self, x, y, shape: str, colour: str, r: float = 5.0) -> None:
        if shape == "circle":
            self.add(f'<circle cx="{x:.2f}" cy="{y:.2f}" r="{r}" fill="{colour}" fill-opacity="0.85" '
                     'stroke="white" stroke-width="0.6"/>')
            return
        if shape == "square":
            pts = [(-r, -r), (r, -r), (r, r), (-r, r)]
        elif shape == "triangle":
            pts = [(0, -r * 1.15), (r, r * 0.8), (-r, r * 0.8)]
        elif shape == "down":
            pts = [(0, r * 1.15), (r, -r * 0.8), (-r, -r * 0.8)]
        elif shape == "diamond":
            pts = [(0, -r * 1.2), (r, 0), (0, r * 1.2), (-r, 0)]
        else:  # star
            pts = []
            for i in range(10):
                rad = r * 1.5 if i % 2 == 0 else r * 0.6
                a = math.pi / 2 + i * math.pi / 5
                pts.append((rad * math.cos(a), -rad * math.sin(a)))
        p = " ".join(f"{x + dx:.2f},{y + dy:.2f}" for dx, dy in pts)
        self.add(f'<polygon points="{p}" fill="{colour}" fill-opacity="0.85" stroke="white" stroke-width="0.6"/>')

    def render(self, alt: str) -> Figure:
        w, h = int(round(self.w)), int(round(self.h))
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
               'font-family="DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif">'
               f'<title>{_html.escape(alt)}</title><rect width="100%" height="100%" fill="white"/>'
               + "".join(self.parts) + "</svg>")
        return Figure(svg, w, h, alt)


# -- scales and ticks ------------------------------------------------------------------------------
def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering ``[lo, hi]`` (steps 1, 2, 2.5, 5 × 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    out = []
    v = start
    while v <= hi + 1e-9 * step:
        out.append(0.0 if abs(v) < 1e-12 * step else v)
        v += step
    return out


def _count(v: float) -> str:
    """A count tick: thousands separated, a true minus sign."""
    if abs(v) >= 1e6:
        return f"{v:,.3g}".replace("-", "\u2212")
    return (f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 100 else f"{v:,.3g}").replace("-", "\u2212")


def _short(text: str, n: int = 22) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _text_px(labels: Sequence[str], size: float = _FONT) -> float:
    return max((len(s) for s in labels), default=1) * _CHAR * size / _FONT


class _Linear:
    def __init__(self, d0, d1, r0, r1):
        self.d0, self.d1, self.r0, self.r1 = float(d0), float(d1), float(r0), float(r1)
        if self.d1 == self.d0:
            self.d1 = self.d0 + 1.0

    def __call__(self, v):
        return self.r0 + (np.asarray(v, dtype=float) - self.d0) * (self.r1 - self.r0) / (self.d1 - self.d0)


class _Log(_Linear):
    def __init__(self, d0, d1, r0, r1):
        super().__init__(math.log10(d0), math.log10(d1), r0, r1)

    def __call__(self, v):
        return super().__call__(np.log10(np.asarray(v, dtype=float)))


def _log_ticks(lo: float, hi: float) -> list[float]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    step = max(1, math.ceil((b - a) / 8))
    ticks = [10.0**k for k in range(a, b + 1, step) if lo * (1 - 1e-9) <= 10.0**k <= hi * (1 + 1e-9)]
    if len(ticks) < 3 and b - a <= 2:  # little range: 1, 2 and 5 × 10^k
        ticks = [m * 10.0**k for k in range(a, b + 1) for m in (1, 2, 5) if lo <= m * 10.0**k <= hi]
    return ticks


def _plain_tick(v: float) -> str:
    return f"{v:,.0f}" if v >= 1 else f"{v:.2g}"


def _legend(c: _Canvas, x: float, y: float, items: Sequence[tuple[str, str, str]]) -> None:
    """A legend row starting at (x, y): items ``(kind, colour, label)`` with kind ``bar``,
    ``line``, ``point``, ``tick``, ``errorbar`` or a marker shape."""
    for kind, colour, label in items:
        if kind == "bar":
            c.rect(x, y - 6, 14, 12, colour)
        elif kind == "line":
            c.line(x, y, x + 16, y, colour, 2.4)
        elif kind == "errorbar":
            c.line(x + 8, y - 6, x + 8, y + 6, colour, 1.2)
            c.line(x + 4, y - 6, x + 12, y - 6, colour, 1.2)
            c.line(x + 4, y + 6, x + 12, y + 6, colour, 1.2)
        elif kind == "tick":
            c.line(x + 8, y - 7, x + 8, y + 7, colour, 2.4)
        elif kind == "point":
            c.marker(x + 8, y, "circle", colour, 4.5)
        else:
            c.marker(x + 8, y, kind, colour, 4.5)
        c.text(x + 22, y, label, size=12)
        x += 22 + _text_px([label], 12) + 18


def _title(c: _Canvas, x: float, s: str) -> None:
    c.text(x, 16, s, size=14.5, bold=True)


def _x_axis(c: _Canvas, scale, ticks, y0: float, y1: float, fmt, label: str, *, grid=True) -> None:
    for t in ticks:
        x = float(scale(t))
        if grid:
            c.line(x, y0, x, y1, _GRID, 0.7)
        c.line(x, y1, x, y1 + 4, _MUTED, 1)
        c.text(x, y1 + 15, fmt(t), anchor="middle", size=12, fill=_MUTED)
    c.text((scale.r0 + scale.r1) / 2, y1 + 36, label, anchor="middle", size=13)


def _y_axis(c: _Canvas, scale, ticks, x0: float, x1: float, fmt, label: str | None, *, grid=True) -> None:
    for t in ticks:
        y = float(scale(t))
        if grid:
            c.line(x0, y, x1, y, _GRID, 0.7)
        c.line(x0 - 4, y, x0, y, _MUTED, 1)
        c.text(x0 - 7, y, fmt(t), anchor="end", size=12, fill=_MUTED)
    if label:
        c.text(16, (scale.r0 + scale.r1) / 2, label, anchor="middle", size=13, rotate=-90)


# -- the charts ------------------------------------------------------------------------------------
def epsilon_delta_curve(deltas: Sequence[float], epsilons: Sequence[float], *,
                        stated: tuple[float, float] | None = None, label: str) -> Figure:
    """ε as a function of δ (log-scaled δ axis), with the stated (ε, δ) pair marked.

    Parameters
    ----------
    deltas, epsilons : sequences of float
        Points of the curve, δ increasing.
    stated : (delta, epsilon), optional
        The pair reported in the manifest, drawn as a labelled point.
    label : str
        Legend text of the curve (the conversion used).

    Returns
    -------
    Figure
    """
    d = np.asarray(deltas, dtype=float)
    e = np.asarray(epsilons, dtype=float)
    W, H = WIDTH * _PX, 330
    left, right, top, bottom = 62, 20, 62, 58
    c = _Canvas(W, H)
    _title(c, left, "Privacy loss ε for each choice of δ")
    items = [("line", OKABE_ITO["blue"], label)]
    if stated is not None:
        items.append(("point", OKABE_ITO["vermillion"], f"stated: ε = {stated[1]:.4g} at δ = {stated[0]:.0e}"))
    _legend(c, left, 40, items)
    xs = _Log(d.min(), d.max(), left, W - right)
    emax = float(e.max()) * 1.1 if e.size else 1.0
    ys = _Linear(0, emax, H - bottom, top)
    _y_axis(c, ys, _nice_ticks(0, emax), left, W - right, lambda v: f"{v:g}", "ε")
    _x_axis(c, xs, _log_ticks(d.min(), d.max()), top, H - bottom, lambda v: f"1e{int(round(math.log10(v)))}",
            "δ: the probability that the ε bound may fail (log scale)")
    c.polyline(xs(d), ys(e), OKABE_ITO["blue"], 2.4)
    if stated is not None:
        x, y = float(xs(stated[0])), float(ys(stated[1]))
        c.line(x, top, x, H - bottom, OKABE_ITO["vermillion"], 0.9, dash="4 3")
        c.marker(x, y, "circle", OKABE_ITO["vermillion"], 5.5)
    return c.render("Line chart of epsilon against delta on a logarithmic axis: epsilon falls as "
                    "delta grows; the stated pair is marked.")


def std_bars(names: Sequence[str], stds: Sequence[float], *, title: str, xlabel: str,
             targets: Sequence[float | None] | None = None) -> Figure:
    """Horizontal bars of per-marginal standard deviations, largest at the top.

    Parameters
    ----------
    names : sequence of str
        Bar labels.
    stds : sequence of float
        Bar lengths.
    title, xlabel : str
    targets : sequence of float or None, optional
        Targets drawn as ticks on the bars (plans made from accuracy targets).

    Returns
    -------
    Figure
    """
    vals = np.asarray(stds, dtype=float)
    order = np.argsort(-vals, kind="stable")  # largest first = top
    n = len(order)
    labels = [_short(names[i], 34) for i in order]
    t = None
    if targets is not None:
        t = np.array([np.nan if v is None else v for v in targets], dtype=float)
    has_t = t is not None and bool(np.isfinite(t).any())
    top = 40 + (22 if has_t else 0)
    row = 21
    left = 16 + _text_px(labels, 12)
    W, H = WIDTH * _PX, top + row * max(n, 1) + 52
    c = _Canvas(W, H)
    _title(c, 8, title)
    if has_t:
        _legend(c, left, 42, [("bar", OKABE_ITO["blue"], "standard deviation"), ("tick", OKABE_ITO["vermillion"], "target")])
    hi = max(float(vals.max()) if n else 1.0, float(np.nanmax(t)) if has_t else 0.0) * 1.05 or 1.0
    xs = _Linear(0, hi, left, W - 24)
    _x_axis(c, xs, _nice_ticks(0, hi), top, top + row * n, _count, xlabel)
    for r, i in enumerate(order):
        y = top + r * row
        c.rect(left, y + 3, float(xs(vals[i])) - left, row - 6, OKABE_ITO["blue"])
        c.text(left - 6, y + row / 2, labels[r], anchor="end", size=12)
        if has_t and np.isfinite(t[i]):
            x = float(xs(t[i]))
            c.line(x, y + 1, x, y + row - 1, OKABE_ITO["vermillion"], 2.4)
    return c.render(f"Bar chart of {n} standard deviations, sorted, largest at the top.")


def fairness_scatter(panels: Sequence[tuple[str, Sequence[int], Sequence[int], Sequence[float]]]) -> Figure:
    """Side-by-side scatter plots (one per objective) of a marginal's average query variance
    against its number of cells, marker and colour by number of attributes (the ResidualPlanner
    paper's §6.2 figures), on shared logarithmic axes; the legend above the panels.

    Parameters
    ----------
    panels : sequence of (title, cells, n_attributes, variance)

    Returns
    -------
    Figure
    """
    all_v = np.concatenate([np.asarray(p[3], dtype=float) for p in panels])
    all_c = np.concatenate([np.asarray(p[1], dtype=float) for p in panels])
    W, H = WIDTH * _PX, 390
    left, right, top, bottom, gap = 74, 16, 66, 58, 26
    c = _Canvas(W, H)
    lo, hi = float(np.min(all_v)), float(np.max(all_v))
    pad = (hi / lo) ** 0.1 if hi > lo * 1.01 else 1.6
    ylo, yhi = lo / pad, hi * pad
    xlo, xhi = max(float(all_c.min()) / 1.8, 0.5), float(all_c.max()) * 1.8
    pw = (W - left - right - gap * (len(panels) - 1)) / max(len(panels), 1)
    ys = _Log(ylo, yhi, H - bottom, top)
    seen: dict[int, tuple[str, str]] = {}
    for j, (title, cells, ks, var) in enumerate(panels):
        x0 = left + j * (pw + gap)
        xs = _Log(xlo, xhi, x0 + 8, x0 + pw - 8)
        c.text(x0, 16, title, size=14, bold=True)
        # shared y axis: tick labels on the first panel only
        _y_axis(c, ys, _log_ticks(ylo, yhi), x0, x0 + pw, _plain_tick if j == 0 else (lambda v: ""),
                "variance of a cell (log scale)" if j == 0 else None)
        _x_axis(c, xs, _log_ticks(xlo, xhi), top, H - bottom, _plain_tick, "cells in the marginal (log scale)")
        ks = np.asarray(ks)
        for cx, k, v in zip(np.asarray(cells, dtype=float), ks, np.asarray(var, dtype=float)):
            shape, colour = _K_STYLE[min(int(k), len(_K_STYLE) - 1)]
            c.marker(float(xs(cx)), float(ys(v)), shape, OKABE_ITO[colour], 6.5 if shape == "star" else 5.0)
            seen.setdefault(int(k), (shape, colour))
    items = [(shape, OKABE_ITO[colour], "total" if k == 0 else f"{k}-way")
             for k, (shape, colour) in sorted(seen.items())]
    c.text(left, 42, "marginal:", size=12, fill=_MUTED)
    _legend(c, left + 70, 42, items)
    return c.render("Two scatter plots side by side, one per objective: the variance of each "
                    "marginal's cells against its number of cells, by marginal order.")


def budget_share_chart(labels: Sequence[str], shares: Sequence[float]) -> Figure:
    """Bars of the share of the privacy budget spent on residuals of each order.

    Parameters
    ----------
    labels : sequence of str
    shares : sequence of float
        Fractions (summing to one).

    Returns
    -------
    Figure
    """
    n = len(labels)
    row = 30
    top = 34
    left = 16 + _text_px(labels, 12)
    W, H = WIDTH * _PX, top + row * max(n, 2) + 52
    c = _Canvas(W, H)
    _title(c, 8, "Where the privacy budget goes")
    xs = _Linear(0, 100, left, W - 60)
    _x_axis(c, xs, [0, 20, 40, 60, 80, 100], top, top + row * n, lambda v: f"{v:g}", "share of the privacy budget (%)")
    for r, (name, sh) in enumerate(zip(labels, shares)):
        y = top + r * row
        p = 100 * float(sh)
        c.rect(left, y + 5, float(xs(p)) - left, row - 10, OKABE_ITO["green"])
        c.text(left - 6, y + row / 2, name, anchor="end", size=12)
        c.text(float(xs(p)) + 5, y + row / 2, f"{p:.1f} %", size=12)
    return c.render("Bar chart of the share of the privacy budget spent on residual mechanisms of each order.")


def interval_bars(labels: Sequence[str], estimate: Sequence[float], lower: Sequence[float],
                  upper: Sequence[float], *, title: str, xlabel: str, level_pct: str,
                  width: float = WIDTH) -> Figure:
    """Bars of a one-way marginal's estimates with their confidence intervals as error bars
    (horizontal bars up to 14 values, vertical beyond); the legend above the bars.

    Parameters
    ----------
    labels : sequence of str
        Value labels, in domain order.
    estimate, lower, upper : sequence of float
        Estimates and interval bounds.
    title, xlabel : str
    level_pct : str
        The confidence level as text, for the legend ("95 %").
    width : float
        Figure width in inches (horizontal bars; vertical bars use the full width).

    Returns
    -------
    Figure
    """
    est = np.asarray(estimate, dtype=float)
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    n = len(est)
    vmin = min(0.0, float(lo.min()) if n else 0.0)
    vmax = max(float(hi.max()) if n else 1.0, 1e-12)
    legend = [("bar", OKABE_ITO["sky"], "estimate"), ("errorbar", OKABE_ITO["black"], f"{level_pct} interval")]
    if n > 14:
        step = max(1, math.ceil(n / 30))
        ticks = [_short(labels[i], 12) for i in range(0, n, step)]
        rotate = max(len(s) for s in ticks) > 3
        bottom = 52 + (0.72 * _text_px(ticks, 12) if rotate else 8)
        W, H = WIDTH * _PX, 300 + bottom
        top, left = 62, 78
        c = _Canvas(W, H)
        _title(c, 8, title)
        _legend(c, left, 40, legend)
        xs = _Linear(-0.7, n - 0.3, left, W - 16)
        ys = _Linear(vmin, vmax * 1.05, H - bottom, top)
        _y_axis(c, ys, _nice_ticks(vmin, vmax * 1.05), left, W - 16, _count, "estimated count")
        bw = float(xs(0.4) - xs(0))
        for i in range(n):
            x = float(xs(i))
            y0, y1 = float(ys(0)), float(ys(est[i]))
            c.rect(x - bw, min(y0, y1), 2 * bw, abs(y1 - y0), OKABE_ITO["sky"])
            c.line(x, float(ys(lo[i])), x, float(ys(hi[i])), OKABE_ITO["black"], 1)
        c.line(left, float(ys(0)), W - 16, float(ys(0)), "#888888", 0.8)
        for k, i in enumerate(range(0, n, step)):
            x = float(xs(i))
            c.line(x, H - bottom, x, H - bottom + 4, _MUTED, 1)
            if rotate:
                c.text(x, H - bottom + 10, ticks[k], anchor="end", size=12, fill=_MUTED, rotate=-45)
            else:
                c.text(x, H - bottom + 15, ticks[k], anchor="middle", size=12, fill=_MUTED)
        c.text((left + W - 16) / 2, H - 12, xlabel, anchor="middle", size=13)
    else:
        short = [_short(s, 24) for s in labels]
        row = 29
        top = 62
        left = 34 + _text_px(short, 12)
        W, H = width * _PX, top + row * max(n, 2) + 52
        c = _Canvas(W, H)
        _title(c, 8, title)
        _legend(c, left, 40, legend)
        xs = _Linear(vmin, vmax * 1.05, left, W - 20)
        _x_axis(c, xs, _nice_ticks(vmin, vmax * 1.05, 4), top, top + row * n, _count, "estimated count")
        c.text(12, top + row * n / 2, xlabel, anchor="middle", size=13, rotate=-90)
        for r in range(n):
            y = top + r * row + row / 2
            x0, x1 = float(xs(0)), float(xs(est[r]))
            c.rect(min(x0, x1), y - row * 0.35, abs(x1 - x0), row * 0.7, OKABE_ITO["sky"])
            a, b = float(xs(lo[r])), float(xs(hi[r]))
            c.line(a, y, b, y, OKABE_ITO["black"], 1.2)
            c.line(a, y - 4, a, y + 4, OKABE_ITO["black"], 1.2)
            c.line(b, y - 4, b, y + 4, OKABE_ITO["black"], 1.2)
            c.text(left - 6, y, short[r], anchor="end", size=12)
        c.line(float(xs(0)), top, float(xs(0)), top + row * n, "#888888", 0.8)
    return c.render(f"Bar chart of {n} estimated counts of {xlabel} with {level_pct} confidence "
                    "intervals as error bars.")


def _viridis(t: np.ndarray) -> list[str]:
    t = np.clip(np.asarray(t, dtype=float), 0.0, 1.0) * (len(_VIRIDIS) - 1)
    i = np.minimum(np.floor(t).astype(int), len(_VIRIDIS) - 2)
    f = (t - i)[:, None]
    pal = np.asarray(_VIRIDIS, dtype=float)
    rgb = np.rint(pal[i] * (1 - f) + pal[i + 1] * f).astype(int)
    return [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in rgb]


def heatmap(values: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], *,
            row_name: str, col_name: str, title: str) -> Figure:
    """Heatmap of a two-way marginal's estimates (viridis), rows and columns labelled from the
    domain (every label up to 30 values, every k-th beyond). Cells are drawn near-square, so a
    small table gives a small figure. Skewed tables (largest value above 20 times the median)
    get a square-root colour scale, said on the colour bar; negative noisy estimates take the
    colour of zero.

    Parameters
    ----------
    values : 2-D array
        Estimates, rows = the first attribute's values.
    row_labels, col_labels : sequence of str
    row_name, col_name, title : str

    Returns
    -------
    Figure
    """
    v = np.asarray(values, dtype=float)
    nr, nc = v.shape
    rstep = max(1, math.ceil(nr / 30))
    cstep = max(1, math.ceil(nc / 32))
    rticks = [_short(row_labels[i], 20) for i in range(0, nr, rstep)]
    cticks = [_short(col_labels[i], 14) for i in range(0, nc, cstep)]
    rotate = max((len(s) for s in cticks), default=0) > 3 or nc > 16
    left = 40 + _text_px(rticks, 12)
    bottom = 50 + (0.72 * _text_px(cticks, 12) if rotate else 10)
    right, top = 120, 34
    cell_w = min(60.0, (WIDTH * _PX - left - right) / nc)
    cell_h = min(29.0, 620.0 / nr)
    W = max(left + right + nc * cell_w, 440)
    H = bottom + top + nr * cell_h
    hi = float(np.max(v))
    med = float(np.median(np.clip(v, 0, None)))
    skewed = hi > 0 and hi > 20 * max(med, 1e-12)
    lo = 0.0 if skewed else min(0.0, float(v.min()))
    span = hi - lo if hi > lo else 1.0
    shown = np.clip(v, 0, None) if skewed else v
    t = np.sqrt(np.clip(shown, 0, None) / hi) if skewed and hi > 0 else (shown - lo) / span
    colours = _viridis(t.reshape(-1))
    c = _Canvas(W, H)
    _title(c, 8, title)
    for r in range(nr):
        for k in range(nc):
            c.rect(left + k * cell_w, top + r * cell_h, cell_w + 0.3, cell_h + 0.3, colours[r * nc + k])
    for j, i in enumerate(range(0, nr, rstep)):
        c.text(left - 6, top + (i + 0.5) * cell_h, rticks[j], anchor="end", size=12)
    for j, i in enumerate(range(0, nc, cstep)):
        x = left + (i + 0.5) * cell_w
        y = top + nr * cell_h
        if rotate:
            c.text(x, y + 8, cticks[j], anchor="end", size=12, rotate=-45)
        else:
            c.text(x, y + 14, cticks[j], anchor="middle", size=12)
    c.text(14, top + nr * cell_h / 2, row_name, anchor="middle", size=13, rotate=-90)
    c.text(left + nc * cell_w / 2, H - 10, col_name, anchor="middle", size=13)
    # colour bar
    bx, bw, by, bh = left + nc * cell_w + 16, 14, top, nr * cell_h
    steps = 32
    for s in range(steps):
        c.rect(bx, by + bh * (1 - (s + 1) / steps), bw, bh / steps + 0.3, _viridis(np.array([(s + 0.5) / steps]))[0])
    for tv in _nice_ticks(0.0 if skewed else lo, hi, 4):
        frac = math.sqrt(max(tv, 0) / hi) if skewed and hi > 0 else (tv - lo) / span
        y = by + bh * (1 - frac)
        c.line(bx + bw, y, bx + bw + 4, y, _MUTED, 1)
        c.text(bx + bw + 7, y, _count(tv), size=11.5, fill=_MUTED)
    c.text(bx + bw + 64, by + bh / 2, "estimated count" + (" (square-root scale)" if skewed else ""),
           anchor="middle", size=12, rotate=90)
    return c.render(f"Heatmap of the {nr} by {nc} estimated counts of {row_name} by {col_name}; "
                    "brighter is larger.")
