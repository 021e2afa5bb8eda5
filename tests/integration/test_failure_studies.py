"""Failure studies on the real lab, small: power cuts, dm-flakey, bad blocks.

The block device is the emulated eMMC by default (FLASHBED_TEST_DEVICE overrides), in
virtual time (issue 17): a cut lands at its seeded guest instant and the corruption's
timers run in guest time, so the waits cost no wall-clock time. Raw NAND is nandsim,
which runs in real time.
"""
import os

import pytest

from flashbed import profiles, variants
from flashbed.cell import run_cell
from flashbed.devices import presets
from flashbed.lab.kernel import ensure_kernel
from flashbed.lab.labs import UmlLab
from flashbed.results import CellKey
from flashbed.studies import STUDIES
from flashbed.studies.base import CellSpec
from flashbed.studies.powercut import CLASSES, EXTRA_CLASSES, cut_points

pytestmark = [pytest.mark.lab, pytest.mark.spread]

DEVICE = os.environ.get("FLASHBED_TEST_DEVICE", "emmc-8g@256M")


def cell(study, fs, case, params, device=DEVICE, seed=3):
    dev = presets.load_spec(device)
    v = variants.parse(fs, dev)
    st = STUDIES[study]
    cases = dict(st.cases(st.params(**{**profiles.overrides("quick", study), **params}), dev))
    return CellSpec(key=CellKey(dev.label, fs, study, case), device=dev, variant=v, params=cases[case], seed=seed,
                    clock="virtual" if dev.emulated else "real")


def run(spec, kernel, tmp_path):
    lab = UmlLab(ensure_kernel(time_travel=True) if spec.clock == "virtual" else kernel)
    return run_cell(spec, lab, tmp_path / "logs", tmp_path / "scratch")


def classes(res):
    return {mm.metric[6:]: mm.value for mm in res.measurements if mm.metric.startswith("class:")}


def test_powercut_counts_every_iteration_with_seeded_cuts(kernel, tmp_path):
    spec = cell("powercut", "ext4", "async", {"iterations": 3, "cut_min": 0.5, "cut_max": 1.5})
    res = run(spec, kernel, tmp_path)
    assert res.status == "ok", res.error
    c = classes(res)
    assert sum(c.values()) == res.value("async", "iterations") == 3
    assert set(c) <= set(CLASSES + EXTRA_CLASSES)
    assert c.get("error", 0) == 0, res.extra["iterations"]
    # ext4 on a device that keeps every write it acknowledged: nothing acked may be lost
    assert c["data-loss"] == c["garbage"] == 0, res.extra["iterations"]
    assert res.extra["cut_at"] == cut_points(3, 3, 0.5, 1.5)
    assert all(r["acks"] for r in res.extra["iterations"])
    assert res.value("async", "recovery") > 0


def test_deliberately_corrupted_fsynced_file_is_data_loss(kernel, tmp_path):
    spec = cell("powercut", "ext4", "sync", {"iterations": 2, "cut_min": 1.2, "cut_max": 1.5, "sabotage": True})
    res = run(spec, kernel, tmp_path)
    its = res.extra["iterations"]
    assert all(r["sabotaged"] for r in its), its
    assert [r["class"] for r in its] == ["data-loss", "data-loss"]
    assert classes(res)["data-loss"] == 2
    assert "acked content differs" in its[0]["why"]


def test_corruption_both_modes_classify_every_iteration_and_file(kernel, tmp_path):
    for i, case in enumerate(("after-1s one-8MB", "1s-on-1s-off many-1MB")):
        spec = cell("corruption", "ext4", case, {"iterations": 1, "corrupt_after": 1, "tail": 2,
                                                 "alternate_seconds": 3, "big_mb": 8, "many_count": 8,
                                                 # both modes (the quick profile runs "after" only)
                                                 "modes": ["after", "alternate"]})
        res = run(spec, kernel, tmp_path / str(i))
        assert res.status == "ok", res.error
        vals = {mm.metric: mm.value for mm in res.measurements}
        mount = sum(vals[f"outcome:{o}"] for o in ("mounts", "read-only", "needs-fsck", "unmountable", "hang"))
        assert mount == 1, res.extra
        files = sum(v for k, v in vals.items() if k.startswith("outcome:") and k[8:] in (
            "intact", "zeroed", "truncated", "io-error", "silently-corrupted", "missing"))
        it = res.extra["iterations"][0]
        if it["outcome"] in ("mounts", "read-only", "needs-fsck"):
            assert files == (1 if "one-" in case else 8), res.extra
        assert it["rounds"] and it["rounds"] >= 2, it


def test_badblocks_dust_reads_through_bad_blocks(kernel, tmp_path):
    spec = cell("badblocks", "ext4", "dust", {"iterations": 1, "files": 4, "file_blocks": 4, "random_blocks": 4})
    res = run(spec, kernel, tmp_path)
    assert res.status == "ok", res.error
    it = res.extra["iterations"][0]
    assert it["outcome"] in ("mounts", "read-only", "unmountable"), it
    assert it["dust"]["under_files"] >= 1, it
    # a bad block under a file's data is an I/O error the reader sees, not silent damage
    assert it["files"].get("io-error", 0) >= 1, it
    assert isinstance(it["noticed"], bool)  # ext4 returns EIO on a data block without a word in the log
    assert it["after:files"].get("intact") == 4, it  # the blocks were only unreadable: nothing is damaged


def test_powercut_on_raw_nand_ubifs_in_one_boot(kernel, tmp_path):
    spec = cell("powercut", "ubifs", "async", {"iterations": 2}, device="nand-slc-256m@64M")
    res = run(spec, kernel, tmp_path)
    c = classes(res)
    assert sum(c.values()) == 2
    assert c.get("error", 0) == 0, res.extra["iterations"]
    assert res.value("async", "attach") is not None and res.value("async", "mount") is not None


@pytest.mark.parametrize("fs", ["jffs2", "yaffs2"])
def test_powercut_on_raw_nand_keeps_what_was_acknowledged(kernel, tmp_path, fs):
    """JFFS2: every writer stopped at one instant and the flash restored as it was (nandsim
    snapshots). YAFFS2: its daemon dies between two NAND operations and the flash keeps all it
    wrote (fsync writes through to the NAND). Either way it keeps what it acknowledged."""
    spec = cell("powercut", fs, "async", {"iterations": 2, "cut_min": 1.5, "cut_max": 2.5},
                device="nand-slc-256m@64M")
    res = run(spec, kernel, tmp_path)
    its = res.extra["iterations"]
    assert [r["class"] for r in its if r["class"] == "error"] == [], its
    assert all(r["acks"] for r in its), its
    assert classes(res)["data-loss"] == 0, its
    assert res.value("async", "mount") is not None


def test_badblocks_on_yaffs2_honours_the_nands_bad_block_marks(kernel, tmp_path):
    """nandsim's factory-bad blocks reach YAFFS2 through MEMGETBADBLOCK: its first mount (a scan
    of blank flash) counts every one of them, it never writes there, and the files read back."""
    spec = cell("badblocks", "yaffs2", "badblocks", {"iterations": 1, "files": 4, "nand_bad": 6},
                device="nand-slc-256m@64M")
    res = run(spec, kernel, tmp_path)
    assert res.status == "ok", res.error
    it = res.extra["iterations"][0]
    assert it["outcome"] == "mounts", it
    assert it["daemon"] == {"bad_blocks_first_mount": 6, "bad_blocks_mount_bad": 6}, it
    assert it["files"] == {"intact": 4}, it


def test_badblocks_on_yaffs2_bit_flips_are_classified(kernel, tmp_path):
    spec = cell("badblocks", "yaffs2", "bitflips", {"iterations": 1, "files": 4}, device="nand-slc-256m@64M")
    res = run(spec, kernel, tmp_path)
    assert res.status == "ok", res.error
    it = res.extra["iterations"][0]
    assert it["outcome"] == "mounts", it
    assert sum(it["files"].values()) == 4, it
    assert isinstance(it["noticed"], bool)
