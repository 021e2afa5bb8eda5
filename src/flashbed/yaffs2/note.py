"""What a report says beside a YAFFS2 figure: the path is not the published one."""

from __future__ import annotations

from .. import variants
from ..errors import FlashbedError

# the figures of these studies hardly cross FUSE: comparable with the in-kernel YAFFS2's
COMPARABLE = {
    "mount": "its mount figure is yaffs_mount's own time, taken inside the daemon before FUSE starts, and is "
             "dominated by NAND reads: comparable with the in-kernel YAFFS2's mount time (`startup`, the whole "
             "mount command with the daemon's start and the FUSE mount, is not)",
}


def on_fuse(fs_spec: str) -> bool:
    """Whether a cell's filesystem (variant spec) sits on a filesystem in user space."""
    try:
        return variants.parse(fs_spec).base.fuse_daemon
    except FlashbedError:
        return False


def path_note(study: str) -> str:
    head = ("YAFFS2 is in no Linux kernel: here its core and direct interface (from Debian's u-boot source) run "
            "in user space behind FUSE, while the published YAFFS2 figures come from the in-kernel YAFFS2. ")
    if study in COMPARABLE:
        return head + COMPARABLE[study][0].upper() + COMPARABLE[study][1:] + "."
    return head + ("Every request of this study crosses FUSE (a round trip to the daemon), which the in-kernel "
                   "YAFFS2 does not pay: its figures for yaffs2 and for images on it (`ext2@yaffs2`) are lower "
                   "bounds of the in-kernel ones; `python3 -m flashbed.yaffs2.fusecost` measures the FUSE path "
                   "against tmpfs in the lab.")
