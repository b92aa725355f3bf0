"""Reference screenshots of a fixed release report, and a tolerant comparison with them.

The report of a fixed release (shipped Adult data, five attributes — ``age`` ordinal, the
16-value ``education-num``, ``race``, ``sex`` and the labelled income — all ≤2-way marginals,
ρ = 0.5, noise from a seeded generator) is rendered in headless Chromium at 1024, 1280 and
1920 px. What is stored per width, in ``tests/report/screenshots/``:

* ``report-<W>.png`` — the whole page in grey, downscaled by area averaging to ``COLUMNS`` pixels
  across (each stored pixel is the mean grey level of a block of ``W / COLUMNS`` CSS pixels
  square), so a few kilobytes;
* ``report-<W>.json`` — the page size and the boxes of the main layout elements, taken from the
  DOM: the navigation bar, the text column, the summary cards, the figures, the headings.

A rendering matches its reference when (``compare``):

1. the page is as wide as the window and its height is within ``HEIGHT_TOL`` of the reference;
2. the same number of each layout element, each box with its left and right edges within
   ``X_TOL`` CSS px of the reference, its width within ``X_TOL``, its top within ``Y_TOL`` (plus
   ``HEIGHT_TOL`` of the page height, for text above it that wraps differently); no two figures
   or cards overlap;
3. the downscaled pages (cropped to the shorter) differ by more than ``BLOCK_LEVELS`` grey levels
   in at most ``BLOCK_SHARE`` of the blocks;
4. every figure, cut out of each image at its own box (so a figure moved within the tolerance is
   still compared with itself), differs from the reference's by at most ``FIGURE_LEVELS`` grey
   levels on average: a chart not drawn, or drawn over by another, changes its own blocks even
   when it is a small part of the page.

The references hold for the Chromium and fonts ``dev/test.sh`` installs (Debian's ``chromium``
and its default fonts); another font set moves text by more than a block and needs its own
references.

Font anti-aliasing and hinting change a pixel here and there, i.e. a block's mean by a level or
two: they pass. An overflowing navigation bar (page wider than the window), overlapping figures
or legends (boxes moved, blocks changed), a chart that is not drawn (its blocks turn white) fail;
``test_report_screenshots.py`` shows each failing on a page broken on purpose.

Regenerate the references after an intended change of the report's look:
``PYTHONPATH=src python dev/update_report_screenshots.py`` (then look at the PNGs before committing).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
REFERENCES = HERE / "screenshots"
WIDTHS = (1024, 1280, 1920)
ATTRS = ("age", "education-num", "race", "sex", "income>50K")
SEED = 20261128
COLUMNS = 128  # stored pixels across the page
HEIGHT_TOL = 0.03  # relative
X_TOL = 12.0  # CSS px
Y_TOL = 24.0  # CSS px
BLOCK_LEVELS = 40.0  # grey levels (0..255) of a block's mean
BLOCK_SHARE = 0.03  # of the blocks
FIGURE_LEVELS = 2.5  # mean grey-level difference over one figure's own box

LAYOUT_JS = r"""
(() => {
  const box = e => { const r = e.getBoundingClientRect();
    return [r.left + scrollX, r.top + scrollY, r.width, r.height]; };
  const all = sel => Array.from(document.querySelectorAll(sel)).filter(e => e.offsetParent !== null || e.tagName === 'IMG').map(box);
  const de = document.documentElement;
  return {width: de.scrollWidth, height: de.scrollHeight, inner: innerWidth,
          boxes: {nav: all('nav.toc'), main: all('main'), cards: all('.card'),
                  figures: all('figure.fig img'), headings: all('h1, h2')}};
})()
"""


def make_release(out: Path) -> Path:
    """The fixed release and its report (``out/report.html``): the same page on every run but
    for the creation time and library version printed in it."""
    import pandas as pd

    import dpmatrix as dm
    from dpmatrix._report import write_release_report
    from dpmatrix.release import write_release

    data = Path(dm.__file__).resolve().parent / "data"
    full = dm.Domain.from_json(data / "adult-domain.json")
    dom = dm.Domain([full.attributes[full.index(a)] for a in ATTRS])
    records = pd.read_csv(data / "adult.csv", usecols=list(ATTRS))[list(ATTRS)]
    plan = dm.plan(dm.Workload.marginals(dom, 2, upto=True), rho=0.5, objective="max_var")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a seeded generator is insecure by design: a fixed page
        meas = plan.measure(records, rng=np.random.default_rng(SEED), encoding="codes")
    write_release(meas, out)
    write_release_report(out)
    return out / "report.html"


def render(chromium, page: Path, width: int, css: str | None = None) -> tuple[np.ndarray, dict]:
    """The page at ``width`` px: its downscaled grey image and its layout; ``css`` is added to
    the page first (to break it on purpose)."""
    old = chromium.width
    chromium.width = width
    try:
        errors = chromium.open(page).errors
        assert errors == [], errors
        if css:
            chromium.evaluate(f"document.head.insertAdjacentHTML('beforeend', {json.dumps('<style>' + css + '</style>')})")
        layout = chromium.evaluate(LAYOUT_JS)
        png = chromium.screenshot()
    finally:
        chromium.width = old
    return downscale(png, width), layout


def downscale(png: bytes, width: int) -> np.ndarray:
    """Grey levels averaged over blocks of ``width / COLUMNS`` px (the page's own width, so a page
    wider than the window keeps its extra width)."""
    img = Image.open(io.BytesIO(png)).convert("L")
    block = width / COLUMNS
    size = (max(1, round(img.width / block)), max(1, round(img.height / block)))
    return np.asarray(img.resize(size, Image.Resampling.BOX), dtype=np.uint8)


def save(folder: Path, width: int, image: np.ndarray, layout: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(folder / f"report-{width}.png", optimize=True)
    (folder / f"report-{width}.json").write_text(json.dumps(layout, indent=1) + "\n")


def load(folder: Path, width: int) -> tuple[np.ndarray, dict]:
    image = np.asarray(Image.open(folder / f"report-{width}.png").convert("L"), dtype=np.uint8)
    return image, json.loads((folder / f"report-{width}.json").read_text())


def _overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] - 0.5 and b[0] < a[0] + a[2] - 0.5 and a[1] < b[1] + b[3] - 0.5 and b[1] < a[1] + a[3] - 0.5


def compare(ref: tuple[np.ndarray, dict], got: tuple[np.ndarray, dict]) -> list[str]:
    """What differs beyond the tolerances (module docstring); empty when the page matches."""
    (ref_img, ref_lay), (img, lay) = ref, got
    problems = []
    if lay["width"] > lay["inner"]:
        problems.append(f"page {lay['width']} px wide in a {lay['inner']} px window (horizontal scrolling)")
    if abs(lay["height"] - ref_lay["height"]) > HEIGHT_TOL * ref_lay["height"]:
        problems.append(f"page height {lay['height']} px, reference {ref_lay['height']} px")
    slack = Y_TOL + HEIGHT_TOL * ref_lay["height"]
    for name, want in ref_lay["boxes"].items():
        have = lay["boxes"].get(name, [])
        if len(have) != len(want):
            problems.append(f"{len(have)} {name}, reference {len(want)}")
            continue
        for i, (a, b) in enumerate(zip(have, want)):
            right_a, right_b = a[0] + a[2], b[0] + b[2]
            if abs(a[0] - b[0]) > X_TOL or abs(right_a - right_b) > X_TOL or abs(a[2] - b[2]) > X_TOL:
                problems.append(f"{name}[{i}] spans x {a[0]:.0f}..{right_a:.0f}, reference {b[0]:.0f}..{right_b:.0f}")
            elif abs(a[1] - b[1]) > slack:
                problems.append(f"{name}[{i}] at y {a[1]:.0f}, reference {b[1]:.0f}")
    for name in ("figures", "cards"):
        bx = lay["boxes"].get(name, [])
        if any(_overlap(a, b) for i, a in enumerate(bx) for b in bx[i + 1:]):
            problems.append(f"overlapping {name}")
    if img.shape[1] != ref_img.shape[1]:
        problems.append(f"downscaled page {img.shape[1]} blocks wide, reference {ref_img.shape[1]}")
    else:
        rows = min(img.shape[0], ref_img.shape[0])
        diff = np.abs(img[:rows].astype(float) - ref_img[:rows].astype(float))
        share = float(np.mean(diff > BLOCK_LEVELS))
        if share > BLOCK_SHARE:
            problems.append(f"{share:.1%} of the blocks differ by more than {BLOCK_LEVELS:.0f} grey levels "
                            f"(allowed {BLOCK_SHARE:.0%})")
    if img.shape[1] == ref_img.shape[1] and len(lay["boxes"].get("figures", [])) == len(ref_lay["boxes"]["figures"]):
        scale = ref_img.shape[1] / ref_lay["inner"]
        for i, (a, b) in enumerate(zip(lay["boxes"]["figures"], ref_lay["boxes"]["figures"])):
            cut_a, cut_b = _cut(img, a, scale), _cut(ref_img, b, scale)
            rows, cols = min(cut_a.shape[0], cut_b.shape[0]), min(cut_a.shape[1], cut_b.shape[1])
            if rows and cols:
                level = float(np.mean(np.abs(cut_a[:rows, :cols].astype(float) - cut_b[:rows, :cols].astype(float))))
                if level > FIGURE_LEVELS:
                    problems.append(f"figure {i} drawn differently (mean difference {level:.1f} grey levels)")
    return problems


def _cut(image: np.ndarray, box, scale: float) -> np.ndarray:
    x, y, w, h = (v * scale for v in box)
    return image[int(y):int(y + h) + 1, int(x):int(x + w) + 1]


def describe(image: np.ndarray) -> str:
    return f"{image.shape[1]}x{image.shape[0]} blocks, mean grey {image.mean():.1f}, std {image.std():.1f}"


