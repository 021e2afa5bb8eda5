"""The filesystem catalogue: how each filesystem is made, mounted, checked.

Every entry produces shell commands for the guest; the tools are the host's own
Debian packages, seen by the guest through the read-only hostfs root.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from enum import StrEnum

from .errors import FlashbedError, HostToolMissing
from .mounting import KERNEL, UBI_VOLUME, Mounting
from .shellwords import shell_join
from .yaffs2.guest import DaemonMount

MiB = 1024 * 1024

class Recovery(StrEnum):
    """How a filesystem gets back to a consistent state after a crash (a design fact; the
    crashstates and powercut studies measure how well it does)."""

    JOURNAL = "journal"  # replays a write-ahead log of metadata at mount
    COW = "copy-on-write"  # never overwrites live metadata: the last committed tree is consistent
    LOG = "log-structured"  # rolls forward from the last checkpoint of its log
    FSCK = "fsck"  # nothing of its own: a checker repairs it
    READ_ONLY = "read-only"  # never written after it is made


# Facts the lab does not probe in one boot, with where they are documented (the
# tools' manual pages in Debian's packages): how the filesystem recovers, and
# whether it can be resized while mounted.
FACTS_SOURCE = {
    "ext": "resize2fs(8): grows a mounted ext3/ext4 (online resize), ext2 only unmounted; ext4(5): journal",
    "xfs": "xfs_growfs(8): the filesystem must be mounted to be grown, it cannot shrink; xfs(5): metadata log",
    "btrfs": "btrfs-filesystem(8) resize: grows and shrinks a mounted filesystem; btrfs(5): copy-on-write",
    "f2fs": "resize.f2fs(8): an unmounted device only; mkfs.f2fs(8): log-structured, checkpoints",
    "nilfs2": "nilfs-resize(8): grows and shrinks a mounted filesystem; nilfs(5): log-structured",
    "fat": "dosfstools/exfatprogs ship no resizer and the kernel none; no journal: fsck.vfat(8), fsck.exfat(8)",
    "image": "a read-only image is rebuilt, never resized",
    "ubifs": "UBIFS grows into a larger UBI volume at mount (mtd-utils); journal and wandering trees",
    "jffs2": "JFFS2 spans its MTD partition; log-structured, rebuilt by a scan at mount",
    "yaffs2": "YAFFS2 spans its MTD partition; log-structured: a checkpoint written at unmount, else a scan "
              "of the chunks' tags at mount (yaffs_guts.c)",
}

# UBI volume every UBIFS cell uses; one UBI device per nandsim chip


@dataclass(frozen=True)
class Filesystem:
    """How to make, mount and check one filesystem (a catalogue entry)."""

    name: str
    media: str  # "block": on /dev/ubdX; "mtd": on raw NAND (/dev/mtdN)
    fstype: str  # `mount -t` type: never probed
    mkfs: tuple[str, ...]  # command; the device is appended
    package: str  # Debian package with its tools
    check: tuple[str, ...] | None = None  # read-only check; device appended
    repair: tuple[str, ...] | None = None  # check and fix; device appended
    # fsck exit codes: clean, and (for repair) "errors fixed"
    check_clean: tuple[int, ...] = (0,)
    repair_fixed: tuple[int, ...] = ()
    mount_opts: tuple[str, ...] = ()
    min_size: int = 16 * MiB
    description: str = ""
    # kernel log lines of this filesystem (regex; default: its type), and those that say a
    # mount replayed a journal or log (regex; default: any recover/replay)
    log_prefix: str = ""
    recovery_log: str = ""
    # a read-only image filesystem: `mkfs` builds an image of a tree ("{src}") into a file
    # ("{img}"; "{compress}": the compressor's options, `compress` with "{c}" the compressor
    # given as a variant tag, or none for the tool's default), which is written to the device
    # and mounted read-only; studies that write to the filesystem do not apply to it
    read_only: bool = False
    compressors: tuple[str, ...] = ()
    compress: tuple[str, ...] = ()
    hard_links: bool = True  # link(2) works (FAT and exFAT have none)
    # catalogue facts (FACTS_SOURCE[facts] says where each is documented)
    recovery: Recovery = Recovery.FSCK
    online_resize: str = "no"  # "grow", "grow and shrink", "no"
    facts: str = "fat"
    # how it is mounted, unmounted and heard from (mounting.py): the kernel's, or its own
    # (YAFFS2's FUSE daemon: mounting starts it, unmounting waits for it to exit)
    mounting: Mounting = KERNEL

    @property
    def tools(self) -> tuple[str, ...]:
        cmds = [self.mkfs[0]]
        for c in (self.check, self.repair):
            if c:
                cmds.append(c[0])
        return tuple(dict.fromkeys(cmds))

    # --- shell snippets for the guest -------------------------------------------
    # `dev` may be shellwords.DEV: shell_join leaves it to the guest's shell
    def make_cmd(self, dev: str) -> str:
        return shell_join([*self.mkfs, dev])

    def image_cmd(self, src: str, img: str, compressor: str = "") -> str:
        """Build a read-only image of the tree `src` into the file `img`."""
        comp = [a.format(c=compressor) for a in self.compress] if compressor else []
        args: list[str] = []
        for a in self.mkfs:
            args += comp if a == "{compress}" else [a.format(src=src, img=img)]
        return shlex.join(args)

    def check_cmd(self, dev: str) -> str | None:
        return shell_join([*self.check, dev]) if self.check else None

    def repair_cmd(self, dev: str) -> str | None:
        return shell_join([*self.repair, dev]) if self.repair else None

    def mount_cmd(self, dev: str, mnt: str, extra: tuple[str, ...] = ()) -> str:
        return self.mounting.mount_cmd(self, dev, mnt, extra)

    def umount_cmd(self, mnt: str) -> str:
        return self.mounting.umount_cmd(mnt)

    # where this filesystem says what it met: the kernel log, and a daemon's own log
    def log_cmd(self) -> str:
        return self.mounting.log_cmd()

    def clear_log_cmd(self) -> str:
        return self.mounting.clear_log_cmd()


EXT_RECOVERY = r"recovery complete|orphan|recovering journal"

CATALOGUE: dict[str, Filesystem] = {
    f.name: f
    for f in [
        Filesystem("ext2", "block", "ext2", ("mkfs.ext2", "-F", "-q"), "e2fsprogs",
                   check=("e2fsck", "-f", "-n"), repair=("e2fsck", "-f", "-y"), repair_fixed=(1, 2),
                   description="ext2: no journal", log_prefix=r"EXT2-fs", facts="ext"),
        Filesystem("ext3", "block", "ext3", ("mkfs.ext3", "-F", "-q"), "e2fsprogs",
                   check=("e2fsck", "-f", "-n"), repair=("e2fsck", "-f", "-y"), repair_fixed=(1, 2),
                   description="ext3: ext2 with a journal", log_prefix=r"EXT[34]-fs", recovery_log=EXT_RECOVERY,
                   recovery=Recovery.JOURNAL, online_resize="grow", facts="ext"),
        Filesystem("ext4", "block", "ext4", ("mkfs.ext4", "-F", "-q"), "e2fsprogs",
                   check=("e2fsck", "-f", "-n"), repair=("e2fsck", "-f", "-y"), repair_fixed=(1, 2),
                   description="ext4 with its default journal", log_prefix=r"EXT4-fs", recovery_log=EXT_RECOVERY,
                   recovery=Recovery.JOURNAL, online_resize="grow", facts="ext"),
        Filesystem("ext4-nojournal", "block", "ext4", ("mkfs.ext4", "-F", "-q", "-O", "^has_journal"),
                   "e2fsprogs", check=("e2fsck", "-f", "-n"), repair=("e2fsck", "-f", "-y"),
                   repair_fixed=(1, 2), description="ext4 without its journal", log_prefix=r"EXT4-fs",
                   recovery_log=EXT_RECOVERY, online_resize="grow", facts="ext"),
        # btrfs-progs refuses smaller devices in its default (non-mixed) profile
        Filesystem("btrfs", "block", "btrfs", ("mkfs.btrfs", "-f", "-q"), "btrfs-progs",
                   check=("btrfs", "check", "--readonly"), repair=("btrfs", "check", "--repair", "--force"),
                   min_size=128 * MiB, description="btrfs, copy-on-write", log_prefix=r"BTRFS",
                   recovery_log=r"log replay|replaying log", recovery=Recovery.COW, online_resize="grow and shrink",
                   facts="btrfs"),
        # xfsprogs >= 5.19 refuses filesystems under 300 MB
        Filesystem("xfs", "block", "xfs", ("mkfs.xfs", "-f", "-q"), "xfsprogs",
                   check=("xfs_repair", "-n"), repair=("xfs_repair",),
                   min_size=300 * 1000 * 1000, description="xfs", log_prefix=r"XFS",
                   recovery_log=r"Starting recovery|Ending recovery", recovery=Recovery.JOURNAL,
                   online_resize="grow", facts="xfs"),
        Filesystem("f2fs", "block", "f2fs", ("mkfs.f2fs", "-f", "-q"), "f2fs-tools",
                   check=("fsck.f2fs", "-f", "--dry-run"), repair=("fsck.f2fs", "-f", "-y"), repair_fixed=(1,),
                   min_size=64 * MiB, description="f2fs, log-structured for flash", log_prefix=r"F2FS-fs",
                   recovery_log=r"[Rr]ecover|roll.?forward", recovery=Recovery.LOG, facts="f2fs"),
        # nilfs-tools ships no checker
        Filesystem("nilfs2", "block", "nilfs2", ("mkfs.nilfs2", "-f", "-q"), "nilfs-tools",
                   min_size=64 * MiB, description="nilfs2, log-structured with snapshots", log_prefix=r"NILFS",
                   recovery_log=r"recovery complete|[Rr]ecover", recovery=Recovery.LOG, online_resize="grow and shrink",
                   facts="nilfs2"),
        Filesystem("vfat", "block", "vfat", ("mkfs.vfat",), "dosfstools",
                   check=("fsck.vfat", "-n"), repair=("fsck.vfat", "-a"), repair_fixed=(1,),
                   description="FAT (size-chosen FAT16/FAT32)", log_prefix=r"FAT-fs", hard_links=False),
        Filesystem("exfat", "block", "exfat", ("mkfs.exfat",), "exfatprogs",
                   check=("fsck.exfat", "-n"), repair=("fsck.exfat", "-y"), repair_fixed=(1,),
                   description="exFAT", log_prefix=r"exFAT-fs", hard_links=False),
        # read-only images (boot and system partitions): built from the study's tree, written
        # to the device as a flashing step would, mounted read-only
        Filesystem("squashfs", "block", "squashfs", ("mksquashfs", "{src}", "{img}", "-noappend", "-quiet",
                                                     "-no-progress", "{compress}"), "squashfs-tools",
                   mount_opts=("ro",), min_size=4 * MiB, read_only=True, compressors=("gzip", "lz4", "xz", "zstd"),
                   compress=("-comp", "{c}"), description="squashfs: compressed read-only image (gzip unless given)",
                   log_prefix=r"SQUASHFS|squashfs", recovery=Recovery.READ_ONLY, facts="image"),
        Filesystem("erofs", "block", "erofs", ("mkfs.erofs", "--quiet", "{compress}", "{img}", "{src}"),
                   "erofs-utils", check=("fsck.erofs",), mount_opts=("ro",), min_size=4 * MiB, read_only=True,
                   compressors=("lz4", "lz4hc"), compress=("-z{c}",),
                   description="EROFS: read-only image (uncompressed unless given)", log_prefix=r"erofs|EROFS",
                   recovery=Recovery.READ_ONLY, facts="image"),
        # UBIFS: UBI on the raw NAND, one volume filling it; the kernel formats an
        # empty volume at first mount. mtd-utils in Debian 12 has no fsck.ubifs.
        Filesystem("ubifs", "mtd", "ubifs", ("ubiformat", "-y", "-q"), "mtd-utils",
                   min_size=16 * MiB, description="UBIFS on UBI on raw NAND", log_prefix=r"UBIFS|ubi\d",
                   recovery_log=r"recovery needed|completing recovery|recovery completed", recovery=Recovery.JOURNAL,
                   online_resize="grow", facts="ubifs"),
        # JFFS2 directly on the MTD device; erase with clean markers first
        Filesystem("jffs2", "mtd", "jffs2", ("flash_erase", "-j", "-q"), "mtd-utils",
                   min_size=4 * MiB, description="JFFS2 on raw NAND", log_prefix=r"jffs2|JFFS2",
                   recovery_log=r"^$x",  # never: JFFS2 scans, it has no replay to report
                   recovery=Recovery.LOG, facts="jffs2"),
        # YAFFS2 is in no kernel: its core runs in user space behind FUSE (flashbed.yaffs2).
        # Formatting is erasing; blank flash mounts as an empty YAFFS2.
        Filesystem("yaffs2", "mtd", "fuse.yaffs2", ("flash_erase", "-q"), "mtd-utils",
                   min_size=4 * MiB, description="YAFFS2 on raw NAND (in user space, through FUSE)",
                   log_prefix=r"yaffs", recovery_log=r"^$x", mounting=DaemonMount(),
                   recovery=Recovery.LOG, facts="yaffs2"),
    ]
}

BLOCK = tuple(n for n, f in CATALOGUE.items() if f.media == "block")
READ_ONLY = tuple(n for n, f in CATALOGUE.items() if f.read_only)
RAW = tuple(n for n, f in CATALOGUE.items() if f.media == "mtd")


def get(name: str) -> Filesystem:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise FlashbedError(
            f"unknown filesystem '{name}': choose from {', '.join(CATALOGUE)}"
        ) from None


def by_fstype(fstype: str) -> Filesystem | None:
    """The catalogue entry of a `mount -t` type (variants of one type share its kernel's facts)."""
    return next((f for f in CATALOGUE.values() if f.fstype == fstype), None)


def check_host_tools(names: list[str] | tuple[str, ...]) -> None:
    """One clear line for the first filesystem whose tools the host lacks."""
    for n in names:
        fs = get(n)
        for tool in fs.tools:
            if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
                raise HostToolMissing(
                    f"{tool} (needed for {fs.name}) is not installed: run `make setup` "
                    f"or `apt-get install {fs.package}`"
                )
        fs.mounting.ensure()  # YAFFS2's daemon: built at setup; else now, once


# --- guest command snippets for raw NAND ------------------------------------------
# With CONFIG_MTD_PARTITIONED_MASTER the whole chip is mtd0 and nandsim's first
# partition (the device under test) is mtd1.
MTD_UNDER_TEST = 1


def ubi_attach_cmd(mtd: int = MTD_UNDER_TEST, ubi: int = 0, vid_offset: int | None = None) -> str:
    return f"ubiattach -m {mtd} -d {ubi}" + (f" -O {vid_offset}" if vid_offset else "")


def ubi_make_volume_cmd(ubi: int = 0) -> str:
    return f"ubimkvol /dev/ubi{ubi} -N {UBI_VOLUME} -m"


def ubi_detach_cmd(ubi: int = 0) -> str:
    return f"ubidetach -d {ubi}"


def raw_device(fs: Filesystem, mtd: int = MTD_UNDER_TEST, ubi: int = 0) -> str:
    """What `mount` (or YAFFS2's daemon) takes for a raw-NAND filesystem."""
    return fs.mounting.raw_device(fs, mtd, ubi)


def raw_make_cmds(fs: Filesystem, mtd: int = MTD_UNDER_TEST, ubi: int = 0,
                  vid_offset: int | None = None) -> list[str]:
    """Format the MTD device for this filesystem (and attach UBI for UBIFS)."""
    if fs.fstype == "ubifs":
        fmt = shlex.join([*fs.mkfs, *(["-O", str(vid_offset)] if vid_offset else []), f"/dev/mtd{mtd}"])
        return [fmt, ubi_attach_cmd(mtd, ubi, vid_offset), ubi_make_volume_cmd(ubi)]
    return [shlex.join([*fs.mkfs, f"/dev/mtd{mtd}", "0", "0"])]
