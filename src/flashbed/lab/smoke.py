"""`flashbed lab smoke`: every catalogue filesystem made, used, checked, verified.

One lab boot per filesystem (a hang or crash in one cannot hide the others),
two boots at a time on a 2-core host. A read-only filesystem gets the same tree
as an image: built from it, written to the device, mounted, checked, verified.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import filesystems as fscat
from .. import variants
from ..executors import LocalExecutor
from ..progress import Progress
from ..shellwords import TOOLS
from .boundary import BlockDevice, BootResult, BootSpec, Lab, Nandsim, Step
from .kernel import lab_kernel
from .labs import UmlLab

GUEST_TOOL = f"{TOOLS}/fbtool.py"
PY = "/usr/bin/python3 -S -I"
MNT = "/mnt"
BLOCK_DEVICE_BYTES = 512 * 1024 * 1024  # xfs needs 300 MB; sparse, so cheap
# 256 MiB SLC NAND, 2 KiB pages, 128 KiB erase blocks (ST NAND02G-class ID)
SMOKE_NAND = Nandsim(id_bytes=(0x20, 0xAA, 0x00, 0x15))


@dataclass
class SmokeResult:
    fs: str
    passed: bool
    status: str
    failed_step: str
    detail: str
    boot_seconds: float | None
    total_seconds: float
    used_bytes: int | None
    console_log: str


def smoke_steps(fs: fscat.Filesystem) -> list[Step]:
    tool = f"{PY} {GUEST_TOOL}"
    manifest = "$FLASHBED_RUN/manifest.json"
    if fs.media == "block":
        dev = "/dev/ubda"
        make = [Step("mkfs", fs.make_cmd(dev), timeout=180)]
        mount_dev = dev
    else:
        make = [Step(f"mkfs{i}", c, timeout=180) for i, c in enumerate(fscat.raw_make_cmds(fs))]
        mount_dev = fscat.raw_device(fs)
    check = fs.check_cmd("/dev/ubda") if fs.media == "block" else None

    def write(where: str) -> str:  # not str.format: the tool's path is ${FLASHBED_TOOLS}/..., braces and all
        return f"{tool} write-tree {where} {manifest} --dirs 20 --files 200 --big-mb 24 --seed 7"

    if fs.read_only:
        # the tree in the guest's memory, then an image of it on the device
        build, flash = variants.FsVariant(fs.name, fs).image_cmds("/tmp/tree")
        steps = [Step("write", write("/tmp/tree"), timeout=300), Step("mkfs", build, timeout=300),
                 Step("flash", flash, timeout=300), Step("mount", fs.mount_cmd(mount_dev, MNT), timeout=60)]
    else:
        steps = [*make, Step("mount", fs.mount_cmd(mount_dev, MNT), timeout=60),
                 Step("write", write(MNT), timeout=300), Step("sync", "sync", timeout=120)]
    steps += [
        Step("used", f"df -B1 --output=used {MNT} | tail -n 1", timeout=30),
        Step("umount", fs.umount_cmd(MNT), timeout=120),
    ]
    if check:
        steps.append(Step("fsck", check, timeout=300))
    steps += [
        Step("remount", fs.mount_cmd(mount_dev, MNT), timeout=60),
        # cold cache: verification must read from the device, not memory
        Step("drop-caches", "echo 3 > /proc/sys/vm/drop_caches", timeout=30),
        Step("verify", f"{tool} verify-tree {MNT} {manifest}", timeout=300),
        Step("final-umount", fs.umount_cmd(MNT), timeout=120),
    ]
    return steps


def smoke_one(name: str, on_part, *, out: Path, lab: Lab) -> SmokeResult:
    fs = fscat.get(name)
    from .. import writeguard
    run_dir = writeguard.make_sub(out, name)  # in the directory the guard allowed, no symlink followed
    disks: tuple[BlockDevice, ...] = ()
    nand = None
    if fs.media == "block":
        img = run_dir / "device.img"
        # a link put in its place is replaced, never followed (the image is truncated to its size)
        img.unlink(missing_ok=True)
        fd = os.open(img, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.truncate(BLOCK_DEVICE_BYTES)
        disks = (BlockDevice(img),)
    else:
        nand = SMOKE_NAND
    res = lab.boot(BootSpec(run_dir=run_dir, steps=tuple(smoke_steps(fs)), disks=disks, nandsim=nand,
                            timeout=900))
    for d in disks:
        d.path.unlink(missing_ok=True)  # keep the logs, not 512 MB images
    return _judge(name, res)


def _judge(name: str, res: BootResult) -> SmokeResult:
    failed = next((s for s in res.steps if not s.status.ok), None)
    used = res.step("used")
    used_bytes = int(used.stdout.strip()) if used and used.status.ok and used.stdout.strip().isdigit() else None
    if failed:
        detail = (failed.stderr or failed.stdout).strip().splitlines()
        detail_s = f"{failed.status} (rc {failed.rc}): {detail[-1] if detail else ''}"
    else:
        detail_s = res.error
    return SmokeResult(
        fs=name, passed=res.ok and failed is None, status=res.status,
        failed_step=failed.name if failed else "", detail=detail_s[:300],
        boot_seconds=res.boot_seconds, total_seconds=round(res.total_seconds, 2),
        used_bytes=used_bytes, console_log=res.console_log,
    )


def run_smoke(names: list[str], out: Path, jobs: int | None = None, kernel_name: str | None = None,
              time_travel: bool = False) -> list[SmokeResult]:
    """`time_travel`: in virtual time (the kernel's time-travel flavour; the image
    files' requests complete at once in guest time)."""
    fscat.check_host_tools(names)
    kernel = lab_kernel(kernel_name, time_travel=time_travel)
    jobs = jobs or min(len(names), os.cpu_count() or 2)
    results: dict[str, SmokeResult] = {}

    def finished(name: str, r: SmokeResult) -> str:
        results[name] = r
        return (f"PASS {name}: boot {r.boot_seconds:.2f}s, total {r.total_seconds:.1f}s, used {r.used_bytes} B"
                if r.passed else f"FAIL {name}: step '{r.failed_step}' {r.detail} (console: {r.console_log})")

    LocalExecutor(jobs).run(functools.partial(smoke_one, out=out, lab=UmlLab(kernel)), names, str, finished,
                            Progress(len(names), "filesystems"))
    ordered = [results[n] for n in names]
    summary = {"kernel": asdict(kernel), "results": [asdict(r) for r in ordered]}
    from .. import writeguard
    writeguard.write_into(out, "smoke.json", json.dumps(summary, indent=2))
    return ordered


def print_table(results: list[SmokeResult], stream=sys.stdout) -> None:
    print(f"{'filesystem':16} {'result':6} {'boot s':>7} {'total s':>8} {'used KiB':>9}  detail", file=stream)
    for r in results:
        boot_s = f"{r.boot_seconds:.2f}" if r.boot_seconds is not None else "-"
        used = f"{r.used_bytes // 1024}" if r.used_bytes is not None else "-"
        print(f"{r.fs:16} {'PASS' if r.passed else 'FAIL':6} {boot_s:>7} {r.total_seconds:>8.1f} {used:>9}  "
              f"{'' if r.passed else r.failed_step + ': ' + r.detail}", file=stream)
    boots = sorted(r.boot_seconds for r in results if r.boot_seconds is not None)
    if boots:
        print(f"boot to agent-ready: median {boots[len(boots) // 2]:.2f}s over {len(boots)} boots",
              file=stream)

