"""Figures of the HTML report, drawn with matplotlib (Agg backend, no pyplot, no global figures).

Every function takes plain numbers and returns a :class:`Figure`: a PNG (base64, ready for a
``data:`` URL), its display size in CSS pixels and an alternative text. Colours come from the
Okabe–Ito palette (distinguishable with every common colour-vision deficiency) and the
perceptually uniform, colour-blind-safe *viridis* map; fonts are DejaVu Sans (shipped with
matplotlib), so a figure looks the same on every machine.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

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

#: marker and colour of a marginal with k attributes (fairness figure)
_K_STYLE = [("*", "black"), ("s", "orange"), ("o", "blue"), ("^", "vermillion"), ("D", "green"),
            ("v", "purple")]  # fmt: skip

# screen pixels per inch of the display size, and the PNG's resolution (1.25× for sharp text)
_CSS_DPI = 96
_PNG_DPI = 120
#: width of every figure (inches at 96 CSS px per inch: 922 px, the page's text column)
WIDTH = 9.6
# approximate width of one tick-label character (DejaVu Sans at 9.5 pt), for the margins
_CHAR_IN = 0.074

_STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 10.5,
    "axes.titlesize": 11.5,
    "axes.titleweight": "bold",
    "axes.labelsize": 10.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#d9d9d9",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "xtick.labelsize": 9.5,
    "ytick.labelsize": 9.5,
    "legend.fontsize": 9.5,
    "legend.frameon": False,
    "svg.hashsalt": "dpmatrix",
}


@dataclass(frozen=True)
class Figure:
    """A rendered figure: PNG bytes as base64 text, display size (CSS px) and alt text."""

    png_base64: str
    width: int
    height: int
    alt: str

    @property
    def data_url(self) -> str:
        return "data:image/png;base64," + self.png_base64


def _new(width_in: float, height_in: float, ncols: int = 1, *, left: float = 0.8, bottom: float = 0.6,
         right: float = 0.25, top: float = 0.45, wspace: float = 0.08, **kw):
    """A figure with one row of axes and fixed margins in inches (matplotlib's automatic layout
    engines cost a second drawing pass per figure; these margins are computed from the labels)."""
    fig = MplFigure(figsize=(width_in, height_in))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False, **kw)[0]
    fig.subplots_adjust(left=left / width_in, right=1 - right / width_in, bottom=bottom / height_in,
                        top=1 - top / height_in, wspace=wspace)
    return fig, axes


def _text_in(labels: Sequence[str]) -> float:
    """Approximate width in inches of the longest label."""
    return _CHAR_IN * max((len(s) for s in labels), default=1)


def _render(fig: MplFigure, alt: str) -> Figure:
    buf = io.BytesIO()
    # no metadata: the PNG holds the picture only, and the same numbers give the same bytes
    fig.savefig(buf, format="png", dpi=_PNG_DPI, metadata={"Software": None}, facecolor="white")
    w, h = fig.get_size_inches()
    return Figure(base64.b64encode(buf.getvalue()).decode("ascii"), round(w * _CSS_DPI),
                  round(h * _CSS_DPI), alt)


def _short(text: str, n: int = 22) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


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
    with rc_context(_STYLE):
        fig, (ax,) = _new(WIDTH, 3.4, left=0.7, bottom=0.62)
        ax.plot(deltas, epsilons, color=OKABE_ITO["blue"], lw=2.4, label=label)
        if stated is not None:
            d, e = stated
            ax.axvline(d, color=OKABE_ITO["vermillion"], lw=0.9, ls="--")
            ax.plot([d], [e], "o", ms=9, color=OKABE_ITO["vermillion"], zorder=3,
                    label=f"stated: ε = {e:.4g} at δ = {d:.0e}")
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, numticks=12))
        ax.set_xlim(min(deltas), max(deltas))
        ax.set_ylim(0, max(epsilons) * 1.1)
        ax.set_xlabel("δ: the probability that the ε bound may fail (log scale)")
        ax.set_ylabel("ε")
        ax.set_title("Privacy loss ε for each choice of δ", loc="left")
        ax.legend(loc="lower left")
        return _render(fig, "Line chart of epsilon against delta on a logarithmic axis: epsilon "
                       "falls as delta grows; the stated pair is marked.")


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
    order = np.argsort(np.asarray(stds, dtype=float), kind="stable")  # smallest first = bottom
    n = len(order)
    labels = [_short(names[i], 34) for i in order]
    height = 0.95 + 0.22 * max(n, 3)
    with rc_context(_STYLE):
        fig, (ax,) = _new(WIDTH, height, left=0.35 + _text_in(labels), bottom=0.6, top=0.38)
        y = np.arange(n)
        vals = np.asarray(stds, dtype=float)[order]
        ax.barh(y, vals, color=OKABE_ITO["blue"], height=0.72)
        if targets is not None:
            t = np.array([np.nan if v is None else v for v in targets], dtype=float)[order]
            ok = np.isfinite(t)
            if ok.any():
                ax.plot(t[ok], y[ok], "|", ms=13, mew=2.4, color=OKABE_ITO["vermillion"], label="target")
                ax.legend(loc="lower right")
        ax.set_yticks(y, labels)
        ax.set_ylim(-0.6, n - 0.4)
        ax.set_xlim(0, float(vals.max()) * 1.05 if n else 1.0)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(xlabel)
        ax.set_title(title, loc="left")
        return _render(fig, f"Bar chart of {n} standard deviations, sorted, largest at the top.")


def fairness_scatter(panels: Sequence[tuple[str, Sequence[int], Sequence[int], Sequence[float]]]) -> Figure:
    """Side-by-side scatter plots (one per objective) of a marginal's average query variance
    against its number of cells, marker and colour by number of attributes (the ResidualPlanner
    paper's §6.2 figures), on shared logarithmic axes.

    Parameters
    ----------
    panels : sequence of (title, cells, n_attributes, variance)

    Returns
    -------
    Figure
    """
    all_v = np.concatenate([np.asarray(p[3], dtype=float) for p in panels])
    all_c = np.concatenate([np.asarray(p[1], dtype=float) for p in panels])
    with rc_context(_STYLE):
        fig, axes = _new(WIDTH, 3.9, ncols=len(panels), left=0.85, bottom=0.62, right=1.25,
                         wspace=0.06, sharey=True)
        handles: dict[str, Any] = {}
        for ax, (title, cells, ks, var) in zip(axes, panels):
            cells = np.asarray(cells, dtype=float)
            ks = np.asarray(ks)
            var = np.asarray(var, dtype=float)
            for k in sorted(set(ks.tolist())):
                marker, colour = _K_STYLE[min(k, len(_K_STYLE) - 1)]
                sel = ks == k
                h = ax.scatter(cells[sel], var[sel], marker=marker, s=42 if marker != "*" else 110,
                               color=OKABE_ITO[colour], alpha=0.85, edgecolor="white", linewidth=0.5)
                handles.setdefault("total" if k == 0 else f"{k}-way" if k < len(_K_STYLE) - 1
                                   else f"{k}+-way", h)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(title, loc="left")
            ax.set_xlabel("cells in the marginal (log scale)")
        lo, hi = float(np.min(all_v)), float(np.max(all_v))
        pad = (hi / lo) ** 0.1 if hi > lo * 1.01 else 1.6
        axes[0].set_ylim(lo / pad, hi * pad)
        for ax in axes:
            ax.set_xlim(max(all_c.min() / 1.8, 0.5), all_c.max() * 1.8)
            if hi * pad / (lo / pad) < 1e4:  # label 1, 2 and 5 × 10^k when there is room
                ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(_plain_tick))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _p=None: ""))
            ax.xaxis.set_major_formatter(FuncFormatter(_plain_tick))
        axes[0].set_ylabel("variance of a cell (log scale)")
        fig.legend(list(handles.values()), list(handles.keys()), loc="center right", title="marginal",
                   bbox_to_anchor=(1.0, 0.5))
        return _render(fig, "Two scatter plots side by side, one per objective: the variance of "
                       "each marginal's cells against its number of cells, by marginal order.")


def _plain_tick(v: float, _pos=None) -> str:
    if v <= 0:
        return ""
    return f"{v:,.0f}" if v >= 1 else f"{v:.2g}"


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
    with rc_context(_STYLE):
        fig, (ax,) = _new(WIDTH, 1.15 + 0.36 * max(n, 2), left=0.35 + _text_in(labels), top=0.38)
        y = np.arange(n)[::-1]
        pct = 100 * np.asarray(shares, dtype=float)
        ax.barh(y, pct, color=OKABE_ITO["green"], height=0.65)
        for yi, p in zip(y, pct):
            ax.text(p + 0.8, yi, f"{p:.1f} %", va="center", fontsize=9.5)
        ax.set_yticks(y, list(labels))
        ax.set_xlim(0, 100)
        ax.set_ylim(-0.6, n - 0.4)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("share of the privacy budget (%)")
        ax.set_title("Where the privacy budget goes", loc="left")
        return _render(fig, "Bar chart of the share of the privacy budget spent on residual "
                       "mechanisms of each order.")


def interval_bars(labels: Sequence[str], estimate: Sequence[float], lower: Sequence[float],
                  upper: Sequence[float], *, title: str, xlabel: str, level_pct: str,
                  width: float = WIDTH) -> Figure:
    """Bars of a one-way marginal's estimates with their confidence intervals as error bars
    (horizontal bars up to 14 values, vertical beyond).

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
    short = [_short(s, 24) for s in labels]
    with rc_context(_STYLE):
        if n > 14:
            step = max(1, math.ceil(n / 30))
            ticks = [_short(labels[i], 12) for i in range(0, n, step)]
            rotate = max(len(s) for s in ticks) > 3
            bottom = 0.62 + (0.72 * _text_in(ticks) if rotate else 0.1)
            fig, (ax,) = _new(WIDTH, 3.0 + bottom, left=0.95, bottom=bottom, top=0.38)
            x = np.arange(n)
            ax.bar(x, est, color=OKABE_ITO["sky"], width=0.8, label="estimate")
            ax.errorbar(x, est, yerr=[est - lo, hi - est], fmt="none", ecolor=OKABE_ITO["black"],
                        elinewidth=1, capsize=1.5, label=f"{level_pct} interval")
            ax.set_xticks(x[::step], ticks, rotation=45 if rotate else 0, ha="right" if rotate else "center",
                          rotation_mode="anchor" if rotate else "default")
            ax.set_xlim(-0.7, n - 0.3)
            ax.grid(axis="x", visible=False)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("estimated count")
            ax.yaxis.set_major_formatter(FuncFormatter(_count_tick))
            ax.axhline(0, color="#888888", lw=0.8)
        else:
            fig, (ax,) = _new(width, 1.25 + 0.3 * max(n, 2), left=0.6 + _text_in(short), top=0.38)
            y = np.arange(n)[::-1]
            ax.barh(y, est, color=OKABE_ITO["sky"], height=0.7, label="estimate")
            ax.errorbar(est, y, xerr=[est - lo, hi - est], fmt="none", ecolor=OKABE_ITO["black"],
                        elinewidth=1.2, capsize=3, label=f"{level_pct} interval")
            ax.set_yticks(y, short)
            ax.set_ylim(-0.6, n - 0.4)
            ax.grid(axis="y", visible=False)
            ax.set_ylabel(xlabel)
            ax.set_xlabel("estimated count")
            ax.xaxis.set_major_formatter(FuncFormatter(_count_tick))
            ax.xaxis.set_major_locator(MaxNLocator(5))
            ax.axvline(0, color="#888888", lw=0.8)
        ax.set_title(title, loc="left")
        ax.legend(loc="best")
        return _render(fig, f"Bar chart of {n} estimated counts of {xlabel} with {level_pct} "
                       "confidence intervals as error bars.")


def _count_tick(v: float, _pos=None) -> str:
    return f"{v:,.0f}".replace("-", "\u2212")


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
    from matplotlib.colors import Normalize, PowerNorm

    v = np.asarray(values, dtype=float)
    nr, nc = v.shape
    rstep = max(1, math.ceil(nr / 30))
    cstep = max(1, math.ceil(nc / 32))
    rticks = [_short(row_labels[i], 20) for i in range(0, nr, rstep)]
    cticks = [_short(col_labels[i], 14) for i in range(0, nc, cstep)]
    rotate = max((len(s) for s in cticks), default=0) > 3 or nc > 16
    left = 0.55 + _text_in(rticks)
    bottom = 0.62 + (0.72 * _text_in(cticks) if rotate else 0.1)
    right, top = 1.45, 0.4
    cell_w = min(0.62, (WIDTH - left - right) / nc)
    cell_h = min(0.3, 6.5 / nr)
    width = max(left + right + nc * cell_w, 4.6)
    height = bottom + top + nr * cell_h
    hi = float(np.max(v))
    med = float(np.median(np.clip(v, 0, None)))
    skewed = hi > 0 and hi > 20 * max(med, 1e-12)
    norm = PowerNorm(0.5, vmin=0.0, vmax=hi) if skewed else Normalize(vmin=min(0.0, float(v.min())), vmax=hi)
    shown = np.clip(v, 0, None) if skewed else v
    with rc_context({**_STYLE, "axes.grid": False}):
        fig, (ax,) = _new(width, height, left=left, bottom=bottom, top=top, right=right)
        im = ax.imshow(shown, cmap="viridis", norm=norm, aspect="auto", interpolation="nearest")
        ax.set_yticks(np.arange(0, nr, rstep), rticks)
        ax.set_xticks(np.arange(0, nc, cstep), cticks, rotation=45 if rotate else 0,
                      ha="right" if rotate else "center", rotation_mode="anchor" if rotate else "default")
        ax.set_ylabel(row_name)
        ax.set_xlabel(col_name)
        for sp in ax.spines.values():
            sp.set_visible(False)
        pos = ax.get_position()
        cax = fig.add_axes((pos.x1 + 0.12 / width, pos.y0, 0.14 / width, pos.height))
        cb = fig.colorbar(im, cax=cax)
        cb.set_label("estimated count" + (" (square-root scale)" if skewed else ""))
        cb.ax.yaxis.set_major_locator(MaxNLocator(5))
        cb.ax.yaxis.set_major_formatter(FuncFormatter(_count_tick))
        ax.set_title(title, loc="left")
        return _render(fig, f"Heatmap of the {nr} by {nc} estimated counts of {row_name} by "
                       f"{col_name}; brighter is larger.")
