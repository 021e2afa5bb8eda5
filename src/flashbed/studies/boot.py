"""`boot`: a ~15 MB rootfs-like tree; cold mount, then read the files an init
reads. Mount and read are timed apart; the total is the boot-time figure.

The cold mount is read-only (`-o ro`), as a boot partition is mounted and as the
kernel mounts a root filesystem before init remounts it: the writable filesystems
are compared with the read-only images (squashfs, erofs) on the same terms. An
image is built from the same tree and written to the device (its time: `flash`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..lab.boundary import BootResult, Step
from .base import (
    MNT,
    TOOL,
    CellSpec,
    Outcome,
    Study,
    drop_caches,
    first_failure,
    m,
    mount,
    passed,
    seconds,
    stats_reset,
    stats_take,
    step_json,
    tree_on_device,
    umount,
)
from .params import param


class Boot(Study):
    name = "boot"
    title = "Boot: mount and read the files an init reads"
    description = "cold mount + read of an init's files from a ~15 MB rootfs tree"
    order = 80
    primary_metric = "seconds"
    runs_read_only = True

    @dataclass(frozen=True)
    class Params:
        mb: int = param(15, unit="MB", low=1, help="the root filesystem tree")
        # what an image's compressor finds: a real root filesystem compresses about 2:1
        # (binaries, libraries and text); random bytes would make every compressor useless
        text: int = param(70, unit="%", low=0, high=100, help="share of the tree that is text-like (compressible), "
                                             "the rest random bytes")

    def boots(self, spec: CellSpec, run_dir: Path) -> list[list[Step]]:
        v = spec.variant
        return [[
            Step("gen-rootfs", f"{TOOL} gen-rootfs /tmp/rootfs $FLASHBED_RUN/init-files.txt "
                               f"--mb {spec.params.mb} --text {spec.params.text} --seed {spec.seed}", timeout=600),
            *tree_on_device(v, "/tmp/rootfs"),
            # the image size a read-only partition needs: space the filesystem uses for the tree
            Step("used", v.used_cmd(MNT)),
            *umount(v), drop_caches(), stats_reset("boot"),
            *mount(v, "mount-cold", ro=True),
            Step("read", f"{TOOL} read-list {MNT} $FLASHBED_RUN/init-files.txt", timeout=3600),
            stats_take("boot"),
            *umount(v, "umount-end"),
        ]]

    def parse(self, spec: CellSpec, boots: list[BootResult], run_dir: Path) -> Outcome:
        mnt = sum(s.seconds for s in boots[0].steps if s.name.startswith("mount-cold") and s.status.ok) or None
        rd = step_json(boots[0], "read")
        read_s = rd["seconds"] if rd else None
        total = mnt + read_s if mnt is not None and read_s is not None else None
        out = m("boot", "mount", mnt, "s") + m("boot", "read", read_s, "s") + m("boot", "seconds", total, "s")
        used = b.stdout.strip() if (b := boots[0].step("used")) and b.status.ok else ""
        out += m("boot", "used", int(used) if used.isdigit() else None, "bytes")
        out += m("boot", "flash", seconds(boots[0], "flash"), "s")  # an image written to the device
        err = first_failure(boots)
        return Outcome(out, f"mount {mnt * 1000:.0f} ms + read {read_s * 1000:.0f} ms" if total else "incomplete",
                       extra={"read_files": rd["files"] if rd else None, "read_bytes": rd["bytes"] if rd else None},
                       status=passed(total and not err), error=err)
