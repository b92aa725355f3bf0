"""The documentation site builds with warnings as errors (broken internal links and anchors are
warnings: ``validation`` in mkdocs.yml), its generated pages are there (the CLI reference from the
argument parser, the API from the docstrings), and its first page renders in headless Chromium,
served by a local http.server on 127.0.0.1 (an ephemeral port) that the test starts: no error in
the page, nothing fetched from another host, a non-blank screenshot whose header bar has the
theme's colour and whose navigation shows the four parts of the site.

Needs the ``docs`` extra (``pip install -e ".[docs]"``; ``bash dev/test.sh`` installs it) and
Debian's ``chromium``; without them the tests fail, they are never skipped.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "report"))
sys.path.insert(0, str(ROOT / "dev" / "docs"))

SECTIONS = ("Tutorials", "How-to guides", "Explanation", "Reference")
INDIGO = np.array([0x40, 0x51, 0xB5])  # Material's "indigo" primary colour, the header bar


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    return out


def test_site_builds_strict_with_every_page(site):
    for page in ("index.html", "tutorials/first-release.html", "reference/cli.html",
                 "reference/api.html", "explanation/residual.html"):
        assert (site / page).is_file(), page


def test_cli_reference_lists_every_command_and_option(site):
    import argparse

    from dpmatrix.cli import build_parser

    html = (site / "reference" / "cli.html").read_text()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                assert f"dpmatrix {name}" in html, name
                for a in sub._actions:
                    if isinstance(a, argparse._HelpAction) or a.help == argparse.SUPPRESS:
                        continue
                    for flag in a.option_strings:
                        assert f"<code>{flag}</code>" in html, (name, flag)


def test_api_reference_is_generated_from_docstrings(site):
    html = (site / "reference" / "api.html").read_text()
    from dpmatrix.planners._dispatch import plan

    def words(s: str) -> str:
        return " ".join(re.sub(r"[^A-Za-z0-9]+", " ", s).split())

    first = words(plan.__doc__.strip().splitlines()[0])
    assert first and first in words(re.sub(r"<[^>]+>", " ", html)), first
    assert not re.search(r":(class|func|meth|mod|attr|data):<code>", html), "a raw Sphinx role"
    for name in ("Domain", "Workload", "Measurements", "load_release", "write_release", "Ledger"):
        assert 'id="dpmatrix.' in html and name in html, name


@pytest.fixture(scope="module")
def served(site):
    """The built site over HTTP on 127.0.0.1 (search needs a server; file:// pages cannot start
    its web worker)."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_front_page_renders_in_chromium(served):
    from matplotlib.image import imread
    from report_browser import CHROMIUM, Browser

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing (apt-get install -y chromium)", pytrace=False)
    with Browser(width=1280, height=900) as b:
        report = b.open(f"{served}/index.html")
        assert not report.errors, report.errors
        remote = [u for u in report.requests if not u.startswith((served, "data:", "blob:"))]
        assert not remote, f"the page fetched from the network: {remote}"
        nav = b.evaluate("Array.from(document.querySelectorAll('.md-sidebar--primary .md-nav__link'))"
                         ".filter(e => e.offsetParent !== null).map(e => e.textContent.trim())")
        title = b.evaluate("document.querySelector('h1').textContent")
        png = b.screenshot()
    for section in SECTIONS:
        assert any(section in n for n in nav), (section, nav)
    assert "dpmatrix" in title
    img = imread(io.BytesIO(png), format="png")[..., :3]
    img = (img * 255).round() if img.max() <= 1 else img
    assert img.shape[1] == 1280 and img.shape[0] >= 900, img.shape  # the whole page
    Path(os.environ.get("DPMATRIX_DOCS_SCREENSHOT", os.devnull)).write_bytes(png)
    assert img.std() > 20, "the screenshot is blank"
    header = img[5:40, 300:1000].reshape(-1, 3)
    share = (np.abs(header - INDIGO).max(axis=1) <= 12).mean()
    assert share > 0.8, f"header bar not the theme's indigo ({share:.0%} of its pixels)"
    body = img[200:800, 300:1000].reshape(-1, 3)
    assert (body.min(axis=1) > 240).mean() > 0.5, "the text area is not on a white page"
    assert (body.max(axis=1) < 100).mean() > 0.005, "no dark text in the text area"
