"""A real device in the report: the flash emulator's figures are "not observable", never zero or
silently absent, and a criterion made of them does not hold the recommendation up."""

from __future__ import annotations

import io
import json

from flashbed.report import weights as W
from flashbed.report.build import build_document
from flashbed.report.load import NOT_OBSERVABLE, load_run
from flashbed.report.markdown import render_markdown
from flashbed.report.recommend import rank, summary_data
from flashbed.report.text import print_results
from flashbed.status import Measured
from flashbed.store import RunStore
from tests.report_fixtures import generator

gen = generator()
REAL = "Ultra_Fit-4C53"
EMU = "emmc-1g"
CRIT = """[[use_case]]
id = 'media'
title = 'Media'
summary = 's'

[[use_case.criterion]]
label = "big-file write time"
study = "bigfile"
case = "write"
metric = "seconds"
better = "lower"
weight = 1

[[use_case.criterion]]
label = "write amplification (big file)"
study = "bigfile"
source = "device"
metric = "write_amplification"
better = "lower"
weight = 5
"""
STATS = {"workload": {"write_amplification": 1.0, "host_write_bytes": 1 << 26}}


def _run(tmp_path):
    cells = []
    for dev in (REAL, EMU):
        for fs, secs, wa in (("ext4", 2.0, 3.0), ("f2fs", 3.0, 1.2)):
            stats = {"workload": {**STATS["workload"], "write_amplification": wa}} if dev == EMU else {}
            cells.append(gen.cell(fs, "bigfile", [("write", "seconds", secs, "s")], device=dev,
                                  device_stats=stats))
    devices = {REAL: {"name": REAL, "kind": "real", "node": "/dev/sdc", "capacity_bytes": 32 << 30,
                      "description": "real device /dev/sdc: SanDisk Ultra Fit, serial 4C53, 32G, usb",
                      "identity": {"model": "Ultra Fit", "serial": "4C53"}},
               EMU: {"name": EMU, "kind": "emmc", "ftl": "page-mapped", "capacity_bytes": 1 << 30}}
    return gen.write_run(tmp_path / "run", cells, devices=devices, cells=len(cells))


def test_an_emulator_criterion_is_not_observable_on_a_real_device_and_decides_nothing(tmp_path):
    w = W.load_weights(_write(tmp_path / "w.toml", CRIT))
    run = load_run(_run(tmp_path), w)
    real = rank(run, REAL, w.use_cases[0])
    assert real.not_observable == [1] and real.measured == [0] and real.not_measured == []
    assert all(e.values[1].status is Measured.NOT_OBSERVABLE and 1 not in e.scores for e in real.entries)
    assert real.winner.fs == "ext4" and real.winner.complete  # the write time alone decides
    # the same criterion on the emulated device is measured and outweighs the write time
    emu = rank(run, EMU, w.use_cases[0])
    assert emu.measured == [0, 1] and emu.not_observable == [] and emu.winner.fs == "f2fs"
    summary = summary_data({REAL: [real]})[REAL]["media"]
    assert summary["not_observable"] == ["write amplification (big file)"] and summary["not_measured"] == []


def test_the_report_says_not_observable_where_the_wear_figures_would_be(tmp_path):
    w = W.load_weights(_write(tmp_path / "w.toml", CRIT))
    run = load_run(_run(tmp_path), w)
    md = render_markdown(build_document(run))
    real_part = md.split(f"Results: {REAL}")[1].split("Results: ")[0]
    assert f"Write amplification, erase-count spread, NAND programs, GC and device busy time: {NOT_OBSERVABLE}" \
        in real_part
    assert "| none: /dev/sdc | real |" in md  # the devices table: no preset
    assert "Flash emulator statistics" not in real_part  # no table of zeros or blanks
    assert "Not observable on a real device (flash emulator statistics; not scored for anyone): write " \
           "amplification (big file)" in md
    assert f"write amplification (big file) ({NOT_OBSERVABLE})" in md  # the overview's "not measured" column
    assert "real device /dev/sdc: SanDisk Ultra Fit" in md
    # the emulated device keeps its statistics
    emu_part = md.split(f"Results: {EMU}")[1]
    assert "Flash emulator statistics" in emu_part and NOT_OBSERVABLE not in emu_part


def test_flashbed_results_says_it_per_real_device(tmp_path):
    out = io.StringIO()
    print_results(RunStore(_run(tmp_path)), stream=out)
    lines = [ln for ln in out.getvalue().splitlines() if NOT_OBSERVABLE in ln]
    assert len(lines) == 1 and lines[0].startswith(f"device {REAL}: real device /dev/sdc")
    assert "write amplification" in lines[0]


def _write(p, text):
    p.write_text(text)
    return p


def test_a_real_device_cell_has_no_statistics_to_show_as_zero(tmp_path):
    cells = json.loads(next((_run(tmp_path) / "cells").glob(f"{REAL}*")).read_text())
    assert cells["device_stats"] == {}
