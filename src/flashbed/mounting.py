"""How a filesystem is mounted, unmounted and heard from in the guest: a behaviour of each
catalogue entry (filesystems.Filesystem.mounting).

The kernel's own (`mount -t`, its messages in the kernel log) is every kernel filesystem's.
A filesystem in no kernel brings its own: YAFFS2's FUSE daemon (yaffs2/guest.py) mounts by
starting the daemon, unmounts by waiting for it to exit, speaks in its own log, is cut by
being killed, and reports yaffs_mount's own time. The studies, the variants and the run ask
the behaviour, never which filesystem it is.
"""

from __future__ import annotations

import shlex
from typing import Any

from .shellwords import shell_join

UBI_VOLUME = "flashbed"  # the UBI volume UBIFS is made on


class Mounting:
    """The kernel's: `mount -t FSTYPE`, `umount`, the kernel log."""

    in_kernel = True  # its options, its refusals (the kernel's MTD stack refuses MLC NAND) are the kernel's

    def mount_cmd(self, fs: Any, dev: str, mnt: str, extra: tuple[str, ...] = ()) -> str:
        opts = ",".join([*fs.mount_opts, *extra])
        return shell_join(["mount", "-t", fs.fstype, *(["-o", opts] if opts else []), dev, mnt])

    def umount_cmd(self, mnt: str) -> str:
        return f"umount {shlex.quote(mnt)}"

    def log_cmd(self) -> str:
        """Print what the filesystem said (the kernel log)."""
        return "dmesg"

    def clear_log_cmd(self) -> str:
        return "dmesg -C"

    def raw_device(self, fs: Any, mtd: int, ubi: int) -> str:
        """What its mount takes for raw NAND (MTD partition `mtd`, UBI device `ubi`)."""
        return f"ubi{ubi}:{UBI_VOLUME}" if fs.fstype == "ubifs" else f"mtd{mtd}"

    def ensure(self) -> None:
        """On the host, before a run's cells: what its guest side needs (built at setup)."""

    # -- a power cut of the filesystem alone (None: the lab's death, or the kernel's emulation) --
    def cut_cmd(self, mnt: str) -> str | None:
        return None

    def kill_pidfile(self, mnt: str) -> str:
        """Where the process a power cut kills writes its pid ('': every writer is frozen instead)."""
        return ""

    def cut_umount_cmd(self, mnt: str) -> str | None:
        """How a cut one is detached (None: unmounted as usual)."""
        return None

    def scan_mount_cmd(self, dev: str, mnt: str) -> str | None:
        """A mount that ignores what an unmount saved for the next one (None: it saves nothing)."""
        return None

    def mount_event(self, stdout: str) -> dict | None:
        """What its mount reports of itself (its own mount time) in a mount command's output."""
        return None


KERNEL = Mounting()
