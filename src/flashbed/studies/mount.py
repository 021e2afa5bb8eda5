"""`mount`: time to mount at a fill level, after a clean unmount and after an
unclean stop (1 MB written, then power cut).

Block devices: the unclean stop is an emulator power cut and a new lab boot.
A real device has no power switch: there (as on a plain file) the unclean stop
is the lab being killed, a kernel crash; the device keeps what it acknowledged.
Raw NAND (UBIFS): UBI's debugfs power-cut emulation in the same boot, then
detach and re-attach; UBI attach and UBIFS mount are timed apart (attach
scans every erase block, so it grows with the device; UBIFS mount should not).
YAFFS2 (in user space, through FUSE): the mount figure is yaffs_mount's own
time, as the daemon measures it (FUSE start-up apart, as `startup`); a clean
mount restores YAFFS2's checkpoint, and one more ignores it (`mount_scan`:
the full scan); the unclean stop is the daemon killed after a 1 MB fsynced
write, between two NAND operations: no checkpoint, so the next mount scans.
Read-only images (squashfs, erofs): an image holding the fill level's share of
the device in the same 1 MB files, written to the device, mounted cold; nothing
writes to it, so there is no unclean reboot (n/a).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..lab.boundary import BootResult, Step
from ..lab.guest.protocol import Call
from .base import (
    MNT,
    TOOL,
    Case,
    CellSpec,
    Outcome,
    Study,
    drop_caches,
    first_failure,
    m,
    make_and_mount,
    mount,
    passed,
    tree_on_device,
    umount,
)
from .params import param
from .views import Axis, Bars, CaseLabel, Curves

UBI_DBG = "/sys/kernel/debug/ubi/ubi0"
REBOOTS = ("clean", "unclean")  # after a clean unmount, after a power cut
# a measurement's case: device size, fill level, reboot ("256MiB fill50 clean")
LABEL = CaseLabel("{size:mib} fill{fill:int} {reboot:word}")


class Mount(Study):
    name = "mount"
    title = "Mount time vs size and fill"
    description = "mount time vs fill, clean and after a power cut"
    order = 70
    primary_metric = "mount"
    device_stats = False
    runs_read_only = True
    figures = (Curves(LABEL, axes=(Axis("fill", "fill level", "fill (%)", "{} % full"),
                                   Axis("size", "device size", "device size (MB)", "{} MB device", log2=True)),
                      panels="reboot", panel_values=REBOOTS, panel_words="{metric}, {value} reboot",
                      metrics=("attach", "mount"), title="Mount time", fallback=Bars("bars", (), "Mount time")),)

    @dataclass(frozen=True)
    class Params:
        fills: tuple[int, ...] = param((0, 25, 50, 75), unit="%", low=0, high=100, help="fill levels, one cell each")
        fill: int = param(0, unit="%", low=0, high=100, per_case="fills")

    def cases(self, params, device):
        return [Case(f"fill{pct}", replace(params, fill=pct)) for pct in params.fills]

    def label(self, spec: CellSpec, clean: bool) -> str:
        return LABEL.format(size=spec.device.capacity >> 20, fill=spec.params.fill, reboot=REBOOTS[0 if clean else 1])

    def _fill(self, spec: CellSpec) -> list[Step]:
        pct = spec.params.fill
        return [Step("fill", f"{TOOL} fill {MNT}/fill --percent {pct} --seed {spec.seed}", timeout=7200)] if pct else []

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        v = spec.variant
        if v.base.fstype == "ubifs":
            return [self._ubi_boot(spec)]
        if v.read_only:
            return [self._image_boot(spec)]
        if v.base.mounting.cut_cmd(MNT):
            return [self._daemon_boot(spec)]
        first = make_and_mount(v) + self._fill(spec) + umount(v) + [drop_caches()] + mount(v, "mount-clean")
        if v.base.fstype == "jffs2":
            return [first + umount(v, "umount-clean")]  # no power-cut emulation below JFFS2
        first += [
            Step("write-1MB", f"dd if=/dev/urandom of={MNT}/unclean bs=1M count=1 conv=fsync status=none",
                 timeout=600),
            Step("cut-power", host=Call.CUT_POWER),  # the lab is killed here
        ]
        return [first, mount(v, "mount-unclean") + umount(v, "umount-unclean")]

    def _image_boot(self, spec: CellSpec) -> list[Step]:
        v = spec.variant
        tree = "fill-tree"  # in the run directory: host disk, however large the device
        size = spec.device.capacity * spec.params.fill // 100
        return [Step("fill", f"{TOOL} fill {tree} --bytes {size} --seed {spec.seed}", timeout=7200),
                *tree_on_device(v, tree), Step("rm-tree", f"rm -rf {tree}", timeout=600),
                *umount(v), drop_caches(), *mount(v, "mount-clean"), *umount(v, "umount-clean")]

    def _daemon_boot(self, spec: CellSpec) -> list[Step]:
        """A filesystem in user space (YAFFS2's daemon): a clean mount from what its unmount saved,
        one that ignores it (a scan), and one after its daemon was killed, all in one boot."""
        v = spec.variant
        mounting = v.base.mounting
        return make_and_mount(v) + self._fill(spec) + umount(v) + [drop_caches()] + mount(v, "mount-clean") + \
            umount(v, "umount-clean") + [
                drop_caches("drop-caches-scan"),
                Step("mount-scan", mounting.scan_mount_cmd(v.device_path(), MNT), timeout=600),
                Step("write-1MB", f"dd if=/dev/urandom of={MNT}/unclean bs=1M count=1 conv=fsync status=none",
                     timeout=600),
                Step("cut-daemon", mounting.cut_cmd(MNT), timeout=120),
                drop_caches("drop-caches-cut"),
            ] + mount(v, "mount-unclean") + umount(v, "umount-unclean")

    def _ubi_boot(self, spec: CellSpec) -> list[Step]:
        v = spec.variant
        return make_and_mount(v) + self._fill(spec) + [
            Step("umount", f"umount {MNT}", timeout=600),
            Step("detach", "ubidetach -d 0", timeout=600),
            drop_caches(),
            Step("attach-clean", v.ubi_attach_cmd(), timeout=600),
            Step("mount-clean", f"mount -t ubifs ubi0:flashbed {MNT}", timeout=600),
            Step("write-1MB", f"dd if=/dev/urandom of={MNT}/unclean bs=1M count=1 conv=fsync status=none",
                 timeout=600),
            # UBI's power-cut emulation: the 2nd or 3rd EC/VID header write (mask 3
            # = both kinds) fails as if power went, and UBIFS stops writing; the
            # 4 MB write maps enough new erase blocks to reach it
            Step("arm-power-cut", f"echo 1 > {UBI_DBG}/tst_emulate_power_cut_min && "
                                  f"echo 2 > {UBI_DBG}/tst_emulate_power_cut_max && "
                                  f"echo 3 > {UBI_DBG}/tst_emulate_power_cut", timeout=60),
            Step("write-cut", f"dd if=/dev/urandom of={MNT}/cut bs=64k count=64 conv=fsync status=none",
                 timeout=600, may_fail=True),
            Step("umount-cut", f"umount {MNT}", timeout=600, may_fail=True),
            Step("detach-cut", "ubidetach -d 0", timeout=600),
            drop_caches("drop-caches-cut"),
            Step("attach-unclean", v.ubi_attach_cmd(), timeout=600),
            Step("mount-unclean", f"mount -t ubifs ubi0:flashbed {MNT}", timeout=600),
            Step("umount-unclean", f"umount {MNT}", timeout=600),
        ]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        out = []
        all_steps = {s.name: s for b in boots for s in b.steps}

        def sec(name):
            s = all_steps.get(name)
            return s.seconds if s is not None and s.status.ok else None

        mounting = spec.variant.base.mounting

        def yaffs_mount(name):
            """The daemon's own yaffs_mount time (its JSON line on the step's stdout)."""
            s = all_steps.get(name)
            if s is None or not s.status.ok:
                return None
            event = mounting.mount_event(s.stdout)
            return event["mount_s"] if event else None

        daemon = not mounting.in_kernel
        for clean in (True, False):
            case = self.label(spec, clean)
            step = "mount-clean" if clean else "mount-unclean"
            if daemon:
                out += m(case, "mount", yaffs_mount(step), "s")
                out += m(case, "startup", sec(step), "s")
                if clean:
                    out += m(case, "mount_scan", yaffs_mount("mount-scan"), "s")
            else:
                out += m(case, "mount", sec(step), "s")
            out += m(case, "attach", sec("attach-clean" if clean else "attach-unclean"), "s")
        err = first_failure(boots, allowed={"write-cut", "umount-cut"})
        cut = all_steps.get("write-cut")
        if cut is not None and cut.status.ok:
            # the emulated cut never fired: the "unclean" figure would be a clean one
            out = [x for x in out if not x.case.endswith("unclean")]
            err = err or "UBI power-cut emulation did not fire during the 4 MB write"
        c, u = (yaffs_mount("mount-clean"), yaffs_mount("mount-unclean")) if daemon else \
            (sec("mount-clean"), sec("mount-unclean"))
        head = ", ".join(filter(None, [f"clean {c * 1000:.0f} ms" if c is not None else "",
                                       f"unclean {u * 1000:.0f} ms" if u is not None else ""]))
        a = sec("attach-clean")
        if a is not None:
            head = f"attach {a * 1000:.0f} ms, " + head
        return Outcome(out, head or "incomplete", status=passed(out and not err), error=err)
