"""The lab kernel on the emulator's FUSE file: filesystems, flushes, power cuts."""
import json

import pytest

from flashbed.devices import presets
from flashbed.devices.session import open_session
from flashbed.lab.boundary import BootSpec, Step
from flashbed.lab.uml import boot

pytestmark = [pytest.mark.lab, pytest.mark.emulator]

MKFS = {"ext4": "mkfs.ext4 -F -q /dev/ubda", "f2fs": "mkfs.f2fs -f -q /dev/ubda"}
FSCK = {"ext4": "e2fsck -fy /dev/ubda", "f2fs": "fsck.f2fs -f -y /dev/ubda"}


@pytest.mark.parametrize("fs", ["ext4", "f2fs"])
@pytest.mark.parametrize("preset", ["ideal@256M", "emmc-8g@256M"])
def test_filesystem_survives_a_power_cut_after_fsync(kernel, tmp_path, fs, preset):
    dev = presets.load_spec(preset)
    with open_session(dev, tmp_path / "scratch", pace="none") as s:
        def host(call, args):
            if call == "stats":
                return s.emu.stats()["host"]
            if call == "cut":
                s.cut_power()
                return None
            raise AssertionError(call)

        r = boot(BootSpec(run_dir=tmp_path / "b1", steps=(
            Step("mkfs", MKFS[fs]),
            Step("mount", f"mount -t {fs} /dev/ubda /mnt"),
            Step("write", "head -c 4194304 /dev/urandom > /mnt/kept && sha256sum /mnt/kept > $FLASHBED_RUN/sum "
                          "&& sync /mnt/kept"),
            Step("more", "head -c 4194304 /dev/urandom > /mnt/unsynced"),  # may or may not survive
            Step("stats", host="stats"),
            Step("cut", host="cut"),
        ), disks=s.disks(), timeout=300), kernel, host=host)
        assert [st.status for st in r.steps] == ["ok"] * 6, (r.status, r.error, r.console_log)
        host_stats = json.loads(r.step("stats").stdout)
        assert host_stats["flushes"] > 0  # the guest's fsync reached the device model
        assert host_stats["discards"] > 0  # and so did mkfs's TRIM

        s.restart_if_cut()  # the emulator continues from the cut state
        sum_line = (tmp_path / "b1" / "sum").read_text()
        (tmp_path / "b2").mkdir()
        (tmp_path / "b2" / "sum").write_text(sum_line)
        r2 = boot(BootSpec(run_dir=tmp_path / "b2", steps=(
            Step("fsck", FSCK[fs], may_fail=True),
            Step("mount", f"mount -t {fs} /dev/ubda /mnt"),
            Step("verify", "sha256sum -c $FLASHBED_RUN/sum"),
            Step("umount", "umount /mnt"),
        ), disks=s.disks(), timeout=300), kernel)
        assert r2.ok, (r2.status, r2.error, [(x.name, x.status, x.stderr[-300:]) for x in r2.steps])
        assert r2.step("fsck").rc in (0, 1), r2.step("fsck").stdout[-500:]  # clean or fixed, never failed
