"""Figures: provenance in every figure, deterministic SVG, unique ids, any subset of data."""

from __future__ import annotations

import json
import re

import pytest

from flashbed.report import figures as F
from flashbed.report import units
from flashbed.report.load import load_run
from tests.report_fixtures import generator

gen = generator()


@pytest.fixture(scope="module")
def reported():
    run = gen.reported_run()
    return run, json.loads((run / "summary.json").read_text())


def _svg_text(svg: str) -> str:
    return " ".join(re.findall(r">([^<>]+)</text>", svg))


def test_every_figure_states_its_provenance(reported):
    run, summary = reported
    manifest = json.loads((run / "manifest.json").read_text())
    assert summary["figures"]
    for fid in summary["figures"]:
        svg = (run / "report-figures" / f"{fid}.svg").read_text()
        text = _svg_text(svg)
        device = "nand-mlc-2g" if "nand" in fid else "emmc-8g"
        assert f"device {device} (preset {device}" in text, fid
        assert f"kernel {manifest['kernel']['release']}" in text, fid
        assert "profile quick" in text and re.search(r"repeats \d", text), fid
        assert "tools: " in text and re.search(r"(fio-3\.33|mkfs\.\w+ [\d.]+)", text), fid


def test_error_bars_are_said_when_there_are_repeats(reported):
    run, _s = reported
    bw = _svg_text((run / "report-figures" / "fig-emmc-8g-bandwidth-bandwidth.svg").read_text())
    mkfs = _svg_text((run / "report-figures" / "fig-emmc-8g-mkfs-panels.svg").read_text())
    assert "repeats 2; error bars: min–max over repeats" in bw and "fio fio-3.33" in bw
    assert "repeats 1" in mkfs and "error bars" not in mkfs


def test_figures_show_units(reported):
    run, _s = reported
    for fid, unit in (("fig-emmc-8g-bandwidth-bandwidth", "(MB/s)"), ("fig-emmc-8g-bandwidth-iops", "(IO/s)"),
                      ("fig-emmc-8g-bandwidth-latency", "(µs)"), ("fig-nand-mlc-2g-mount-vs-size", "(s)"),
                      ("fig-emmc-8g-wear", "write amplification (×)"), ("fig-emmc-8g-appio-bars", "(KB/s)")):
        assert unit in _svg_text((run / "report-figures" / f"{fid}.svg").read_text()), fid


def test_svg_is_deterministic_and_ids_are_scoped(tmp_path):
    run = load_run(gen.make_run(tmp_path / "run"))
    ctx = F.Ctx(run, F.fs_colors(run.filesystems("emmc-8g")))
    a = F.study_figures(ctx, "emmc-8g", "powercut")
    b = F.study_figures(ctx, "emmc-8g", "powercut")
    assert [f.svg for f in a] == [f.svg for f in b]
    svg = a[0].svg
    assert svg.startswith("<svg") and "<dc:date>" not in svg
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert ids and all(i.startswith(a[0].id) for i in ids)
    for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', svg):
        assert ref in ids


def test_failed_cell_is_marked_in_the_figure(reported):
    run, _s = reported
    text = _svg_text((run / "report-figures" / "fig-emmc-8g-powercut-outcomes.svg").read_text())
    assert "hang" in text and "clean" in text and "%" in text


def test_colors_are_stable_per_filesystem():
    c1 = F.fs_colors(["f2fs", "ext4", "btrfs"])
    c2 = F.fs_colors(["btrfs", "ext4", "f2fs"])
    assert c1 == c2 and len(set(c1.values())) == 3


def test_empty_and_partial_data(tmp_path):
    run = load_run(gen.write_run(tmp_path / "r", [
        gen.cell("ext4", "bandwidth", [("randread 4k direct", "bandwidth", 9.0, "MB/s")]),
        gen.cell("ext4", "mount", [("256MB fill50 clean", "mount", 0.2, "s")]),  # one point: bars, no curve
        gen.cell("ext4", "powercut", [], status="hang", error="x"),
    ]))
    ctx = F.Ctx(run, F.fs_colors(["ext4"]))
    bw = F.study_figures(ctx, "emmc-1g", "bandwidth")
    assert [f.id for f in bw] == ["fig-emmc-1g-bandwidth-bandwidth"]  # no IOPS, no latency data
    assert [f.id for f in F.study_figures(ctx, "emmc-1g", "mount")] == ["fig-emmc-1g-mount-bars"]
    assert F.study_figures(ctx, "emmc-1g", "powercut") == []
    assert F.wear_figure(ctx, "emmc-1g") is None
    assert F.latency_figure(ctx, "emmc-1g") is None


def test_labels():
    assert units.fmt(1234.5) == "1,234" or units.fmt(1234.5) == "1,235"
    assert units.fmt(0.0123) == "0.012" and units.fmt(12.34) == "12.3" and units.fmt(None) == "—"
    assert units.fmt_unit(150 * 1048576, "bytes") == "150 MiB"
    assert units.fmt_unit(2.5, "×") == "2.50×"
    assert units.ratio_text(2.31) == "2.3×" and units.ratio_text(0.43) == "0.43×" and units.ratio_text(1.07) == "1.07×"
