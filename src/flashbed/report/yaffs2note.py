"""What a report says beside a YAFFS2 figure: the path is not the published one."""

from __future__ import annotations

from .. import variants
from ..errors import FlashbedError

# the figures of these studies hardly cross FUSE, or are outcomes, not speeds: what of them is
# comparable with the in-kernel YAFFS2's
COMPARABLE = {
    "mount": "its mount figure is yaffs_mount's own time, taken inside the daemon before FUSE starts, and is "
             "dominated by NAND reads: comparable with the in-kernel YAFFS2's mount time (`startup`, the whole "
             "mount command with the daemon's start and the FUSE mount, is not)",
    "badblocks": "its outcomes are what YAFFS2's unmodified core does with the faults flashbed's MTD driver hands "
                 "it (bad-block marks, failed erases and programs, the ECC's verdicts on each read), as the "
                 "in-kernel YAFFS2's MTD interface hands them: comparable; what YAFFS2 noticed is read from its "
                 "daemon's log, not the kernel's",
    "powercut": "a cut is its daemon killed between two NAND operations, so no page program is torn as a cut on "
                "a real part can tear one: its outcomes are YAFFS2's recovery of whole programs only",
}


def on_fuse(fs_spec: str) -> bool:
    """Whether a cell's filesystem (variant spec) sits on a filesystem in user space."""
    try:
        return not variants.parse(fs_spec).base.mounting.in_kernel
    except FlashbedError:
        return False


def path_note(study: str) -> str:
    head = ("YAFFS2 is in no Linux kernel: here its core and direct interface (from Debian's u-boot source) run "
            "in user space behind FUSE, while the published YAFFS2 figures come from the in-kernel YAFFS2. ")
    if study in COMPARABLE:
        return head + COMPARABLE[study][0].upper() + COMPARABLE[study][1:] + "."
    return head + ("Every request of this study crosses FUSE (a round trip to the daemon), which the in-kernel "
                   "YAFFS2 does not pay: its figures for yaffs2 and for images on it (`ext2@yaffs2`) are lower "
                   "bounds of the in-kernel ones; `python3 -m flashbed.bench.fusecost` measures the FUSE path "
                   "against tmpfs in the lab.")
