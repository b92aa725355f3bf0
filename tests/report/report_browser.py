"""Open a local HTML file in headless Chromium and look at it as a person would.

A small client of the Chrome DevTools protocol over ``--remote-debugging-pipe`` (Chromium reads
JSON commands from file descriptor 3 and writes replies and events to descriptor 4, each message
ended by a NUL byte), so no websocket library, web driver or network port is needed. It collects
what a reader would notice — uncaught exceptions, console errors, failed or remote network
requests — evaluates JavaScript in the page and takes PNG screenshots.

Only Debian's ``chromium`` package is needed (``/usr/bin/chromium``).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
    "--remote-debugging-pipe",
)  # fmt: skip


class BrowserError(RuntimeError):
    """Chromium could not be started, died, or did not answer in time."""


@dataclass
class PageReport:
    """What happened while a page was loaded."""

    errors: list[str] = field(default_factory=list)  # exceptions, console errors, failed loads
    requests: list[str] = field(default_factory=list)  # every URL the page asked for


class Browser:
    """One headless Chromium process with a fresh profile; use as a context manager."""

    def __init__(self, *, width: int = 1280, height: int = 900, timeout: float = 90.0):
        if not os.access(CHROMIUM, os.X_OK):
            raise BrowserError(
                f"{CHROMIUM} not found: install Debian's chromium package "
                "(apt-get install -y chromium)"
            )
        self.width, self.height, self.timeout = width, height, timeout
        self._profile = tempfile.mkdtemp(prefix="dpmatrix-chromium-")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # move the child's ends above the descriptors the child is given (3, 4) before dup2
        hi_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        for fd in (to_child_r, from_child_w):
            os.close(fd)

        def child_fds() -> None:  # runs in the child between fork and exec
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        argv = [CHROMIUM, *FLAGS, f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}", "about:blank"]
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
            pass_fds=(3, 4), preexec_fn=child_fds,
        )  # fmt: skip
        os.close(hi_r)
        os.close(hi_w)
        self._w = to_child_w
        self._r = from_child_r
        os.set_blocking(self._r, False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._r, selectors.EVENT_READ)
        self._buf = b""
        self._id = 0
        self._events: list[dict] = []
        self.session: str | None = None

    # -- protocol ----------------------------------------------------------------------------
    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-2000:]

    def _read_messages(self, deadline: float) -> list[dict]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            if not self._sel.select(timeout=min(left, 1.0)):
                if self.proc.poll() is not None:
                    raise BrowserError(f"Chromium exited ({self.proc.returncode}): {self._stderr_tail()}")
                continue
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium closed the pipe: {self._stderr_tail()}")
            self._buf += chunk
        *msgs, self._buf = self._buf.split(b"\0")
        return [json.loads(m) for m in msgs if m]

    def send(self, method: str, params: dict | None = None, *, session: bool = True,
             timeout: float | None = None) -> dict:
        """Send one command and wait for its reply (events arriving meanwhile are kept)."""
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._w, data):]
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for m in self._read_messages(deadline):
                if m.get("id") == self._id:
                    if "error" in m:
                        raise BrowserError(f"{method}: {m['error']}")
                    return m.get("result", {})
                self._events.append(m)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, e in enumerate(self._events):
                if e.get("method") == method:
                    return self._events.pop(i)
            self._events.extend(self._read_messages(deadline))

    # -- page ----------------------------------------------------------------------------------
    def open(self, path: str | Path) -> PageReport:
        """Load a local file (or an ``http://`` URL of a local server) in a new tab; returns what
        went wrong while loading it."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        self._events.clear()
        url = str(path) if str(path).startswith("http://") else Path(path).resolve().as_uri()
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        self.evaluate("document.fonts ? document.fonts.ready.then(() => true) : true", await_promise=True)
        time.sleep(0.2)  # let late console messages arrive
        self.send("Runtime.evaluate", {"expression": "1"})
        return self._page_report()

    def _page_report(self) -> PageReport:
        rep = PageReport()
        for e in self._events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                rep.errors.append(f"exception: {d.get('text')} {d.get('exception', {}).get('description', '')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                rep.errors.append(f"console.{p.get('type')}: {args}")
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                ent = p["entry"]
                rep.errors.append(f"log {ent.get('source')}: {ent.get('text')} {ent.get('url', '')}")
            elif m == "Network.loadingFailed":
                rep.errors.append(f"load failed: {p.get('errorText')}")
            elif m == "Network.requestWillBeSent":
                rep.requests.append(p.get("request", {}).get("url", ""))
        return rep

    def evaluate(self, expression: str, *, await_promise: bool = False) -> Any:
        """Value of a JavaScript expression in the page (JSON-serializable results)."""
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": await_promise})
        if "exceptionDetails" in res:
            raise BrowserError(f"JavaScript error: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, clip: dict | None = None) -> bytes:
        """PNG of the whole page (default) or of a clip ``{x, y, width, height}`` in CSS pixels."""
        if clip is None:
            w, h = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            clip = {"x": 0, "y": 0, "width": w, "height": h}
        res = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True, "clip": {**clip, "scale": 1},
        })  # fmt: skip
        return base64.b64decode(res["data"])

    # -- lifetime -----------------------------------------------------------------------------
    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", session=False, timeout=5)
                except (BrowserError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            self._sel.close()
            for fd in (self._r, self._w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
