"""Regenerate the reference screenshots of the release report (tests/report/screenshots/).

Renders the fixed release report of ``tests/report/report_screens.py`` (shipped Adult data,
seeded noise) in headless Chromium (Debian's ``chromium``) at 1024, 1280 and 1920 px and stores,
per width, the downscaled grey page (``report-<W>.png``) and its layout boxes
(``report-<W>.json``). Run it after an intended change of the report's look, look at the PNGs,
and commit them with the change:

    PYTHONPATH=src python dev/update_report_screenshots.py [--out tests/report/screenshots]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "report"))

from report_browser import Browser  # noqa: E402
from report_screens import REFERENCES, WIDTHS, describe, make_release, render, save  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REFERENCES)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Browser(width=1280, height=900) as chromium:
        page = make_release(Path(tmp) / "release")
        for width in WIDTHS:
            image, layout = render(chromium, page, width)
            save(args.out, width, image, layout)
            print(f"{args.out}/report-{width}.png: {describe(image)}; page {layout['width']}x{layout['height']} px")


if __name__ == "__main__":
    main()
