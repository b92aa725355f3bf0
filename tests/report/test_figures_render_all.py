"""Many report figures drawn in worker processes are the figures drawn one by one, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest

from dpmatrix.report import figures


def _specs(n: int):
    rng = np.random.default_rng(3)
    out = []
    for i in range(n):
        if i % 2:
            v = rng.uniform(0, 100, (4, 5))
            out.append(("heatmap", (v, list("abcd"), list("vwxyz")),
                        {"row_name": "r", "col_name": "c", "title": f"t{i}"}))  # fmt: skip
        else:
            est = rng.uniform(10, 90, 6)
            out.append(("interval_bars", ([f"v{j}" for j in range(6)], est, est - 5, est + 5),
                        {"title": f"t{i}", "xlabel": "x", "level_pct": "95 %"}))  # fmt: skip
    return out


def test_parallel_drawing_gives_the_same_png_bytes_in_order():
    specs = _specs(figures.PARALLEL_MIN)
    alone = [figures._draw(s) for s in specs]
    pooled = figures.render_all(specs, workers=2)
    assert [f.png_base64 for f in pooled] == [f.png_base64 for f in alone]
    assert [(f.width, f.height, f.alt) for f in pooled] == [(f.width, f.height, f.alt) for f in alone]
    assert len({f.png_base64 for f in alone}) == len(specs)  # distinct figures, so order is checked


def test_workers_that_cannot_start_fall_back_to_drawing_here(monkeypatch):
    import concurrent.futures as cf

    class Refused:
        def __init__(self, *a, **k):
            raise OSError("no processes here")

    monkeypatch.setattr(cf, "ProcessPoolExecutor", Refused)
    specs = _specs(figures.PARALLEL_MIN)
    got = figures.render_all(specs, workers=2)
    assert [f.png_base64 for f in got] == [figures._draw(s).png_base64 for s in specs]


def test_only_figures_of_the_module_can_be_asked_for():
    with pytest.raises(ValueError, match="not a figure"):
        figures._draw(("render_all", ([],), {}))
    with pytest.raises(ValueError, match="not a figure"):
        figures._draw(("_render", (None, ""), {}))
