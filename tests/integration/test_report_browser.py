"""The HTML report renders in headless Chromium: no console errors, no page errors, no requests
outside the file itself, every figure and table present and laid out, sortable tables sort.

Talks to Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe: no port, no
network). Skipped when no Chromium is installed (Debian: `apt-get install chromium`).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from flashbed.report import compare, write_report
from tests.report_fixtures import generator

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-extensions", "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars"]
DEADLINE = 25.0  # seconds for the whole browser session


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fds 3 and 4)."""

    def __init__(self, binary: str, profile: Path):
        to_r, self._to_w = os.pipe()  # we write commands, the browser reads them on fd 3
        self._from_r, from_w = os.pipe()  # the browser writes replies and events on fd 4
        # move the browser's ends above 9 so that the redirections below cannot clash with 3 and 4
        to_r, from_w = (self._high(fd) for fd in (to_r, from_w))
        shell = f'exec "$@" 3<&{to_r} 4>&{from_w} {to_r}<&- {from_w}>&-'
        self.proc = subprocess.Popen(
            ["bash", "-c", shell, "bash", binary, *CHROMIUM_FLAGS, "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True)
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []
        self.deadline = time.monotonic() + DEADLINE

    @staticmethod
    def _high(fd: int) -> int:
        new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return new

    def _read_message(self) -> dict:
        while b"\0" not in self._buf:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium in time")
            r, _, _ = select.select([self._from_r], [], [], left)
            if not r:
                continue
            chunk = os.read(self._from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe: "
                                   + self.proc.stderr.read().decode(errors="replace")[-2000:])
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._to_w, data):]
        while True:
            m = self._read_message()
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, session: str | None = None) -> dict:
        def match(e: dict) -> bool:
            return e.get("method") == method and (session is None or e.get("sessionId") == session)
        for e in self.events:
            if match(e):
                return e
        while True:
            m = self._read_message()
            self.events.append(m)
            if match(m):
                return m

    def close(self) -> None:
        try:
            self._id += 1
            os.write(self._to_w, json.dumps({"id": self._id, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        os.close(self._to_w)
        os.close(self._from_r)
        self.proc.stderr.close()


# in the page: what is there, how big, and whether a header click sorts
PAGE_PROBE = r"""
(() => {
  const figs = [...document.querySelectorAll("figure.fig")].map(f => {
    const svg = f.querySelector("svg"); const r = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    return {id: f.id, w: r.width, h: r.height, texts: svg ? svg.querySelectorAll("text").length : 0};
  });
  const tables = [...document.querySelectorAll("table.sortable")].map(t => ({
    id: t.id, rows: t.tBodies[0].rows.length, cols: t.tHead.rows[0].cells.length,
    w: t.getBoundingClientRect().width}));
  // sort the overview table by its first column, descending then ascending
  const t = document.getElementById(SORT_TABLE);
  const first = () => [...t.tBodies[0].rows].map(r => r.cells[0].textContent);
  const before = first();
  const th = t.tHead.rows[0].cells[0];
  th.click(); const asc = first(); th.click(); const desc = first();
  return JSON.stringify({figs, tables, before, asc, desc, sortable: document.documentElement.dataset.sortable,
                         ariaSort: th.getAttribute("aria-sort"), title: document.title});
})()
"""


# the first screen: where the answer's lines are, in the viewport as loaded (no scrolling)
FIRST_SCREEN_PROBE = r"""
(() => {
  const a = document.getElementById("answer");
  const box = e => { const r = e.getBoundingClientRect();
                     return {text: e.textContent, top: r.top, bottom: r.bottom, width: r.width}; };
  return JSON.stringify({devices: [...a.querySelectorAll("p.device")].map(box),
                         lines: [...a.querySelectorAll("li")].map(box), height: window.innerHeight,
                         scroll: window.scrollY, first: a.previousElementSibling.tagName});
})()
"""


def render_page(html_path: Path, screenshot: Path, width: int = 1280, height: int = 1000,
                sort_table: str = "tab-overview", probe_js: str = PAGE_PROBE) -> dict:
    """Load the page, probe it, screenshot it; collect every console/page/log problem."""
    binary = _chromium()
    assert binary
    with tempfile.TemporaryDirectory(prefix="flashbed-chromium-") as profile:
        dt = DevTools(binary, Path(profile))
        try:
            target = dt.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            sid = dt.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for m in ("Runtime.enable", "Log.enable", "Page.enable", "Network.enable"):
                dt.send(m, session=sid)
            dt.send("Emulation.setDeviceMetricsOverride",
                    {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=sid)
            dt.send("Page.navigate", {"url": html_path.resolve().as_uri()}, session=sid)
            dt.wait_event("Page.loadEventFired", session=sid)
            expr = probe_js.replace("SORT_TABLE", json.dumps(sort_table))
            probe = dt.send("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=sid)
            if "exceptionDetails" in probe:
                raise AssertionError(f"page probe failed: {probe['exceptionDetails']}")
            shot = dt.send("Page.captureScreenshot", {"format": "png"}, session=sid)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            events = [e for e in dt.events if e.get("sessionId") == sid]
        finally:
            dt.close()
    problems = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            problems.append(f"page error: {p['exceptionDetails'].get('text')} "
                            f"{(p['exceptionDetails'].get('exception') or {}).get('description', '')}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            problems.append(f"console {p['type']}: " + " ".join(str(a.get("value", a.get("description")))
                                                             for a in p.get("args", [])))
        elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
            problems.append(f"log {p['entry']['level']}: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif m == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith(("file:", "data:", "about:")):
                problems.append(f"request outside the report: {url}")
    return {"probe": json.loads(probe["result"]["value"]), "problems": problems}


@pytest.fixture(scope="module")
def report():
    run = generator().reported_run()
    return run / "report.html", json.loads((run / "summary.json").read_text())


@pytest.mark.skipif(_chromium() is None, reason="no Chromium (Debian: apt-get install chromium)")
def test_report_renders_in_headless_chromium(report, tmp_path):
    html, summary = report
    t0 = time.monotonic()
    shot = tmp_path / "report.png"
    res = render_page(html, shot)
    assert time.monotonic() - t0 < 30
    assert res["problems"] == []
    probe = res["probe"]
    assert probe["title"].startswith("flashbed report")
    # every figure and table of summary.json is on the page and laid out
    fig_ids = [f["id"] for f in probe["figs"]]
    assert fig_ids == summary["figures"]
    for f in probe["figs"]:
        assert f["w"] > 200 and f["h"] > 100, f
        assert f["texts"] > 5, f  # titles, labels, provenance footer
    assert [t["id"] for t in probe["tables"]] == summary["tables"]
    for t in probe["tables"]:
        assert t["rows"] > 0 and t["cols"] > 1 and t["w"] > 0, t
    assert int(probe["sortable"]) == len(summary["tables"])
    # clicking a header sorts (ascending, then descending)
    assert probe["asc"] == sorted(probe["before"], key=str.lower)
    assert probe["desc"] == list(reversed(probe["asc"]))
    assert probe["ariaSort"] == "descending"
    # the screenshot is a real picture of the page
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (w, h) == (1280, 1000)
    assert len(png) > 20_000  # not a blank page


def _first_screen(run: Path, shot: Path) -> dict:
    res = render_page(run / "report.html", shot, 1366, 768, probe_js=FIRST_SCREEN_PROBE)
    assert res["problems"] == []
    return res["probe"]


@pytest.mark.skipif(_chromium() is None, reason="no Chromium (Debian: apt-get install chromium)")
def test_the_first_screen_answers_the_question(tmp_path):
    """At 1366x768, without scrolling: each device, then one line per use case with the choice."""
    run = generator().reported_run()
    summary = json.loads((run / "summary.json").read_text())
    p = _first_screen(run, tmp_path / "first.png")
    assert p["height"] == 768 and p["scroll"] == 0 and p["first"] == "HEADER"
    assert [d["text"].split(" (")[0] for d in p["devices"]] == ["Device emmc-8g", "Device nand-mlc-2g"]
    recs = summary["recommendation"]
    for line in p["devices"] + p["lines"]:
        assert 0 < line["top"] and line["bottom"] <= 768 and line["width"] > 300, line
    # one line per use case the run measured, in order; those none of whose studies ran on a device
    # share one note (nand-mlc-2g's fixture runs only the boot and root studies there)
    texts = [x["text"] for x in p["lines"]]
    ucs = [uc for device in recs.values() for uc in device.values()]
    i = 0
    for uc in ucs:
        if i < len(texts) and texts[i].startswith(uc["title"] + ":"):
            if uc["winner"]:
                assert f": {uc['winner']}, runner-up {uc['runner_up']} — " in texts[i], texts[i]
            i += 1
        else:  # not on the screen: only a use case that names no winner may be left to the shared note
            assert not uc["winner"], uc["title"]
    assert i == len(texts) >= 7  # every line is a use case's, in the summary's order
    png = (tmp_path / "first.png").read_bytes()
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1366, 768)


@pytest.mark.skipif(_chromium() is None, reason="no Chromium (Debian: apt-get install chromium)")
def test_not_decided_lines_and_their_commands_fit_the_first_screen(tmp_path):
    run = generator().reported_run(crash_states=False)  # the fixture run without its crash-state cells
    p = _first_screen(run, tmp_path / "undecided.png")
    undecided = [x for x in p["lines"] if "not decided" in x["text"]]
    # rootfs, logging, database on emmc-8g (crash states); rootfs on the raw NAND device (its capabilities)
    assert len(undecided) == 4
    for line in undecided:
        assert ("measure it: flashbed run " in line["text"] or "check it: flashbed run " in line["text"]) \
            and line["bottom"] <= 768, line


@pytest.mark.skipif(_chromium() is None, reason="no Chromium (Debian: apt-get install chromium)")
def test_comparison_renders_in_headless_chromium(tmp_path):
    gen = generator()
    a = gen.reported_run()
    b = gen.make_run(tmp_path / "b", variant="tuned")
    paths = compare(a, b, tmp_path / "cmp")
    summary = json.loads(paths.summary.read_text())
    res = render_page(paths.html, tmp_path / "cmp.png", sort_table="tab-cmp-provenance")
    assert res["problems"] == []
    assert [f["id"] for f in res["probe"]["figs"]] == summary["figures"]
    assert [t["id"] for t in res["probe"]["tables"]] == summary["tables"]
    assert all(f["w"] > 200 and f["h"] > 100 for f in res["probe"]["figs"])
    assert res["probe"]["asc"] == sorted(res["probe"]["before"], key=str.lower)


@pytest.mark.skipif(_chromium() is None, reason="no Chromium (Debian: apt-get install chromium)")
def test_page_errors_are_caught(tmp_path):
    """The harness itself: a page that throws and logs an error must be reported."""
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><head><title>bad</title></head><body>"
                    "<table class='sortable' id='tab-overview'><thead><tr><th>x</th></tr></thead>"
                    "<tbody><tr><td>a</td></tr></tbody></table>"
                    "<script>console.error('boom'); undefinedFunction();</script></body></html>")
    res = render_page(page, tmp_path / "bad.png", 400, 300)
    text = "\n".join(res["problems"])
    assert "boom" in text and "undefinedFunction" in text


# the footing of a robust pass: its tornado charts and the first screen's line
FOOTING_PROBE = r"""
(() => {
  const f = [...document.querySelectorAll("figure.fig")].filter(f => f.id.startsWith("fig-tornado-"));
  const bars = f.map(x => { const svg = x.querySelector("svg"); const r = svg.getBoundingClientRect();
                            return {id: x.id, w: r.width, h: r.height, top: r.top,
                                    texts: [...svg.querySelectorAll("text")].map(t => t.textContent)}; });
  const lines = [...document.getElementById("answer").querySelectorAll("li")].map(
      e => { const r = e.getBoundingClientRect(); return {text: e.textContent, bottom: r.bottom}; });
  return JSON.stringify({bars, lines});
})()
"""


@pytest.mark.skipif(_chromium() is None, reason="no Chromium (Debian: apt-get install chromium)")
def test_the_footing_renders_its_tornado_chart(tmp_path):
    """A robust pass whose SLC-buffer variant flips the media winner: the first screen says what the
    answer depends on, above the fold, and the tornado chart is laid out with its words as text."""
    run = generator().robust_run(tmp_path / "run", {"slc_cache-low": 14.0, "slc_cache-high": 9.0})
    write_report(run)
    res = render_page(run / "report.html", tmp_path / "robust.png", 1366, 768, probe_js=FOOTING_PROBE)
    assert res["problems"] == []
    (chart,) = res["probe"]["bars"]
    assert chart["id"] == "fig-tornado-emmc-1g-media" and chart["w"] > 400 and chart["h"] > 150, chart
    words = " ".join(chart["texts"])
    assert "SLC-mode write buffer" in words and "8M → ext4" in words and "joint draws" in words
    media = next(x for x in res["probe"]["lines"] if x["text"].startswith("Media recording"))
    assert "depends on SLC-mode write buffer" in media["text"] and "the winner is ext4" in media["text"]
    assert media["bottom"] <= 768, media
