"""bench clock --profile: the whole-profile timing per clock, with the runs faked (the
real `flashbed run` of a profile is what `make bench` times)."""

import io

from flashbed.bench import profilewall
from flashbed.clock import Clock
from flashbed.results import CellKey, CellResult, CellStatus
from flashbed.store import RunStore


def test_runs_interleave_and_the_ratio_is_real_over_virtual(monkeypatch, tmp_path):
    order = []

    def fake(profile, device, clock, out, log):
        order.append(clock)
        secs = {Clock.REAL: 600.0, Clock.VIRTUAL: 200.0}[clock] + len(order)
        return profilewall.ProfileRun(clock, secs, 10, 10, 1.0)

    monkeypatch.setattr(profilewall, "run_once", fake)
    out = io.StringIO()
    done = profilewall.bench("quick", "sandisk-ultra-fit-32g@512M", runs=2, stream=out)
    assert order == [Clock.VIRTUAL, Clock.REAL, Clock.VIRTUAL, Clock.REAL]
    assert [r.seconds for r in done[Clock.REAL]] == [602.0, 604.0]
    text = out.getvalue()
    # medians 603 / 202
    assert "real / virtual: 2.99x" in text and "median of 2 runs" in text


def test_a_run_is_one_flashbed_run_process_per_clock(tmp_path):
    cmd = profilewall.command("quick", "emmc-8g@512M", Clock.VIRTUAL, tmp_path / "v")
    assert cmd[1:] == ["-m", "flashbed.cli", "run", "--profile", "quick", "--device", "emmc-8g@512M",
                       "--clock", "virtual", "--out", str(tmp_path / "v")]


def test_cells_are_counted_from_the_run_directory(tmp_path):
    store = RunStore(tmp_path)
    store.create()
    for fs, status in (("ext4", CellStatus.OK), ("xfs", CellStatus.OK), ("f2fs", CellStatus.FAILED)):
        store.write(CellResult(CellKey("emmc-8g@512M", fs, "mkfs"), status))
    assert profilewall._count(tmp_path) == (3, 2)
