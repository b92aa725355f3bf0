"""The release report compared with reference screenshots at 1024, 1280 and 1920 px.

The fixed report of ``report_screens.make_release`` (shipped Adult data, seeded noise) is
rendered in headless Chromium and compared with the stored references
(``tests/report/screenshots/report-<W>.png`` and ``.json``) by ``report_screens.compare``: page
size, the DOM boxes of the navigation, text column, cards, figures and headings, and the
page's grey levels averaged over blocks, each with a tolerance that font anti-aliasing stays
within. The same comparison fails on the page broken on purpose — a navigation bar wider than
the window, figures drawn over each other, charts not drawn — so it is not blind.

After an intended change of the report's look, regenerate the references with
``PYTHONPATH=src python dev/update_report_screenshots.py``, look at the PNGs, commit them.
The rule-based layout checks (no overlap, no overflow) are in ``test_report_page.py``.
"""

from __future__ import annotations

import pytest
from report_screens import REFERENCES, WIDTHS, compare, load, make_release, render

#: pages broken on purpose, each a layout fault a reader would see
BROKEN = {
    "navigation overflows": "nav.toc { width: 2600px !important; max-width: none !important; }",
    "figures overlap": "figure.fig { margin-top: -260px !important; }",
    "charts missing": "figure.fig img { visibility: hidden !important; }",
    "cards stacked on each other": ".cards { display: block !important; } .card { margin-top: -60px !important; }",
}


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    return make_release(tmp_path_factory.mktemp("screens") / "release")


@pytest.fixture(scope="module")
def references():
    missing = [w for w in WIDTHS if not (REFERENCES / f"report-{w}.png").exists()]
    assert not missing, f"no reference screenshots for {missing}: run dev/update_report_screenshots.py"
    return {w: load(REFERENCES, w) for w in WIDTHS}


@pytest.mark.parametrize("width", WIDTHS)
def test_report_matches_its_reference_screenshot(chromium, page, references, width):
    got = render(chromium, page, width)
    assert compare(references[width], got) == []


@pytest.mark.parametrize("fault", sorted(BROKEN))
@pytest.mark.parametrize("width", [1024, 1920])
def test_a_broken_layout_does_not_match(chromium, page, references, width, fault):
    """The control: the same page with one layout fault added by CSS fails the comparison."""
    got = render(chromium, page, width, css=BROKEN[fault])
    problems = compare(references[width], got)
    assert problems, fault


def test_rendering_twice_is_within_the_tolerance_with_room_to_spare(chromium, page, references):
    """Two renderings of the page (a fresh tab each) differ in far fewer blocks than allowed, so
    the tolerance is not what makes the reference test pass."""
    import numpy as np
    from report_screens import BLOCK_LEVELS, BLOCK_SHARE

    a, _ = render(chromium, page, 1280)
    b, _ = render(chromium, page, 1280)
    assert a.shape == b.shape
    assert float(np.mean(np.abs(a.astype(float) - b.astype(float)) > BLOCK_LEVELS / 4)) < BLOCK_SHARE / 3
