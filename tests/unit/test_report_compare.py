"""Comparison of two runs: pairing, ratios, verdicts, files, errors."""

from __future__ import annotations

import json

import pytest

from tests.report_fixtures import generator

from flashbed.errors import FlashbedError
from flashbed.report import compare
from flashbed.report.comparison import Pair, pair_filesystems, verdict

gen = generator()


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp")
    a = gen.make_run(root / "a")
    b = gen.make_run(root / "b", variant="tuned")
    paths = compare(a, b, root / "out")
    return paths, json.loads(paths.summary.read_text())


def test_files(compared):
    paths, s = compared
    assert paths.html.name == "report.html" and paths.markdown.exists() and paths.summary.exists()
    assert s["kind"] == "comparison" and s["schema"] == 1
    assert s["a"]["run_id"] == "20250101-1200-default" and s["b"]["run_id"] == "20250101-1200-tuned"
    html = paths.html.read_text()
    for fid in s["figures"]:
        assert f'<figure id="{fid}" class="fig">' in html
    for tid in s["tables"]:
        assert f'<table class="sortable" id="{tid}">' in html
    assert "fig-cmp-emmc-8g-sd-class10-bandwidth" in s["figures"]
    assert "tab-cmp-provenance" in s["tables"] and "tab-cmp-recommendation" in s["tables"]


def test_pairs_devices_and_variants(compared):
    _p, s = compared
    assert {"a": "emmc-8g", "b": "sd-class10"} in s["device_pairs"]
    assert {"a": "nand-mlc-2g", "b": "nand-mlc-2g"} in s["device_pairs"]
    pairs = {(r["fs_a"], r["fs_b"]) for r in s["rows"]}
    assert ("ext4", "ext4-nojournal") in pairs and ("f2fs+discard", "f2fs+discard") in pairs


def test_ratios_and_verdicts(compared):
    _p, s = compared
    # the tuned fixture is 1.35x faster for sequential reads
    r = next(r for r in s["rows"] if r["fs_a"] == "ext4+noatime" and r["study"] == "bandwidth"
             and r["case"] == "read 4M buffered" and r["metric"] == "bandwidth")
    assert r["ratio"] == pytest.approx(r["b"] / r["a"], rel=1e-4)
    assert 1.2 < r["ratio"] < 1.5 and r["verdict"] == "better"
    t = next(r for r in s["rows"] if r["fs_a"] == "ext4+noatime" and r["study"] == "smallfiles"
             and r["case"] == "copy")
    assert t["ratio"] < 0.85 and t["verdict"] == "better"  # less time is better
    md = _p.markdown.read_text()
    assert "| filesystem (A → B) | case | metric | unit | A | B | B / A (×) | B is |" in md
    assert "emmc-8g → sd-class10" in md


def test_verdict_rules():
    assert verdict("higher", 1.5) == ("better", "best")
    assert verdict("lower", 1.5) == ("worse", "bad")
    assert verdict("lower", 1.03)[0] == "same"
    assert verdict("neutral", 3.0)[0] == ""
    assert verdict("higher", None)[0] == ""


def test_pair_filesystems():
    assert pair_filesystems(["ext4", "f2fs"], ["ext4+noatime", "f2fs"]) == [Pair("ext4", "ext4+noatime"),
                                                                              Pair("f2fs", "f2fs")]
    assert pair_filesystems(["btrfs"], ["xfs"]) == [Pair("btrfs", None), Pair(None, "xfs")]


def test_same_run_twice_is_all_same(tmp_path):
    run = gen.write_run(tmp_path / "r", [gen.cell("ext4", "smallfiles", [("copy", "seconds", 20.0, "s")])])
    s = json.loads(compare(run, run, tmp_path / "out").summary.read_text())
    assert s["rows"] and all(r["ratio"] == 1.0 and r["verdict"] == "same" for r in s["rows"])


def test_nothing_in_common_is_an_error(tmp_path):
    a = gen.write_run(tmp_path / "a", [gen.cell("ubifs", "mount", [("x", "mount", 1.0, "s")], device="nand")],
                      devices={"nand": {"name": "nand", "kind": "nand"}})
    b = gen.write_run(tmp_path / "b", [gen.cell("ext4", "mount", [("x", "mount", 1.0, "s")], device="emmc")],
                      devices={"emmc": {"name": "emmc", "kind": "emmc"}})
    with pytest.raises(FlashbedError, match="no device in common"):
        compare(a, b, tmp_path / "out")
    with pytest.raises(FlashbedError, match="no such run directory"):
        compare(a, tmp_path / "missing", tmp_path / "out")


def test_compare_stays_a_function_after_use(tmp_path):
    import flashbed.report as report
    run = gen.write_run(tmp_path / "r", [gen.cell("ext4", "smallfiles", [("copy", "seconds", 20.0, "s")])])
    report.compare(run, run, tmp_path / "out")
    assert callable(report.compare) and callable(report.write_report) and callable(report.recommendation_text)
