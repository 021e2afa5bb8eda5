"""Power-cut classification, plan and parse on fake boots: no kernel."""
import dataclasses
import json
from pathlib import Path

import pytest

from flashbed import variants
from flashbed.devices import presets
from flashbed.lab.boundary import BootResult, StepResult
from flashbed.results import CellKey
from flashbed.studies import STUDIES
from flashbed.studies.base import CellSpec
from flashbed.studies.powercut import CLASSES, EXTRA_CLASSES, classify, cut_points, mount_state

ALL = CLASSES + EXTRA_CLASSES


def facts(**kw):
    f = {"phase": "done", "mounted": True,
         "mount1": {"status": "ok", "rc": 0, "seconds": 0.1, "kmsg": [], "ro": False},
         "verify": {"n_loss": 0, "n_garbage": 0, "loss": [], "garbage": [], "probe": "ok", "ro_after": False},
         "verified_by": "mount1", "fsck": {"result": "clean", "seconds": 0.05}}
    for k, v in kw.items():
        if isinstance(v, dict) and isinstance(f.get(k), dict):
            f[k] = {**f[k], **v}
        else:
            f[k] = v
    return f


@pytest.mark.parametrize("f, kw, want", [
    (facts(), {}, "clean"),
    (facts(mount1={"kmsg": ["EXT4-fs (ubda): recovery complete"]}), {"fstype": "ext4"}, "recovered"),
    (facts(mount1={"kmsg": ["XFS (ubda): Ending recovery (logdev: internal)"]}), {"fstype": "xfs"}, "recovered"),
    (facts(fsck={"result": "fixed"}), {}, "fsck-fixed"),
    (facts(fsck={"result": "failed"}), {}, "fsck-failed"),
    (facts(verified_by="mount2", mount1={"status": "failed"}, mount2={"status": "ok"}, fsck={"result": "fixed"}),
     {}, "fsck-fixed"),
    (facts(mounted=False, mount1={"status": "failed"}), {}, "unmountable"),
    (facts(verify={"n_loss": 2, "loss": ["f1: acked file missing"]}), {}, "data-loss"),
    (facts(verify={"n_garbage": 1, "garbage": ["f2: unknown"]}), {}, "garbage"),
    (facts(verify={"n_loss": 1, "n_garbage": 1}), {}, "data-loss"),
    (facts(mount1={"ro": True}), {}, "read-only"),
    (facts(verify={"probe": "EROFS"}), {}, "read-only"),
    (facts(hang="umount1 did not return", phase="hang"), {}, "hang"),
    (facts(), {"recover_status": "timeout"}, "hang"),
    (None, {"recover_status": "hang"}, "hang"),
    (None, {"boot_status": "crash", "recover_status": "missing"}, "crash"),
    (None, {}, "error"),
    (facts(), {"cut": False}, "error"),
])
def test_classify(f, kw, want):
    kw = {"cut": True, **kw}
    cls, _why = classify(f, **kw)
    assert cls == want and cls in ALL


def test_mount_states():
    assert mount_state(facts(), "ext4") == "ok"
    assert mount_state(facts(mount1={"status": "timeout"}), "ext4") == "hang"
    assert mount_state(facts(mount1={"status": "failed"}), "ext4") == "failed"
    assert mount_state(facts(mount1={"kmsg": ["FAT-fs (ubda): Volume was not properly unmounted."]}),
                       "vfat") == "warning"


def test_cut_points_are_seeded():
    assert cut_points(3, 50, 0.5, 3.0) == cut_points(3, 50, 0.5, 3.0)
    assert cut_points(3, 50, 0.5, 3.0) != cut_points(4, 50, 0.5, 3.0)
    assert all(0.5 <= c <= 3.0 for c in cut_points(1, 200, 0.5, 3.0))


def spec(fs="ext4", device="plain-file@256M", **params):
    dev = presets.load_spec(device)
    v = variants.parse(fs, dev)
    p = STUDIES["powercut"].params(**{"iterations": 4, "mode": "async", "cut_min": 0.5, "cut_max": 1.0, **params})
    return CellSpec(key=CellKey(dev.label, fs, "powercut", p.mode), device=dev, variant=v, params=p, seed=9)


def test_plan_one_boot_per_cut_with_a_seeded_cut(tmp_path):
    """Each boot recovers from the previous boot's cut, then runs the next workload until its cut:
    n cuts in n + 1 boots (the first only works, the last only recovers)."""
    st = STUDIES["powercut"]
    s = spec()
    boots = st.boots(s, tmp_path)
    assert len(boots) == 5
    assert [[x.name for x in b] for b in boots] == [["work"]] + [["recover", "work"]] * 3 + [["recover"]]
    cuts = [float(b[-1].cmd.split("--cut-in ")[1].split()[0]) for b in boots[:-1]]
    assert cuts == st.cuts(s) == cut_points(9, 4, 0.5, 1.0)
    assert "--prepare" in boots[0][0].cmd and boots[1][0].may_fail
    # the recovery checks the previous boot's log; the workload's set-up reads the recovery's verdict
    assert "prev-pclog.jsonl" in boots[1][0].cmd and "pc-recover.json" in boots[1][0].cmd
    assert '"previous":"$FLASHBED_RUN/pc-recover.json"' in boots[1][1].cmd
    assert '"previous":null' in boots[0][0].cmd
    sync = st.boots(spec(mode="sync"), tmp_path)
    assert "sync" in sync[0][0].cmd.split("--prepare")[1]
    assert "sync" not in boots[0][0].cmd.split("--prepare")[1].replace("fsync", "")


def test_cases_from_profile_and_from_a_set_string():
    st = STUDIES["powercut"]
    dev = presets.load_spec("plain-file@256M")
    assert [c for c, _ in st.cases(st.params(modes=["sync", "async"]), dev)] == ["sync", "async"]
    assert [c for c, _ in st.cases(st.params(modes="async"), dev)] == ["async"]


def boot(status, steps):
    return BootResult(status=status, steps=[StepResult(n, "", st, rc, 0.1, out, err) for n, st, rc, out, err in steps],
                      boot_seconds=0.4, total_seconds=1.0, console_log="", exit_code=0, kernel_release="x")


def test_parse_counts_every_iteration_exactly_once(tmp_path):
    st = STUDIES["powercut"]
    s = spec(iterations=6)
    ok = json.dumps(facts())
    loss = json.dumps(facts(verify={"n_loss": 1, "loss": ["f1: acked content differs"]}))
    # a boot killed by its cut never reports its workload step; each boot's recovery is the
    # previous boot's iteration's
    boots = [
        boot("killed", []),  # 1st: cut
        boot("killed", [("recover", "ok", 0, ok, "")]),  # 1st: clean; 2nd: cut
        boot("step-failed", [("recover", "ok", 0, loss, ""),  # 2nd: data loss; 3rd: no cut (error)
                             ("work", "failed", 1, "", "prepare failed: mkfs: no")]),
        boot("killed", [("recover", "ok", 0, ok, "")]),  # 4th: cut
        boot("hang", [("recover", "hang", None, "", "")]),  # 4th: hang; 5th: never worked (error)
        boot("crash", []),  # 6th: never worked (error)
    ]
    out = st.parse(s, boots, tmp_path)
    vals = {mm.metric: mm.value for mm in out.measurements}
    assert vals["iterations"] == 6
    assert sum(v for k, v in vals.items() if k.startswith("class:")) == 6
    assert vals["class:clean"] == 1 and vals["class:data-loss"] == 1 and vals["class:hang"] == 1
    assert vals["class:error"] == 3
    assert out.extra["cut_at"] == st.cuts(s)
    assert [r["class"] for r in out.extra["iterations"]] == ["clean", "data-loss", "error", "hang", "error", "error"]
    # a lab that dies during a recovery: that iteration's class is crash
    crashed = st.parse(spec(iterations=1), [boot("killed", []), boot("crash", [])], tmp_path)
    assert [r["class"] for r in crashed.extra["iterations"]] == ["crash"]
    for c in CLASSES:  # the documented classes are always there, for tables that line up
        assert f"class:{c}" in vals


def test_parse_reads_facts_left_on_disk_when_the_step_hung(tmp_path):
    st = STUDIES["powercut"]
    s = spec(iterations=1)
    d = tmp_path / "boot1"
    d.mkdir()
    (d / "pc-recover.json").write_text(json.dumps(facts(phase="verify (mount1)")))
    out = st.parse(s, [boot("killed", []), boot("hang", [("recover", "timeout", None, "", "")])], tmp_path)
    assert out.extra["iterations"][0]["class"] == "hang"


def test_before_boot_hands_the_log_on(tmp_path):
    """The workload's log goes to the next boot's recovery; the recovery's verdict stays in its
    boot, where the next workload's set-up reads it."""
    st = STUDIES["powercut"]
    s = spec()
    (tmp_path / "boot0").mkdir()
    (tmp_path / "boot0" / "pclog.jsonl").write_text("L")
    st.before_boot(s, 1, tmp_path)
    assert (tmp_path / "boot1" / "prev-pclog.jsonl").read_text() == "L"
    assert not (tmp_path / "boot1" / "pclog.jsonl").exists()
    st.before_boot(s, 2, tmp_path)  # boot1 wrote no log (its workload never started): nothing stale
    assert not (tmp_path / "boot2" / "prev-pclog.jsonl").exists()


def test_badblocks_noticed_ignores_statistics_lines():
    from flashbed.studies.badblocks import noticed
    quiet = ("[1.6] ubi0: min./max. I/O unit sizes: 2048/2048, sub-page size 512\n"
             "[1.6] ubi0: good PEBs: 504, bad PEBs: 8, corrupted PEBs: 0\n"
             "[1.6] ubi0: available PEBs: 0, total reserved PEBs: 504, PEBs reserved for bad PEB handling: 32\n"
             "[1.7] EXT4-fs (dm-0): mounted filesystem r/w with ordered data mode. Quota mode: disabled.")
    assert not noticed(quiet, "ubifs") and not noticed(quiet, "ext4")
    assert noticed(quiet + "\n[1.8] ubi0: fixable bit-flip detected at PEB 172", "ubifs")
    assert noticed("[2.0] EXT4-fs error (device dm-0): ext4_find_entry:1570: inode #2: comm cat: reading directory "
                   "lblock 0", "ext4")
    assert not noticed("[2.0] Buffer I/O error on dev dm-0, logical block 9", "ext4")


def test_corruption_iteration_outcomes():
    from flashbed.studies.corruption import classify_iteration
    ok = [("dm-create", "ok", 0, "", ""), ("mkfs", "ok", 0, "", ""), ("mount", "ok", 0, "", ""),
          ("arm", "ok", 0, "", ""), ("work", "ok", 0, '{"rounds": 3, "ro": false}', "")]
    tail = [("umount", "ok", 0, "", ""), ("dm-remove", "ok", 0, "", ""), ("remount", "ok", 0, "", ""),
            ("inspect", "ok", 0, '{"counts": {"intact": 1}, "ro": false, "probe": "ok"}', ""),
            ("umount2", "ok", 0, "", "")]
    assert classify_iteration(boot("done", ok + tail + [("fsck", "ok", 0, "", "")]), True)[0] == "mounts"
    assert classify_iteration(boot("done", ok + tail + [("fsck", "failed", 4, "", "")]), True)[0] == "needs-fsck"
    assert classify_iteration(boot("done", ok + tail[:2] + [("remount", "failed", 32, "", "")]), True)[0] \
        == "unmountable"
    assert classify_iteration(boot("hang", ok + [("umount", "hang", None, "", "")]), True)[0] == "hang"
    ro = ok[:-1] + [("work", "ok", 0, '{"rounds": 2, "ro": true}', "")]
    assert classify_iteration(boot("done", ro + tail), True)[0] == "read-only"
    assert classify_iteration(boot("step-failed", ok[:1] + [("mkfs", "failed", 1, "", "")]), True)[0] == "error"


def test_nandsim_faults_are_seeded_and_per_iteration():
    from flashbed.studies.badblocks import nand_faults
    a = nand_faults("badblocks", 7, 512, 64)
    assert a == nand_faults("badblocks", 7, 512, 64) != nand_faults("badblocks", 8, 512, 64)
    blocks = [int(b) for b in a["badblocks"].split(",")]
    assert len(blocks) == 8 and all(2 <= b < 512 for b in blocks)
    assert all(":" in x for x in nand_faults("weakblocks", 1, 512, 64)["weakblocks"].split(","))
    assert nand_faults("bitflips", 1, 512, 64, bitflips=3) == {"bitflips": "3"}


def test_badblocks_study_passes_faults_to_nandsim_per_boot(tmp_path):
    from flashbed.lab.boundary import Nandsim
    st = STUDIES["badblocks"]
    dev = presets.load_spec("nand-slc-256m@64M")
    v = variants.parse("ubifs", dev)
    s = CellSpec(key=CellKey(dev.label, "ubifs", "badblocks", "weakpages"), device=dev, variant=v,
                 params=st.params(fault="weakpages", iterations=2), seed=1)
    base = Nandsim(id_bytes=(1, 2))
    st.before_boot(s, 0, tmp_path)
    first = st.nandsim(s, base)
    st.before_boot(s, 1, tmp_path)
    second = st.nandsim(s, base)
    assert "weakpages" in first.extra and first.extra != second.extra
    assert any(a.startswith("nandsim.weakpages=") for a in first.cmdline())
    assert st.nandsim(s, None) is None


def test_corruption_cases_and_tables():
    st = STUDIES["corruption"]
    dev = presets.load_spec("plain-file@256M")
    prof = st.params(modes=["after", "alternate"], features=["corrupt", "drop"], corrupt_after=10, big_mb=30,
                     many_count=30, many_mb=1)
    names = [c for c, _ in st.cases(prof, dev)]
    assert names[:4] == ["after-10s one-30MB", "after-10s many-1MB", "1s-on-1s-off one-30MB",
                         "1s-on-1s-off many-1MB"]
    assert names[4] == "after-10s one-30MB drop" and len(names) == 8
    params = dict(st.cases(prof, dev))
    s = CellSpec(key=CellKey(dev.label, "ext4", "corruption", names[0]), device=dev,
                 variant=variants.parse("ext4", dev), params=dataclasses.replace(params[names[0]], iterations=2),
                 seed=1)
    boots = st.boots(s, Path("/nonexistent"))
    assert len(boots) == 2
    arm = next(x for x in boots[0] if x.name == "arm")
    assert "flakey ${FLASHBED_DEV} 0 10 10000000 5 corrupt_bio_byte 1 w 0 0" in arm.cmd
    drop = CellSpec(key=s.key, device=dev, variant=s.variant,
                    params=dataclasses.replace(params[names[7]], iterations=1))
    assert "1 1 1 drop_writes" in next(x for x in st.boots(drop, Path("/x"))[0] if x.name == "arm").cmd


def test_a_workload_that_met_the_cut_device_counts_as_cut(tmp_path):
    st = STUDIES["powercut"]
    s = spec(iterations=1)
    ok = json.dumps(facts())
    w = boot("step-failed", [("prepare", "ok", 0, "{}", ""), ("cut-power-in", "ok", 0, "null", ""),
                             ("work", "failed", 1, "", "OSError: [Errno 30] Read-only file system: 'f1'")])
    out = st.parse(s, [w, boot("done", [("recover", "ok", 0, ok, "")])], tmp_path)
    assert out.extra["iterations"][0]["class"] == "clean"
    w2 = boot("step-failed", [("work", "failed", 1, "", "ValueError: bug")])
    out = st.parse(s, [w2, boot("done", [("recover", "ok", 0, ok, "")])], tmp_path)
    assert out.extra["iterations"][0]["class"] == "error"


def test_badblocks_raw_first_mount_failing_is_unmountable_not_error():
    st = STUDIES["badblocks"]
    dev = presets.load_spec("nand-slc-256m@64M")
    s = CellSpec(key=CellKey(dev.label, "jffs2", "badblocks", "bitflips"), device=dev,
                 variant=variants.parse("jffs2", dev), params=st.params(fault="bitflips", iterations=1), seed=1)
    b = boot("step-failed", [("mkfs", "ok", 0, "", ""), ("mount", "failed", 32, "", "can't read superblock")])
    assert st._classify(b, s)[0] == "unmountable"
    b = boot("step-failed", [("mkfs", "failed", 1, "", "no")])
    assert st._classify(b, s)[0] == "error"


def test_ack_timing_sets_the_acknowledgements_against_the_cut(tmp_path):
    from flashbed.studies.powercut import ack_timing
    assert ack_timing(tmp_path) == {}  # an older run: nothing to say
    (tmp_path / "cut.json").write_text(json.dumps({"host_wall": 1000.0, "emulator": None}))
    (tmp_path / "pclog.jsonl").write_text(
        '{"e":"intent","n":1}\n{"e":"ack","n":1,"t":999.9}\n{"e":"ack","n":2,"t":1000.002}\n{"e":"ack","n')
    got = ack_timing(tmp_path)
    assert got["acks_after_cut"] == 1 and got["last_ack_ms"] == pytest.approx(-2.0)


def test_raw_nand_reattach_uses_the_devices_vid_header_offset(tmp_path):
    # nand-2g-4k has no sub-pages: UBI's VID header sits at 4096, and an attach
    # without -O 4096 fails ("bad VID header offset 4096, expected 1024")
    s = spec("ubifs", "nand-2g-4k@128M", iterations=2)
    cmds = " ".join(step.cmd for boot in STUDIES["powercut"].boots(s, tmp_path) for step in boot)
    assert "ubiattach" in cmds and "ubiattach -m 1 -d 0\"" not in cmds
    assert cmds.count("-O 4096") >= 3  # make + one re-attach per iteration
    dev = presets.load_spec("nand-2g-4k@128M")
    b = CellSpec(key=CellKey(dev.label, "ubifs", "badblocks", "badblocks"), device=dev,
                 variant=variants.parse("ubifs", dev),
                 params=STUDIES["badblocks"].params(fault="badblocks", iterations=1), seed=1)
    steps = [step.cmd for boot in STUDIES["badblocks"].boots(b, tmp_path) for step in boot]
    assert all("-O 4096" in c for c in steps if c.startswith("ubiattach"))


def test_badblocks_flips_reads_through_dm_flakey_and_an_image_is_read_only_by_design(tmp_path):
    """Case flips (asked for with block_cases): the files written through a plain mapping, then
    dm-flakey hands every read request, with the set chance, back with one byte changed; a
    read-only image's refused probe write is not a read-only outcome."""
    st = STUDIES["badblocks"]
    dev = presets.load_spec("plain-file@256M")
    p = st.params(block_cases=["dust", "flips"], read_corrupt=2.5, iterations=1)
    assert [c for c, _ in st.cases(p, dev)] == ["dust", "flips"]
    assert [c for c, _ in st.cases(st.params(), dev)] == ["dust"]  # the default, as before
    flips = dataclasses.replace(p, fault="flips")
    s = CellSpec(key=CellKey(dev.label, "squashfs+zstd", "badblocks", "flips"), device=dev,
                 variant=variants.parse("squashfs+zstd", dev), params=flips, seed=1)
    steps = {x.name: x.cmd for x in st.boots(s, tmp_path)[0]}
    assert "linear ${FLASHBED_DEV} 0" in steps["dm-create"] and "place" not in steps
    assert "flakey ${FLASHBED_DEV} 0 0 1 2 random_read_corrupt 25000000" in steps["enable"]
    assert steps["mount-bad"] == "mount -t squashfs -o ro /dev/mapper/fbflips /mnt"
    assert "mksquashfs /tmp/bbtree" in steps["mkfs"] and "of=/dev/mapper/fbflips" in steps["mkfs1"]
    inspect = json.dumps({"ro": True, "probe": "EROFS", "counts": {"intact": 8}})
    b = boot("done", [("mount-bad", "ok", 0, "", ""), ("inspect", "ok", 0, inspect, "")])
    assert st._classify(b, s)[0] == "mounts"
    ext4 = dataclasses.replace(s, variant=variants.parse("ext4", dev))
    assert st._classify(b, ext4)[0] == "read-only"


def test_badblocks_on_yaffs2_waits_for_its_daemon_and_reads_its_log(tmp_path):
    """YAFFS2 runs in user space: its unmount waits for the daemon's checkpoint before the
    next mount starts another daemon on the same flash, and what it met (bad blocks, the
    ECC's verdicts, failed programs and erases) is in the daemon's log beside the kernel's."""
    st = STUDIES["badblocks"]
    dev = presets.load_spec("nand-slc-256m@64M")
    s = CellSpec(key=CellKey(dev.label, "yaffs2", "badblocks", "bitflips"), device=dev,
                 variant=variants.parse("yaffs2", dev), params=st.params(fault="bitflips", iterations=1), seed=1)
    steps = {step.name: step.cmd for step in st.boots(s, tmp_path)[0]}
    assert "pid" in steps["umount"] and "/proc/" in steps["umount"]  # waits for the daemon to exit
    assert "/proc/" in steps["umount-bad"]
    assert "yaffs2.log" in steps["reattach0"] and "dmesg -C" in steps["reattach0"]
    assert steps["kmsg"].startswith("dmesg;") and "yaffs2.log" in steps["kmsg"]
    from flashbed.studies.badblocks import noticed
    log = "[1.2] fuse: init\nyaffs: **>> yaffs write required 2 attempts\n"
    assert not noticed(log, "fuse.yaffs2")
    assert noticed(log + "yaffs: page 912: bit flips corrected by ECC\n", "fuse.yaffs2")
    assert noticed(log + "yaffs: block 17 marked bad\n", "fuse.yaffs2")
    mount = json.dumps({"event": "mount", "mount_s": 0.01, "bad_blocks": 8})
    b = boot("done", [("mkfs", "ok", 0, "", ""), ("mount", "ok", 0, mount, ""), ("write", "ok", 0, "", ""),
                      ("umount", "ok", 0, "", ""), ("reattach0", "ok", 0, "", ""),
                      ("mount-bad", "ok", 0, "yaffs: x\n" + mount, ""),
                      ("inspect", "ok", 0, '{"counts": {"intact": 8}, "ro": false, "probe": "ok"}', ""),
                      ("umount-bad", "ok", 0, "", ""), ("kmsg", "ok", 0, log, "")])
    it = st.parse(s, [b], tmp_path).extra["iterations"][0]
    assert it["outcome"] == "mounts" and it["noticed"] is False
    assert it["daemon"] == {"bad_blocks_first_mount": 8, "bad_blocks_mount_bad": 8}


def test_a_virtual_time_iteration_names_the_command_that_repeats_it():
    from flashbed.studies.powercut import repeat_command
    s = dataclasses.replace(spec(device="emmc-8g@128M", max_files=9), clock="virtual", kernel="7.3")
    cmd = repeat_command(s, 2)
    assert cmd.startswith("flashbed run --study powercut --device emmc-8g@128M --fs ext4 --clock virtual --seed 9 "
                          "--kernel 7.3 ")
    # the same first three cuts: the cell with three iterations, the last being iteration 2
    assert "--set powercut.iterations=3" in cmd and "--set powercut.modes=async" in cmd
    assert "--set powercut.max_files=9" in cmd and "--set powercut.cut_max=1.0" in cmd
    assert "max_file=" not in cmd  # defaults stay out
    assert cut_points(9, 3, 0.5, 1.0) == cut_points(9, 4, 0.5, 1.0)[:3]


def test_the_failed_virtual_time_iterations_are_listed_with_their_commands():
    from types import SimpleNamespace
    key = CellKey("emmc-8g@128M", "ext4", "powercut", "async")
    its = [{"k": 0, "class": "recovered", "why": "", "repeat": "flashbed run A"},
           {"k": 1, "class": "data-loss", "why": "f1 truncated", "repeat": "flashbed run B"},
           {"k": 2, "class": "data-loss", "why": "real time: no command"}]
    repro = STUDIES["powercut"].reproducers("run1", SimpleNamespace(key=key, extra={"iterations": its}))
    assert [(r.item, r.outcome, r.why, r.command) for r in repro] == \
        [("iteration 1", "data-loss", "f1 truncated", "flashbed run B")]
