"""write_report: the three files, self-contained HTML, Markdown, summary.json, regeneration from JSON alone."""

from __future__ import annotations

import json
import re
import shutil

import pytest

import flashbed.report as report
from flashbed.errors import FlashbedError
from flashbed.report import ReportPaths, write_report
from tests.report_fixtures import generator

gen = generator()


@pytest.fixture(scope="module")
def written():
    """The fixture run with its report (written once per process; shared, do not modify)."""
    run = gen.reported_run()
    paths = ReportPaths(run / "report.html", run / "report.md", run / "summary.json", run / "report-figures")
    return run, paths


def test_api():
    assert set(report.__all__) == {"ReportPaths", "write_report", "compare", "recommendation_text"}


def test_writes_three_files_into_the_run_directory(written):
    run, paths = written
    assert isinstance(paths, ReportPaths)
    assert paths.html == run / "report.html" and paths.markdown == run / "report.md"
    assert paths.summary == run / "summary.json"
    for p in (paths.html, paths.markdown, paths.summary):
        assert p.stat().st_size > 1000
    summary = json.loads(paths.summary.read_text())
    assert sorted(p.name for p in paths.figures.glob("*.svg")) == sorted(f"{i}.svg" for i in summary["figures"])


def test_html_is_self_contained(written):
    _run, paths = written
    html = paths.html.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|img|iframe|link)[^>]+\b(src|href)=\"(?!data:)", html)
    assert "<link rel=\"icon\" href=\"data:,\">" in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert "@import" not in html and "url(http" not in html
    assert html.count("<script>") == 1  # the table sorter, inline
    summary = json.loads(paths.summary.read_text())
    for fid in summary["figures"]:
        assert f'<figure id="{fid}" class="fig">' in html
    for tid in summary["tables"]:
        assert f'<table class="sortable" id="{tid}">' in html
    ids = re.findall(r'\sid="([^"]+)"', html)
    dupes = {i for i in ids if ids.count(i) > 1}
    assert not dupes, sorted(dupes)[:10]


def test_every_required_figure_and_table(written):
    _run, paths = written
    s = json.loads(paths.summary.read_text())
    figs, tabs = set(s["figures"]), set(s["tables"])
    for f in ("fig-emmc-8g-bandwidth-bandwidth", "fig-emmc-8g-bandwidth-iops", "fig-emmc-8g-bandwidth-latency",
              "fig-emmc-8g-wear", "fig-emmc-8g-cpu-bars", "fig-emmc-8g-powercut-outcomes",
              "fig-nand-mlc-2g-mount-vs-fill", "fig-nand-mlc-2g-mount-vs-size", "fig-emmc-8g-mount-bars",
              "fig-emmc-8g-boot-panels", "fig-emmc-8g-mkfs-panels"):
        assert f in figs, f
    for study in ("bandwidth", "mixed", "bigfile", "smallfiles", "appio", "overwrite", "mount", "boot", "mkfs",
                  "cpu", "powercut"):
        assert f"tab-emmc-8g-{study}" in tabs
    for t in ("tab-recommendation", "tab-overview", "tab-failures", "tab-tools", "tab-devices", "tab-weights",
              "rec-emmc-8g-database", "tab-emmc-8g-device-stats"):
        assert t in tabs, t


def test_units_in_every_numeric_column(written):
    _run, paths = written
    html = paths.html.read_text()
    heads = re.findall(r'<th scope="col" data-type="num">([^<]*)</th>', html)
    assert len(heads) > 100
    for h in heads:
        assert h == "rank" or re.search(r"\([^)]+\)$", h), h


def test_summary_json(written):
    _run, paths = written
    s = json.loads(paths.summary.read_text())
    assert s["schema"] == 1 and s["kind"] == "run"
    assert s["run"]["run_id"] == "20250101-1200-default" and s["run"]["profile"] == "quick"
    assert s["missing_studies"] == ["corruption"]
    assert s["studies"]["corruption"] == {"status": "missing", "cells": {}}
    assert s["studies"]["powercut"]["cells"] == {"hang": 1, "ok": 7}
    assert s["failures"] == [{"id": "emmc-8g/btrfs/powercut/sync/r0", "status": "hang",
                              "error": "step 'cut-and-remount' timed out after 120 s (iteration 17)"}]
    db = s["recommendation"]["emmc-8g"]["database"]
    assert db["winner"] == "f2fs+discard" and db["ranking"][0]["text"].startswith("**f2fs+discard**")
    row = next(r for r in s["results"] if r["fs"] == "ext4" and r["case"] == "randwrite 4k direct"
               and r["metric"] == "iops")
    assert row["n"] == 2 and row["unit"] == "IO/s" and row["min"] <= row["mean"] <= row["max"]
    assert "created_at" not in s and "generated" not in json.dumps(s["run"])


def test_markdown(written):
    _run, paths = written
    md = paths.markdown.read_text()
    assert md.startswith("# flashbed report: 20250101-1200-default\n")
    assert "\n## Recommendation\n" in md and "\n### Device emmc-8g" in md
    assert "| case | filesystem | bandwidth (MB/s) | IOPS (IO/s) | latency p50 (µs) |" in md
    assert "Missing studies (not in this run, nothing estimated for them): `corruption`." in md
    for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert (paths.markdown.parent / link).is_file(), link


def test_regenerates_identically_from_the_json_alone(written, tmp_path):
    """Delete everything but manifest.json and cells/: the same report comes back."""
    run, paths = written
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    for p in copy.iterdir():
        if p.name not in ("manifest.json", "cells"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    assert sorted(p.name for p in copy.iterdir()) == ["cells", "manifest.json"]
    again = write_report(copy)
    s1, s2 = json.loads(paths.summary.read_text()), json.loads(again.summary.read_text())
    assert s1 == s2
    assert s1["figures"] and s1["tables"]
    # deterministic to the byte: SVG ids are salted per figure and carry no date
    assert again.html.read_bytes() == paths.html.read_bytes()
    assert again.markdown.read_bytes() == paths.markdown.read_bytes()
    for f in paths.figures.glob("*.svg"):
        assert (again.figures / f.name).read_bytes() == f.read_bytes(), f.name


def test_out_dir(tmp_path):
    run = gen.write_run(tmp_path / "r", [gen.cell("ext4", "smallfiles", [("copy", "seconds", 20.0, "s")]),
                                         gen.cell("f2fs", "smallfiles", [("copy", "seconds", 15.0, "s")])])
    out = tmp_path / "out" / "nested"
    paths = write_report(run, out)
    assert paths.html == out / "report.html" and paths.html.exists() and paths.summary.exists()
    assert not (run / "report.html").exists()
    # a figure an earlier report wrote (its index lists it) and this one does not is removed;
    # a file the report did not write stays (issue 28: it deleted every *.svg it had not written)
    import json

    from flashbed.report.output import INDEX
    index = json.loads((out / INDEX).read_text())
    (out / INDEX).write_text(json.dumps({"files": index["files"] + ["report-figures/fig-old.svg"]}))
    (out / "report-figures" / "fig-old.svg").write_text("<svg/>")
    (out / "report-figures" / "mine.svg").write_text("<svg/>")
    write_report(run, out)
    assert not (out / "report-figures" / "fig-old.svg").exists()
    assert (out / "report-figures" / "mine.svg").read_text() == "<svg/>"


def test_errors(tmp_path):
    with pytest.raises(FlashbedError, match="no such run directory"):
        write_report(tmp_path / "nope")
    run = gen.write_run(tmp_path / "r", [gen.cell("ext4", "mkfs", [("empty", "mkfs", 0.5, "s")])])
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(FlashbedError, match="cannot write the report"):
        write_report(run, blocker)


def test_any_subset_of_studies(tmp_path):
    """One odd study, an unknown study, a study whose every cell failed: still a report."""
    run = gen.write_run(tmp_path / "r", [
        gen.cell("ext4", "smallfiles", [("copy", "seconds", 20.0, "s")]),
        gen.cell("ext4", "newstudy", [("a", "widgets", 3.0, "count"), ("b", "widgets", 4.0, "count")]),
        gen.cell("f2fs", "newstudy", [("a", "widgets", 5.0, "count")]),
        gen.cell("ext4", "boot", [], status="crash", error="kernel panic"),
        gen.cell("f2fs", "boot", [], status="hang", error="timeout"),
        gen.cell("ext4", "corruption", [("every-write big-file", "outcome:intact", 10, "count"),
                                        ("every-write big-file", "outcome:zeroed", 5, "count"),
                                        ("flaky small-files", "outcome:io-error", 15, "count")]),
        gen.cell("f2fs", "corruption", [("every-write big-file", "outcome:silently-corrupted", 15, "count")]),
    ])
    paths = write_report(run)
    s = json.loads(paths.summary.read_text())
    assert "fig-emmc-1g-newstudy-bars" in s["figures"] and "tab-emmc-1g-newstudy" in s["tables"]
    assert "tab-emmc-1g-boot" in s["tables"]
    assert {f["status"] for f in s["failures"]} == {"crash", "hang"}
    assert "bandwidth" in s["missing_studies"] and "corruption" not in s["missing_studies"]
    assert "fig-emmc-1g-corruption-outcomes" in s["figures"]
    survived = {(r["fs"], r["case"]): r["mean"] for r in s["results"] if r["metric"] == "survived"}
    assert survived == {("ext4", "every-write big-file"): pytest.approx(100 * 10 / 15),
                        ("ext4", "flaky small-files"): 100.0, ("f2fs", "every-write big-file"): 0.0}
    html = paths.html.read_text()
    assert "kernel panic" in html


# ---- lab-bound figures are marked where they are shown -------------------------------

def _bandwidth_report(tmp_path, busy: float):
    """Two filesystems' 4 KiB buffered and 4 MiB direct reads; fio ran 1 s, the device busy `busy` s of it."""
    cells = []
    for fs, rate in (("ext4", 60.0), ("f2fs", 45.0)):
        meas, phases = [], {}
        for case, r in (("read 4k buffered", rate), ("read 4M direct", 2 * rate)):
            meas += [(case, "bandwidth", r, "MB/s"), (case, "lat_p50", 50.0, "µs"), (case, "lat_p99", 400.0, "µs"),
                     (case, "runtime", 1.0, "s")]
            phases[case] = {"busy_seconds": busy, "wall_seconds": 1.8, "host_write_bytes": 0}
        cells.append(gen.cell(fs, "bandwidth", meas, device_stats=phases))
    run = gen.write_run(tmp_path / "run", cells)
    return write_report(run), run


def test_lab_bound_figures_are_marked_in_html_and_markdown(tmp_path):
    paths, _run = _bandwidth_report(tmp_path, 0.3)
    md, html = paths.markdown.read_text(), paths.html.read_text()
    # the study table: the device-busy column says it, with the utilisation
    row = next(line for line in md.splitlines() if line.startswith("| read 4k buffered | ext4 |"))
    assert "| 30 lab-bound |" in row
    assert 'class="labbound num"' in html and "device busy 30 % of fio&#x27;s run time" in html
    # the figures: hatched, labelled with the utilisation, explained in the footer (inside the SVG)
    svg = (paths.figures / "fig-emmc-1g-bandwidth-bandwidth.svg").read_text()
    assert "lab 30%" in svg and "lab-bound" in svg
    assert "the device was busy less than 50 % of the figure" in md  # the figure's caption in Markdown
    assert "lab 30%" in (paths.figures / "fig-emmc-1g-bandwidth-latency.svg").read_text()
    s = json.loads(paths.summary.read_text())
    assert s["device_busy"][0] == {"device": "emmc-1g", "fs": "ext4", "study": "bandwidth",
                                   "case": "read 4M direct", "device_busy_pct": 30.0, "n": 1, "lab_bound": True,
                                   "basis": "fio's run time"}


def test_device_bound_figures_carry_no_mark(tmp_path):
    paths, _run = _bandwidth_report(tmp_path, 0.9)
    md, html = paths.markdown.read_text(), paths.html.read_text()
    row = next(line for line in md.splitlines() if line.startswith("| read 4k buffered | ext4 |"))
    assert "| 90 |" in row and "lab-bound" not in row
    assert "labbound" not in html.split("</style>", 1)[1]
    for svg in paths.figures.glob("*.svg"):
        assert "lab-bound" not in svg.read_text() and "lab 90%" not in svg.read_text(), svg.name
    assert not any(d["lab_bound"] for d in json.loads(paths.summary.read_text())["device_busy"])


def test_the_real_part_and_its_sources_are_named_when_the_preset_names_them(tmp_path):
    info = {"name": "emmc-8g", "kind": "block", "ftl": "page", "capacity_bytes": 1 << 30,
            "model": "Example eMMC 8GB", "sources": {"seq_read_mb_s": "vendor datasheet rev 2"}}
    run = gen.write_run(tmp_path / "r", [gen.cell("ext4", "smallfiles", [("copy", "seconds", 20.0, "s")]),
                                         gen.cell("f2fs", "smallfiles", [("copy", "seconds", 15.0, "s")])],
                        devices={"emmc-1g": info}, kernel={"release": "7.3.1", "name": "7.3"})
    paths = write_report(run)
    md = paths.markdown.read_text()
    first = md.split("\n## ", 2)[1]  # the Answer section
    assert ("**Device emmc-1g (preset emmc-8g: block, page FTL, 1 GiB, models Example eMMC 8GB)** — "
            "sources: seq_read_mb_s: vendor datasheet rev 2.") in first
    assert "Lab kernel 7.3.1 (7.3 kernel)" in first
    assert "| device | preset | kind | FTL | capacity (MiB) | page size (bytes) | erase block (KiB) | real part | sources |" in md
    svg = next(paths.figures.glob("*.svg")).read_text()
    assert "models Example eMMC 8GB" in svg
