"""The mount study on YAFFS2: the daemon's own yaffs_mount time is the mount figure,
the whole mount command (FUSE start-up) a figure apart."""

from __future__ import annotations

import json

from flashbed import variants
from flashbed.devices import presets
from flashbed.lab.uml import BootResult, StepResult
from flashbed.results import CellKey
from flashbed.status import BootStatus
from flashbed.studies import STUDIES
from flashbed.studies.base import CellSpec


def _spec():
    dev = presets.load_spec("nand-2g-4k@128M")
    study = STUDIES["mount"]
    params = study.Params(fills=(50,), fill=50)
    return study, CellSpec(key=CellKey(dev.label, "yaffs2", "mount", "fill50"), device=dev,
                           variant=variants.parse("yaffs2", dev), params=params, seed=1)


def _mount_line(seconds: float, restored: bool) -> str:
    return json.dumps({"event": "mount", "mount_s": seconds, "checkpoint_restored": restored})


def test_yaffs2_mounts_clean_from_the_checkpoint_then_ignoring_it_then_after_a_kill(tmp_path):
    study, spec = _spec()
    (steps,) = study.boots(spec, tmp_path)
    names = [s.name for s in steps]
    order = [names.index(n) for n in ("mount-clean", "umount-clean", "mount-scan", "write-1MB", "cut-daemon",
                                      "mount-unclean", "umount-unclean")]
    assert order == sorted(order)
    scan = steps[names.index("mount-scan")].cmd
    cut = steps[names.index("cut-daemon")].cmd
    assert "--no-checkpoint" in scan and "kill -9" in cut


def test_the_mount_figure_is_yaffs_mount_and_fuse_start_up_is_apart(tmp_path):
    study, spec = _spec()
    (steps,) = study.boots(spec, tmp_path)
    outputs = {"mount-clean": _mount_line(0.012, True), "mount-scan": _mount_line(0.3, False),
               "mount-unclean": _mount_line(0.25, False)}
    results = [StepResult(s.name, s.cmd or "", "ok", 0, 0.5, outputs.get(s.name, ""), "") for s in steps]
    boot = BootResult(BootStatus.DONE, results, 1.0, 10.0, "console.log", 0, "7.3")
    out = study.parse(spec, [boot], tmp_path)
    got = {(x.case, x.metric): x.value for x in out.measurements}
    assert got[("128MiB fill50 clean", "mount")] == 0.012
    assert got[("128MiB fill50 clean", "mount_scan")] == 0.3
    assert got[("128MiB fill50 unclean", "mount")] == 0.25
    assert got[("128MiB fill50 clean", "startup")] == 0.5  # the whole step: daemon start and FUSE mount
    assert ("128MiB fill50 clean", "attach") not in got


def test_the_report_says_which_yaffs2_figures_are_comparable_with_the_in_kernel_ones():
    from flashbed.report import yaffs2note as note
    assert note.on_fuse("yaffs2") and note.on_fuse("ext4@yaffs2") and not note.on_fuse("ubifs")
    assert "comparable with the in-kernel YAFFS2's mount time" in note.path_note("mount")
    assert "lower bounds" in note.path_note("overwrite") and "fusecost" in note.path_note("appio")
    # outcome studies are not speeds: no "lower bounds" beside them
    assert "lower bounds" not in note.path_note("badblocks") and "daemon's log" in note.path_note("badblocks")
    assert "no page program is torn" in note.path_note("powercut")
