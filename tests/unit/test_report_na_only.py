"""A run whose only study a read-only image cannot run (crash states on the quick profile's
filesystems): the image is n/a there and has no cell, and the report's figures still draw it."""

from __future__ import annotations

from flashbed.report import write_report
from tests.report_fixtures import generator

gen = generator()


def test_a_filesystem_only_n_a_in_the_run_gets_a_colour_and_the_report_is_written(tmp_path):
    cells = [gen.cell(fs, "crashstates", gen.crash_meas("powercut", {"recovered": 9, "data-loss": 1})
                      + [("powercut", "recover_ms", 12.0, "ms")], case="powercut") for fs in ("ext4", "vfat")]
    run = gen.write_run(tmp_path / "run", cells, not_applicable=[
        {"device": "emmc-1g", "fs": "erofs+lz4", "study": "crashstates", "why": "read-only"}],
        read_only=["erofs+lz4"])
    paths = write_report(run)
    html = paths.html.read_text()
    assert "erofs+lz4" in html and "Traceback" not in html
