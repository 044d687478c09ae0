"""The HTML report in a real headless Chromium, driven over the DevTools protocol: the page
loads from a file with no console errors and no network request, every plot renders (a box
on the page and pixels that are not blank), every in-page link has its target, and the
text stays readable in the light and the dark theme. A slow test takes the screenshot the
README shows (docs/images/report.png).

Chromium comes from Debian's packages (``make browser``); without it these tests skip.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import queue
import random
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_report_content import ROWS, baseline_rows, write_rows

from rewardsmith.report import build_report

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed: run `make browser` (as root on "
    "Debian/Ubuntu it runs apt-get install -y chromium)")
websocket_client = pytest.importorskip(
    "websockets.sync.client", reason="the browser tests drive Chromium with websockets: "
    "pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parent.parent.parent
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


class Browser:
    """A headless Chromium and one page, spoken to over the DevTools protocol (one socket,
    the page attached as a flat session)."""

    def __init__(self, profile: Path):
        assert CHROMIUM is not None
        arguments = [CHROMIUM, "--headless", "--disable-gpu", "--remote-debugging-port=0",
                     "--remote-debugging-address=127.0.0.1", f"--user-data-dir={profile}",
                     "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--hide-scrollbars", "about:blank"]
        if os.geteuid() == 0:
            arguments.insert(1, "--no-sandbox")  # Chromium refuses to sandbox as root
        self.process = subprocess.Popen(arguments, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        found: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._drain, args=(found,), daemon=True).start()
        try:
            url = found.get(timeout=60)
        except queue.Empty:
            self.close()
            raise RuntimeError("chromium did not start: " + "".join(self.log[-20:])) from None
        self._closing = contextlib.ExitStack()
        self.socket = self._closing.enter_context(
            websocket_client.connect(url, max_size=None, open_timeout=30))
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=None)
        self.session = self.send("Target.attachToTarget", {"targetId": target["targetId"],
                                                           "flatten": True},
                                 session=None)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def _drain(self, found: queue.Queue[str]) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            match = _LISTENING.search(line)
            if match:
                found.put(match.group(1))

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             session: str | None | bool = True) -> dict[str, Any]:
        number = next(self.ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session is True:
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv(timeout=60))
            if reply.get("id") == number:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        while True:
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(json.loads(self.socket.recv(timeout=60)))

    def open(self, path: Path, *, theme: str, width: int = 1200, height: int = 900) -> None:
        self.send("Emulation.setEmulatedMedia",
                  {"features": [{"name": "prefers-color-scheme", "value": theme}]})
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1,
                                                         "mobile": False})
        self.send("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"]["value"]

    def screenshot(self, clip: dict[str, float] | None = None) -> bytes:
        import base64

        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": True}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, error log entries, and requests
        that left the file (the page must need nothing from a network)."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in (
                    "error", "warning", "assert"):
                found.append(f"console {params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error",
                                                                             "warning"):
                found.append(f"log: {params['entry']}")
            elif method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if not url.startswith(("file:", "data:", "about:")):
                    found.append(f"request to {url}")
        return found

    def close(self) -> None:
        if hasattr(self, "_closing"):
            self._closing.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    running = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("browser-report")
    scored = write_rows(folder / "scored.jsonl", ROWS)
    baseline = write_rows(folder / "baseline.jsonl", baseline_rows())
    output = folder / "report.html"
    build_report(scored, output=output, compare_with=baseline,
                 warnings=["correct dominates the reward's variance"])
    return output


_INSPECT = """(() => {
  const color = (css) => (css.match(/[\\d.]+/g) || []).slice(0, 3).map(Number);
  const plots = [...document.querySelectorAll('figure.plot')].map((figure) => {
    const svg = figure.querySelector('svg');
    const box = svg.getBoundingClientRect();
    const inner = svg.getBBox();
    const text = svg.querySelector('text');
    return {id: figure.id, x: box.left + window.scrollX, y: box.top + window.scrollY,
            width: box.width, height: box.height, drawnWidth: inner.width,
            marks: svg.querySelectorAll('path, rect, line, polyline, use').length,
            text: text ? color(getComputedStyle(text).fill) : null};
  });
  const broken = [...document.querySelectorAll('a[href^="#"]')]
    .map((a) => a.getAttribute('href').slice(1))
    .filter((id) => !document.getElementById(id));
  const body = getComputedStyle(document.body);
  return {plots, broken, background: color(body.backgroundColor), color: color(body.color),
          sections: [...document.querySelectorAll('section')].map((s) => s.id)};
})()"""


def luminance(rgb: list[float]) -> float:
    def channel(value: float) -> float:
        value /= 255
        return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: list[float], b: list[float]) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def distinct_colors(png: bytes) -> int:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return len(image.convert("RGB").getcolors(maxcolors=1 << 20) or [])


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_page_loads_clean_and_every_plot_renders(browser: Browser, report: Path,
                                                 theme: str) -> None:
    browser.events.clear()
    browser.open(report, theme=theme)
    page = browser.evaluate(_INSPECT)
    assert browser.problems() == []
    assert page["sections"][:2] == ["warnings", "overview"] and "compare" in page["sections"]
    assert page["broken"] == []
    assert len(page["plots"]) == report.read_text().count('<figure class="plot"') == 9
    for plot in page["plots"]:
        assert plot["width"] > 200 and plot["height"] > 80, plot
        assert plot["drawnWidth"] > 100 and plot["marks"] > 3, plot
        clip = {key: plot[key] for key in ("x", "y", "width", "height")}
        assert distinct_colors(browser.screenshot(clip)) > 8, plot["id"]
        # axis text is drawn in the page's text color: readable on its background
        assert plot["text"] == page["color"], plot
    assert contrast(page["color"], page["background"]) > 7
    dark = luminance(page["background"]) < 0.1
    assert dark == (theme == "dark")


@pytest.mark.slow
def test_screenshot_for_the_readme(browser: Browser, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the page names its files as given: short relative paths
    rng = random.Random(3)
    rows, baseline = [], []
    for i in range(4096):
        if i % 16 == 0:  # each prompt its own difficulty: some groups all right or all wrong
            chance = rng.choice((0.0, 0.2, 0.5, 0.8, 1.0, 1.0))
        correct = float(rng.random() < chance)
        style = 1.0 if chance == 1.0 else rng.choice((0.0, 0.5, 1.0))
        line = {"id": f"r{i}", "group": f"g{i // 16}", "status": "ok", "errors": {},
                "reward": correct + 0.2 * style, "advantage": None,
                "components": {"correct": correct, "style": style},
                "timing": {"correct": rng.lognormvariate(-6, 0.7),
                           "style": rng.lognormvariate(-9, 0.4)}}
        if rng.random() < 0.03:
            line.update(status="error", reward=None, errors={"correct": "ValueError: no answer"})
            line["components"] = {"correct": None, "style": style}
        rows.append(line)
        before = json.loads(json.dumps(line))
        if before["reward"] is not None and rng.random() < 0.1:
            before["reward"] = round(before["reward"] - 0.2, 2)
        baseline.append(before)
    scored = write_rows(Path("gsm8k-v2.jsonl"), rows)
    output = tmp_path / "report.html"
    build_report(scored, output=output, compare_with=write_rows(Path("gsm8k-v1.jsonl"),
                                                                 baseline),
                 title="Rewards: gsm8k-v2 against gsm8k-v1")
    browser.events.clear()
    browser.open(output, theme="light", width=1200, height=1700)
    assert browser.problems() == []
    png = browser.screenshot({"x": 0, "y": 0, "width": 1200, "height": 1700})
    target = ROOT / "docs" / "images" / "report.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(png)
    assert distinct_colors(png) > 50
