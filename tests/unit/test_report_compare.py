"""Comparison of two runs: pairing, ratios, verdicts, files, errors."""

from __future__ import annotations

import json

import pytest

from flashbed.errors import FlashbedError
from flashbed.report import compare
from flashbed.report.comparison import Pair, pair_filesystems, verdict
from tests.report_fixtures import generator

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


# --- a board against its twin: ratios board / twin, rank agreement per study -------------------

def test_kendall_tau():
    from flashbed.report.comparison import kendall_tau
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert kendall_tau([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert kendall_tau([1, 2, 3], [20, 10, 30]) == pytest.approx(1 / 3)
    assert kendall_tau([1, 1], [1, 2]) is None and kendall_tau([1], [1]) is None


def _board_and_twin(tmp_path):
    board = {"board-loop0": {"name": "board-loop0", "kind": "board", "capacity_bytes": 1 << 30}}
    twin = {"plain-file": {"name": "plain-file", "kind": "plain", "capacity_bytes": 1 << 30}}
    # the board: xfs writes fastest, then btrfs, then ext4; the twin: btrfs, xfs, ext4
    b = gen.write_run(tmp_path / "board", [
        gen.cell(fs, "bigfile", [("write", "bandwidth", v, "MB/s"), ("write", "time", 64 / v, "s")],
                 device="board-loop0") for fs, v in (("ext4", 70.0), ("xfs", 190.0), ("btrfs", 150.0))],
        devices=board)
    t = gen.write_run(tmp_path / "twin", [
        gen.cell(fs, "bigfile", [("write", "bandwidth", v, "MB/s"), ("write", "time", 64 / v, "s")],
                 device="plain-file") for fs, v in (("ext4", 100.0), ("xfs", 140.0), ("btrfs", 160.0))],
        devices=twin)
    return b, t


def test_a_board_against_its_twin_is_board_over_twin_with_rank_agreement(tmp_path):
    b, t = _board_and_twin(tmp_path)
    for first, second in ((b, t), (t, b)):  # either order: the twin is A, the board B
        s = json.loads(compare(first, second, tmp_path / "out").summary.read_text())
        assert s["twin_check"] and s["a"]["run_id"] == "twin" and s["b"]["run_id"] == "board"
        r = next(r for r in s["rows"] if r["fs_a"] == "xfs" and r["metric"] == "bandwidth")
        assert r["ratio"] == pytest.approx(190 / 140, rel=1e-4)
        k = next(k for k in s["rankings"] if k["metric"] == "bandwidth")
        assert (k["best_a"], k["best_b"], k["same_best"]) == ("btrfs", "xfs", False)
        assert k["tau"] == pytest.approx(1 / 3, rel=1e-4)
        assert s["rank_agreement"] == [{"device": "plain-file → board-loop0", "study": "bigfile", "figures": 1,
                                        "same_winner": 0, "median_tau": pytest.approx(1 / 3, rel=1e-4)}]
    text = (tmp_path / "out" / "comparison.txt").read_text()
    assert text.startswith("flashbed twin check: board board (B) against its twin twin (A)")
    assert "== Rank agreement per study ==" in text and "0 of 1" in text and "1.36×" in text
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Rank agreement per study" in md and "| same best |" in md
    assert 'id="tab-cmp-ranks"' in (tmp_path / "out" / "report.html").read_text()


def test_the_cli_prints_the_comparison_and_refuses_runs_without_shared_figures(tmp_path, capsys):
    from flashbed.cli import main
    b, t = _board_and_twin(tmp_path)
    assert main(["report", str(b), str(t), "--out", str(tmp_path / "out")]) == 0
    out, _ = capsys.readouterr()
    assert "Rank agreement per figure" in out and "plain-file → board-loop0" in out and "report: " in out
    other = gen.write_run(tmp_path / "other", [gen.cell("ext4", "mkfs", [("empty", "mkfs", 0.1, "s")],
                                                        device="plain-file")],
                          devices={"plain-file": {"name": "plain-file", "kind": "plain"}})
    assert main(["report", str(b), str(other), "--out", str(tmp_path / "out2")]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "share no figures (studies mkfs against bigfile)" in err
    assert not (tmp_path / "out2").exists()
