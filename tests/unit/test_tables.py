"""`flashbed results` outcome tables: one row per filesystem, every count shown,
and a row whose classes do not add up to its iterations is flagged."""

from __future__ import annotations

import io

from flashbed.report.text import print_results
from flashbed.results import CellKey, CellResult, Measurement
from flashbed.store import RunStore


def cell(fs: str, counts: dict[str, int], iterations: int) -> CellResult:
    ms = [Measurement("async", "iterations", iterations, "count"), Measurement("async", "recovery", 0.2, "s")]
    ms += [Measurement("async", f"class:{k}", v, "count") for k, v in counts.items()]
    return CellResult(key=CellKey("emmc-8g@512M", fs, "powercut", "async", 0), status="ok", measurements=ms,
                      headline=f"{iterations} cuts")


def render(tmp_path, *cells: CellResult) -> str:
    store = RunStore(tmp_path / "run")
    store.write_manifest({"run_id": "run", "profile": "quick", "cells": len(cells)})
    for c in cells:
        store.write(c)
    out = io.StringIO()
    print_results(store, stream=out)
    return out.getvalue()


def test_outcome_table_has_a_row_per_filesystem_and_a_total(tmp_path):
    text = render(tmp_path, cell("ext4", {"recovered": 50}, 50), cell("vfat", {"fsck-fixed": 8, "data-loss": 42}, 50))
    lines = text.splitlines()
    head = next(i for i, l in enumerate(lines) if "async: iterations by class" in l)
    cols = lines[head + 1].split()
    vfat = lines[head + 3].split()
    assert cols[0] == "fs" and cols[-1] == "total" and "garbage" in cols  # zero classes are shown too
    assert vfat[0] == "vfat" and vfat[cols.index("data-loss")] == "42" and vfat[-1] == "50"
    assert "!=" not in text
    assert "async recovery (s)" in text and "class:" not in text


def test_a_class_no_table_knows_is_still_counted(tmp_path):
    text = render(tmp_path, cell("ext4", {"recovered": 49, "exploded": 1}, 50))
    assert "exploded" in text and "!=" not in text


def test_counts_that_do_not_add_up_are_flagged(tmp_path):
    text = render(tmp_path, cell("ext4", {"recovered": 48}, 50))
    assert "(!= 50 iterations)" in text
