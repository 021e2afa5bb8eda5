"""The report's opening picture: use cases x variants, the choice, the scores, who is not eligible and why."""

from __future__ import annotations

import re

from flashbed.report import glance, write_report
from flashbed.report.glance import Mark
from flashbed.report.load import load_run
from flashbed.report.recommend import recommend
from tests.report_fixtures import generator

gen = generator()
POSIX = ("owners", "modes", "symlinks", "hard_links", "device_nodes", "fifos", "sockets", "xattrs")


def _run(tmp_path, exfat_losses: int = 3):
    """ext4 against an exFAT that is fastest on everything, lacks the POSIX set and lost acknowledged data."""
    def crash(fs, losses):
        failures = [{"state": "f0012-c0003", "class": "data-loss", "kind": "cut", "acked": 7,
                     "why": "A/foo: acknowledged size 9000, found 0"}] if losses else []
        return [gen.cell(fs, "crashstates", gen.crash_meas("sequences", {"recovered": 100 - losses,
                                                                         "data-loss": losses}),
                         case="sequences", extra={"failures": failures})]
    return gen.write_run(tmp_path / "run", [
        gen.cell("ext4", "boot", [("boot", "seconds", 0.30, "s")]),
        gen.cell("exfat", "boot", [("boot", "seconds", 0.10, "s")]),
        gen.cell("f2fs", "boot", [("boot", "seconds", 0.20, "s")]),
        gen.cell("ext4", "overwrite", [("1MB fsync", "bandwidth", 0.3, "MB/s")]),
        gen.cell("exfat", "overwrite", [("1MB fsync", "bandwidth", 0.9, "MB/s")]),
        gen.cell("f2fs", "overwrite", [("1MB fsync", "bandwidth", 0.6, "MB/s")]),
        *(gen.cell(fs, "caps", gen.caps_meas()) for fs in ("ext4", "f2fs")),
        gen.cell("exfat", "caps", gen.caps_meas(missing=(*POSIX, "security_xattrs", "case_sensitive"))),
        *crash("ext4", 0), *crash("f2fs", 0), *crash("exfat", exfat_losses)])


def _text(svg: str) -> str:
    return " ".join(re.findall(r">([^<>]+)</text>", svg))


def test_each_cell_is_the_ranking_of_its_use_case(tmp_path):
    run = load_run(_run(tmp_path))
    recs = recommend(run)
    fss, rows = glance.rows(run, "emmc-1g", recs["emmc-1g"])
    assert fss == ["exfat", "ext4", "f2fs"]
    by = {r.use_case: r for r in rows}
    for r in recs["emmc-1g"]:
        if r.use_case.title not in by:
            continue
        row = by[r.use_case.title]
        cells = {c.fs: c for c in row.cells}
        assert row.choice == r.choice_text() and row.decided == r.decided
        if r.winner:  # the choice is the ranking's winner, with its score; the runner-up marked
            assert cells[r.winner.fs].mark is Mark.CHOICE and cells[r.winner.fs].score == r.winner.score
            assert [c.fs for c in row.cells if c.mark is Mark.CHOICE] == [r.winner.fs]
        if r.runner_up:
            assert cells[r.runner_up.fs].mark is Mark.RUNNER_UP
        for e in r.not_eligible:  # never scored, and says why
            assert cells[e.fs].mark is Mark.NOT_ELIGIBLE and cells[e.fs].score is None and cells[e.fs].why
    logging = {c.fs: c for c in by["Data logging (small sync writes)"].cells}
    assert logging["exfat"].why == "lost data in 3 of 100 states"
    root = {c.fs: c for c in by["Root filesystem"].cells}
    assert root["exfat"].why.startswith("no owners, modes, 6 more; lost data in 3 of 100 states")


def test_the_report_opens_with_the_picture_above_the_first_screens_text(tmp_path):
    run = _run(tmp_path)
    write_report(run)
    html = (run / "report.html").read_text()
    answer = html.index('<section id="answer"')
    assert answer < html.index('id="fig-glance"') < html.index("<strong>Device ") < html.index('id="recommendation"')
    svg = (run / "report-figures" / "fig-glance.svg").read_text()
    words = _text(svg)
    assert "★" in words and "²" in words and "hatched: not eligible, a requirement fails" in words
    assert "lost data in 3 of" in words and "emmc-1g" in words
    md = (run / "report.md").read_text()
    assert md.index("fig-glance.svg") < md.index("**Device ")


def test_no_picture_for_a_run_that_recommends_nothing(tmp_path):
    # most of its cells failed: the first screen says so first, and no picture may read as an answer
    run = load_run(gen.write_run(tmp_path / "r", [
        gen.cell("ext4", "boot", [("boot", "seconds", 0.3, "s")]),
        *(gen.cell(fs, "boot", [], status="crash", error="lab died") for fs in ("f2fs", "btrfs"))]))
    assert glance.figure(run, recommend(run)) is None


def test_the_picture_of_the_generated_run_has_a_grid_per_device():
    run = load_run(gen.reported_run())
    fig = glance.figure(run, recommend(run))
    words = _text(fig.svg)
    assert "emmc-8g" in words and "nand-mlc-2g" in words and "faded: not decided" in words
