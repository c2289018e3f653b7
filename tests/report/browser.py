"""A real headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
no port is opened). It records every request the page makes, every console message and log
entry, and gives screenshots, PDFs and the page's own values (the DOM, paint timing).

The browser cannot reach anything: background networking is off, every host name resolves to
nothing and any request that still tried would go to a closed loopback port (the proxy). It runs
with a throwaway profile under /tmp, in its own session, and is killed by its process group (the
browser and its own children, nothing else) when it does not close within its timeout."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser")
FLAGS = [
    "--headless", "--remote-debugging-pipe", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
    "--no-first-run", "--no-default-browser-check", "--disable-background-networking", "--disable-sync",
    "--disable-component-update", "--disable-default-apps", "--disable-extensions", "--disable-breakpad",
    "--disable-domain-reliability", "--metrics-recording-only", "--disable-client-side-phishing-detection",
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication",
    "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--host-resolver-rules=MAP * ~NOTFOUND",
    "--force-color-profile=srgb", "--font-render-hinting=none", "--enable-logging=stderr", "--v=0",
]


def chromium() -> str | None:
    """Debian's chromium binary itself (its /usr/bin wrapper only adds flags and API keys)."""
    for name in CANDIDATES:
        found = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


@dataclass
class Page:
    session: str
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    @property
    def console(self) -> list[str]:
        """Every console call and log entry the page caused (a CSP violation is one)."""
        found = [f"{e['params']['type']}: {e['params']['args']}" for e in self.events
                 if e["method"] == "Runtime.consoleAPICalled"]
        found += [f"{e['params']['entry']['level']}: {e['params']['entry']['text']}" for e in self.events
                  if e["method"] == "Log.entryAdded"]
        return found + [str(e["params"]) for e in self.events if e["method"] == "Runtime.exceptionThrown"]


class Browser:
    def __init__(self, timeout: float = 60.0) -> None:
        binary = chromium()
        if binary is None:
            raise BrowserError("no chromium (apt-get install chromium)")
        self.timeout = timeout
        self.home = Path(tempfile.mkdtemp(prefix="gn-chromium-"))
        self.stderr_path = self.home / "stderr.log"
        self.buffer, self.next_id, self.pending = b"", 0, []  # type: ignore[var-annotated]
        commands, self._to_browser = os.pipe()
        self._from_browser, replies = os.pipe()
        sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []  # root: Chromium refuses its sandbox
        with open(self.stderr_path, "wb") as log:
            self.process = subprocess.Popen(
                [binary, *FLAGS, *sandbox, f"--user-data-dir={self.home / 'profile'}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                # Python's own descriptors are not inheritable (PEP 446): only fds 3 and 4 pass on.
                # preexec_fn only duplicates two descriptors (no lock, no allocation): safe after fork.
                close_fds=False, preexec_fn=lambda: _as_fds_3_and_4(commands, replies))  # noqa: PLW1509
        os.close(commands)
        os.close(replies)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError, BrowserError):
            self._write({"id": 10**9, "method": "Browser.close", "params": {}})
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)  # its own session: the browser and its children
            self.process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # children that outlived a clean close
            os.killpg(self.process.pid, signal.SIGKILL)
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.home, ignore_errors=True)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def call(self, method: str, params: dict[str, Any] | None = None, page: Page | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if page is not None:
            message["sessionId"] = page.session
        self._write(message)
        reply = self._until(lambda m: m.get("id") == self.next_id, timeout or self.timeout, page)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})  # type: ignore[no-any-return]

    def open(self, width: int, height: int, dark: bool = False) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        page = Page(self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"])
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable", page=page)
        self.call("Page.bringToFront", page=page)  # a tab in the background is not painted until asked
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, page)
        scheme = "dark" if dark else "light"
        self.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
                  page)
        return page

    def load(self, page: Page, path: Path) -> None:
        """Navigate to a file and wait for its load event."""
        page.events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, page)
        self._until(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == page.session,
                    self.timeout, page)

    def evaluate(self, page: Page, expression: str) -> Any:
        """A value computed in the page (DevTools evaluates outside the page's CSP)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, page)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def first_paint(self, page: Page) -> float:
        """Milliseconds from navigation to the first contentful paint on screen, by the page's own clock
        (the Paint Timing API's first-contentful-paint entry)."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            found = self.evaluate(page, "performance.getEntriesByName('first-contentful-paint').map(e => e.startTime)")
            if found:
                return float(found[0])
            time.sleep(0.05)
        raise BrowserError(f"no first contentful paint within {self.timeout:g} s")

    def screenshot(self, page: Page, full: bool = False) -> bytes:
        """The page as drawn once it stops changing: two captures in a row alike (on a starved host
        the load event can come before the large drawing is all on screen), at most until the timeout."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full}
        # a tab opened since (another test's page) sends this one to the background, which Chromium
        # stops painting: its capture would wait for a frame that never comes
        self.call("Page.bringToFront", page=page)
        deadline = time.monotonic() + self.timeout
        shot = base64.b64decode(self.call("Page.captureScreenshot", params, page)["data"])
        while time.monotonic() < deadline:
            time.sleep(0.2)
            again = base64.b64decode(self.call("Page.captureScreenshot", params, page)["data"])
            if again == shot:
                break
            shot = again
        return shot

    def pdf(self, page: Page) -> bytes:
        return base64.b64decode(self.call("Page.printToPDF", {"landscape": True, "printBackground": True,
                                                               "preferCSSPageSize": True}, page)["data"])

    def _write(self, message: dict[str, Any]) -> None:
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")

    def _until(self, wanted: Any, timeout: float, page: Page | None) -> dict[str, Any]:
        """Read messages until one is `wanted`; the others are kept as the page's events."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                message = json.loads(raw)
                if page is not None and message.get("sessionId") == page.session and "method" in message:
                    page.events.append(message)
                if wanted(message):
                    return message  # type: ignore[no-any-return]
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError(f"no answer from chromium within {timeout:g} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"chromium closed its pipe (exit {self.process.poll()}): {self.stderr()[-800:]}")
            self.buffer += chunk


def _as_fds_3_and_4(commands: int, replies: int) -> None:
    """In the child: the command pipe as fd 3 and the reply pipe as fd 4, where Chromium reads and
    writes with --remote-debugging-pipe (each copied above 10 first: the pipes may be 3 or 4)."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands, replies)]
    for target, fd in zip((3, 4), high, strict=True):
        os.dup2(fd, target)
        os.close(fd)
