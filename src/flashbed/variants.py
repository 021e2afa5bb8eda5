"""Filesystem variants: a catalogue filesystem with options, tuned options
computed from the device's geometry, or layered on another filesystem.

Spec strings:
  ext4                  defaults
  ext4+noatime+discard  mount options (noatime, discard, sync, nobarrier)
  ext4+tuned            flash-tuned mkfs/mount options from the erase block size
  ext4+o:commit=60,data=journal
                        any mount options the filesystem takes (o:, comma-separated)
  f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4
                        any mkfs flags (mkfs:, shell words), with mount options or tags
  ext2@f2fs             an ext2 image file filling an f2fs, loop-mounted (study 4)
  squashfs+zstd         a read-only image made with that compressor (the catalogue's
                        `compressors`); written to the device, mounted read-only
"""

from __future__ import annotations

import dataclasses
import random
import re
import shlex
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import filesystems as fscat
from . import fsoptions
from .devices.presets import Device
from .errors import FlashbedError
from .filesystems import Filesystem
from .shellwords import DEV, shell_join

MOUNT_TAGS: dict[str, tuple[str, ...]] = {
    "noatime": ("noatime",),
    "discard": ("discard",),
    "sync": ("sync",),
    # known unsafe: no cache flushes, so fsync promises what a device with a volatile
    # write cache does not keep (the crash-state checks must catch it)
    "nobarrier": ("nobarrier",),
}
TAGS = (*MOUNT_TAGS, "tuned")
MOUNT_PART = "o:"  # ext4+o:commit=60,data=journal
MKFS_PART = "mkfs:"  # f2fs+mkfs:-O extra_attr,compression
# in the guest's tmpfs: its root is the host's, read-only, and has no /lower to mount on
LOWER_MNT = "/tmp/lower"
IMAGE = f"{LOWER_MNT}/fs.img"
# a read-only image is built in the shared run directory (the guest's working directory:
# host disk, no guest memory limit) and written to the device from there, as a flashing
# step would
RO_IMAGE = "ro.img"
RO_BYTES = "ro.img.bytes"  # its size, kept after it is written
EMPTY_TREE = "/tmp/empty"
F2FS_SEGMENT = 2 * 1024 * 1024
FS_BLOCK = 4096


def tuned_options(fs: Filesystem, dev: Device) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(mkfs extra, mount extra) aligning the filesystem to the erase block."""
    eb = dev.erase_block
    if not eb:
        raise FlashbedError(f"'{fs.name}+tuned' aligns to the erase block, and {dev.label} does not declare one "
                            f"(a real device's is unknown): use a preset, or drop +tuned")
    if fs.fstype in ("ext2", "ext3", "ext4"):
        blocks = max(1, eb // FS_BLOCK)
        return ("-b", str(FS_BLOCK), "-E", f"stride={blocks},stripe_width={blocks}"), ()
    if fs.fstype == "btrfs":
        return (), ("ssd",)
    if fs.fstype == "f2fs":
        # a section (the GC unit) of whole erase blocks, one section per zone
        return ("-s", str(max(1, eb // F2FS_SEGMENT)), "-z", "1"), ()
    if fs.fstype == "nilfs2":
        # a segment (nilfs2's unit of log writing and cleaning) = one erase block;
        # nilfs2 needs at least 16 blocks per segment
        return ("-b", str(FS_BLOCK), "-B", str(max(16, eb // FS_BLOCK))), ()
    if fs.fstype == "xfs":
        return ("-b", f"size={FS_BLOCK}", "-d", f"su={min(eb, 256 * 1024)},sw=1"), ()
    raise FlashbedError(f"'{fs.name}+tuned': no flash tuning is defined for {fs.name}")



# mkfs tools whose random choices (the filesystem's UUID and the directory hash seed it
# keys file placement on) a seed can fix: e2fsprogs
SEEDABLE_MKFS = ("mkfs.ext2", "mkfs.ext3", "mkfs.ext4")
# mount types the ext4 driver serves: after a mount its lazyinit thread prefetches block
# bitmaps and zeroes the inode tables mkfs left, first at a random instant (the guest's
# entropy, which no seed fixes) within 5 s, in the middle of whatever the workload does;
# these options give it nothing to do
QUIET_EXT4_MOUNT = ("noinit_itable", "no_prefetch_block_bitmaps")
EXT4_DRIVER_TYPES = ("ext3", "ext4")


def seeded(v: "FsVariant", seed: int) -> "FsVariant":
    """`v` with its mkfs's random choices drawn from `seed` and no background work at a
    random instant (virtual time: the same cell then lays its files out alike and issues
    the same requests at the same instants on every run, so its timed figures repeat):
    the ext4 driver's lazyinit thread idle (mkfs as ever, its figures unchanged). Other
    filesystems unchanged."""
    if v.lower or v.read_only or not v.base.mkfs or v.base.mkfs[0] not in SEEDABLE_MKFS:
        return v
    uid = str(uuid.UUID(int=random.Random(f"mkfs/{seed}").getrandbits(128), version=4))
    ours = f"hash_seed={uid}"
    extra = list(v.mkfs_extra)
    if "-E" in extra[:-1]:  # mke2fs keeps only its last -E: one list of extended options
        k = extra.index("-E") + 1
        extra[k] = f"{extra[k]},{ours}"
    else:
        extra += ["-E", ours]
    return dataclasses.replace(quiet(v), mkfs_extra=(*extra, "-U", uid))


def quiet(v: "FsVariant") -> "FsVariant":
    """`v` without background work at a random instant after its mount: the ext4 driver's
    lazyinit thread idle (QUIET_EXT4_MOUNT), unless the spec asks for it by name. Besides its
    writes, the thread's first inode-table zeroing flushes the device's cache whatever the
    barrier option (fs/ext4/ialloc.c, ext4_init_inode_table), so a write log taken across it
    holds a flush the filesystem's own promises never made. Other filesystems unchanged."""
    if v.fs.fstype not in EXT4_DRIVER_TYPES or v.read_only:
        return v
    named = {o.split("=", 1)[0] for o in v.mount_extra}
    add = tuple(o for o in QUIET_EXT4_MOUNT if o not in named and o.removeprefix("no").lstrip("_") not in named)
    return dataclasses.replace(v, mount_extra=(*v.mount_extra, *add)) if add else v


@dataclass(frozen=True)
class FsVariant:
    """What a cell makes and mounts at /mnt."""

    spec: str
    fs: Filesystem  # the filesystem the workload sees
    lower: Filesystem | None = None  # layered: the filesystem holding the image file
    mkfs_extra: tuple[str, ...] = ()
    mount_extra: tuple[str, ...] = ()
    ubi_vid_offset: int | None = None  # UBI VID header offset (no sub-pages), from the device
    compressor: str = ""  # read-only images: the image tool's compressor ("": its default)
    # the options the spec gives itself (o: and mkfs: parts), already in the extras above
    mount_given: tuple[str, ...] = ()
    mkfs_given: tuple[str, ...] = ()

    @property
    def given(self) -> bool:
        """The spec names options of its own (a plan-time trial checks them: optiontrial.py)."""
        return bool(self.mount_given or self.mkfs_given)

    @property
    def risks(self) -> tuple[tuple[str, str], ...]:
        """Its mount options (tags' included) that can lose acknowledged data by design, each with
        how (the options catalogue's word: fsoptions.Entry.loses_data)."""
        return tuple((o, why) for o in self.mount_extra if (why := fsoptions.risk(self.fs.fstype, o)))

    @property
    def media(self) -> str:
        return (self.lower or self.fs).media

    @property
    def read_only(self) -> bool:
        """An image filesystem: nothing writes to it once it is on the device."""
        return self.base.read_only

    def image_cmds(self, src: str) -> list[str]:
        """A read-only image of the tree `src` on the device: built, then written (dd)."""
        return [self.fs.image_cmd(src, RO_IMAGE, self.compressor),
                f"stat -c %s {RO_IMAGE} > {RO_BYTES} && "
                f"dd if={RO_IMAGE} of={DEV} bs=1M oflag=direct conv=fsync status=none && rm -f {RO_IMAGE}"]

    def used_cmd(self, mnt: str = "/mnt") -> str:
        """Prints the bytes the filesystem takes: what df says is used, or a read-only image's
        size (df counts an image in its own block size: squashfs rounds to 128 KiB)."""
        return f"cat {RO_BYTES}" if self.read_only else f"df -B1 --output=used {mnt} | tail -n 1"

    @property
    def base(self) -> Filesystem:
        """The filesystem on the device itself."""
        return self.lower or self.fs

    def device_path(self) -> str:
        """The device under test as the guest's steps name it (the lab's layout says where it is)."""
        return DEV if self.media == "block" else f"/dev/mtd{fscat.MTD_UNDER_TEST}"

    def _base_make(self) -> list[str]:
        b = self.base
        if b.media == "mtd":
            return fscat.raw_make_cmds(b, vid_offset=self.ubi_vid_offset)
        extra = () if self.lower else self.mkfs_extra
        return [shell_join([*b.mkfs, *extra, DEV])]

    def _base_mount_dev(self) -> str:
        b = self.base
        return fscat.raw_device(b) if b.media == "mtd" else DEV

    def make_cmds(self) -> list[str]:
        """Commands that create the filesystem (mounting the lower one if layered; an image of
        an empty tree for a read-only one)."""
        if self.read_only:
            return [f"mkdir -p {EMPTY_TREE}", *self.image_cmds(EMPTY_TREE)]
        cmds = self._base_make()
        if self.lower:
            cmds += [
                f"mkdir -p {LOWER_MNT}",
                self.lower.mount_cmd(self._base_mount_dev(), LOWER_MNT),
                # the image fills 90 % of the lower filesystem's free space
                f"fallocate -l $(( $(df -B1 --output=avail {LOWER_MNT} | tail -n 1) / 10 * 9 / 4096 * 4096 )) {IMAGE}"
                f" || truncate -s $(( $(df -B1 --output=avail {LOWER_MNT} | tail -n 1) / 10 * 9 / 4096 * 4096 )) {IMAGE}",
                shlex.join([*self.fs.mkfs, *self.mkfs_extra, IMAGE]),
            ]
        return cmds

    def mount_cmds(self, mnt: str = "/mnt", ro: bool = False) -> list[str]:
        """`ro`: mounted read-only, as a boot partition is (a read-only filesystem always is)."""
        extra = (*self.mount_extra, "ro") if ro and "ro" not in self.fs.mount_opts else self.mount_extra
        if self.lower:
            return [f"mountpoint -q {LOWER_MNT} || " + self.lower.mount_cmd(self._base_mount_dev(), LOWER_MNT),
                    self.fs.mount_cmd(IMAGE, mnt, ("loop", *extra))]
        return [self.fs.mount_cmd(self._base_mount_dev(), mnt, extra)]

    def ubi_attach_cmd(self) -> str:
        return fscat.ubi_attach_cmd(vid_offset=self.ubi_vid_offset)

    def umount_cmds(self, mnt: str = "/mnt") -> list[str]:
        return [self.fs.umount_cmd(mnt)] + ([self.lower.umount_cmd(LOWER_MNT)] if self.lower else [])

    def check_cmd(self) -> str | None:
        """The checker of the filesystem on the device (None if it has none)."""
        return self.base.check_cmd(self.device_path()) if self.base.media == "block" else None

    def repair_cmd(self) -> str | None:
        return self.base.repair_cmd(self.device_path()) if self.base.media == "block" else None

    @property
    def min_size(self) -> int:
        return max(self.fs.min_size, self.lower.min_size if self.lower else 0)


def parse(spec: str, device: Device | None = None) -> FsVariant:
    """Parse a variant spec; `device` is needed for '+tuned'."""
    upper_spec, _, lower_name = spec.partition("@")
    base, *tags = upper_spec.split("+")
    fs = fscat.get(base)
    lower = fscat.get(lower_name) if lower_name else None
    if lower and fs.media != "block":
        raise FlashbedError(f"'{spec}': only a block filesystem can live in an image file")
    if lower and lower.read_only:
        raise FlashbedError(f"'{spec}': {lower.name} is read-only: an image file cannot live in it")
    if lower and fs.read_only:
        raise FlashbedError(f"'{spec}': {fs.name} is a read-only image: it goes on the device itself")
    mkfs_extra: list[str] = []
    mount_extra: list[str] = []
    mount_given: list[str] = []
    mkfs_given: list[str] = []
    compressor = ""
    for t in tags:
        if t.startswith((MOUNT_PART, MKFS_PART)):
            _check_takes_options(spec, fs, lower, t)
            if t.startswith(MOUNT_PART):
                mount_given += [o.strip() for o in t[len(MOUNT_PART):].split(",")]
            else:
                mkfs_given += fsoptions.split_mkfs(spec, t[len(MKFS_PART):])
            continue
        if fs.read_only:
            if t not in fs.compressors or compressor:
                raise FlashbedError(f"'{spec}': {fs.name} is a read-only image; its variants are one compressor: "
                                    f"{', '.join(f'{fs.name}+{c}' for c in fs.compressors)}")
            compressor = t
            continue
        if t not in TAGS:
            raise FlashbedError(_unknown_tag(spec, t, fs))
        if not (lower or fs).mounting.in_kernel and not lower:
            raise FlashbedError(f"'{spec}': {fs.name} runs in user space (FUSE) and takes no mount options")
        if t == "discard" and (lower or fs).media == "mtd" and not lower:
            raise FlashbedError(f"'{spec}': {fs.name} manages erasing itself; 'discard' does not apply")
        if t == "tuned":
            if device is None:
                raise FlashbedError(f"'{spec}': 'tuned' needs a device to take the erase block size from")
            mk, mo = tuned_options(fs, device)
            mkfs_extra += mk
            mount_extra += mo
        else:
            mount_extra += MOUNT_TAGS[t]
    if mount_given:
        fsoptions.check_mount(spec, fs.name, fs.fstype, tuple(mount_given))
        _check_tags(spec, tags, tuple(mount_given), fs, device)
        mount_extra += mount_given
    if mkfs_given:
        fsoptions.check_mkfs(spec, fs.name, fs.mkfs[0], tuple(mkfs_given))
        _check_tuned_mkfs(spec, tags, tuple(mkfs_given), fs, device)
        mkfs_extra += mkfs_given
    vid = (device.info.get("ubi") or {}).get("vid_hdr_offset") if device is not None else None
    return FsVariant(spec=spec, fs=fs, lower=lower, mkfs_extra=tuple(mkfs_extra),
                     mount_extra=tuple(mount_extra), ubi_vid_offset=vid, compressor=compressor,
                     mount_given=tuple(mount_given), mkfs_given=tuple(mkfs_given))


def _check_takes_options(spec: str, fs: Filesystem, lower: Filesystem | None, part: str) -> None:
    """One line for options given to a filesystem that takes none here."""
    what = "mkfs flags" if part.startswith(MKFS_PART) else "mount options"
    if fs.read_only:
        raise FlashbedError(f"'{spec}': {fs.name} is a read-only image, built by its image tool and mounted ro: "
                            f"it takes no {what} here; its variants are one compressor: "
                            f"{', '.join(f'{fs.name}+{c}' for c in fs.compressors)}")
    if not fs.mounting.in_kernel:
        raise FlashbedError(f"'{spec}': {fs.name} runs in user space (FUSE, flashbed's own daemon): it takes no "
                            f"{what}; drop the {part.partition(':')[0]}: part")
    if fs.media == "mtd" and part.startswith(MKFS_PART):
        raise FlashbedError(f"'{spec}': {fs.name} is made on raw NAND by an erase (and UBI's format), which takes "
                            f"no mkfs flags: give mount options (o:) only")


def _unknown_tag(spec: str, t: str, fs: Filesystem) -> str:
    """The line for a word that is no tag: a mount option written without o: says how to write it."""
    if fsoptions.option_name(t) in fsoptions.mount_names(fs.fstype):
        return (f"'{t}' in '{spec}' is a mount option, not a variant tag: write it after o:, "
                f"e.g. {fs.name}+o:{t}")
    return f"unknown variant '{t}' in '{spec}': choose from {', '.join(TAGS)}, or o:OPTIONS, mkfs:FLAGS"


def _check_tags(spec: str, tags: list[str], given: tuple[str, ...], fs: Filesystem,
                device: Device | None) -> None:
    """One line for a mount option that undoes (or repeats) one a tag sets."""
    implied = [o for t in tags if t in MOUNT_TAGS for o in MOUNT_TAGS[t]]
    if "tuned" in tags and device is not None and device.erase_block:
        implied += tuned_options(fs, device)[1]
    for o in given:
        name = fsoptions.option_name(o)
        for tag_opt in implied:
            if name == tag_opt:
                raise FlashbedError(f"'{spec}': o:{o} repeats what a tag sets ({tag_opt}): drop one")
            group = next((g for g in fsoptions.OPPOSITES if name in g and tag_opt in g), None)
            if group:
                raise FlashbedError(f"'{spec}': o:{o} conflicts with the tag that sets {tag_opt}: keep one")


def _check_tuned_mkfs(spec: str, tags: list[str], given: tuple[str, ...], fs: Filesystem,
                      device: Device | None) -> None:
    """One line for a mkfs flag +tuned sets too (the tool would keep only one of the two)."""
    if "tuned" not in tags or device is None or not device.erase_block:
        return
    tuned = fsoptions.mkfs_flags_given(tuned_options(fs, device)[0])
    both = sorted(tuned & fsoptions.mkfs_flags_given(given))
    if both:
        raise FlashbedError(f"'{spec}': +tuned sets {' '.join(both)} of {fs.mkfs[0]} too: drop +tuned or the flag")


def fs_items(values: list[str] | None, files: list[str] | None = None) -> tuple[str, ...]:
    """--fs's variant specs: repeatable and comma-separated, where a comma splits only before a
    filesystem's name (the commas of 'ext4+o:commit=60,data=journal' and 'mkfs:-O a,b' stay
    in their spec); then the specs of each --fs-file, one a line ('#' starts a comment)."""
    specs: list[str] = []
    for v in values or []:
        one: list[str] = []
        for piece in v.split(","):
            head = re.split(r"[+@]", piece.strip(), maxsplit=1)[0]
            if one and one[-1].strip() and piece.strip() and head not in fscat.CATALOGUE:
                one[-1] += "," + piece
            else:
                one.append(piece)
        if any(not x.strip() for x in one):
            raise FlashbedError(f"--fs '{v}' has an empty item: name what you want (e.g. --fs {'ext4,f2fs'}), "
                                f"or leave --fs out for the default")
        specs += [x.strip() for x in one]
    return tuple(specs) + tuple(s for f in files or [] for s in _spec_lines(f))


def _spec_lines(path: str) -> list[str]:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise FlashbedError(f"--fs-file {path}: {e.strerror}: give a file of variant specs, one a line") from None
    specs = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    specs = [s for s in specs if s]
    if not specs:
        raise FlashbedError(f"--fs-file {path} names no variant: write one spec a line, e.g. ext4+o:commit=60")
    return specs


def check_device(v: FsVariant, dev: Device) -> None:
    """One clear line when the variant cannot go on this device."""
    want = "nandsim" if v.media == "mtd" else "block"
    if dev.kind != want:
        raise FlashbedError(
            f"{v.spec} needs a {'raw NAND (nandsim)' if want == 'nandsim' else 'block'} device, "
            f"but {dev.label} is {'raw NAND' if dev.kind == 'nandsim' else 'a block device'}")
    # (YAFFS2's own MTD driver takes MLC NAND; the kernel's UBI and JFFS2 do not)
    if v.base.media == "mtd" and v.base.mounting.in_kernel and dev.info.get("cell") in ("mlc", "tlc"):
        raise FlashbedError(
            f"{v.spec}: the kernel's {v.base.name} refuses {dev.info['cell'].upper()} NAND ({dev.label}); "
            f"use an SLC preset with the same geometry, e.g. nand-2g-4k")
    if dev.capacity < v.min_size:
        bigger = "use a larger device" if dev.backend == "real" else \
            f"give a larger --device SIZE, e.g. {dev.name}@{-(-v.min_size // (1 << 20))}M"
        raise FlashbedError(f"{v.spec} needs at least {-(-v.min_size // (1 << 20))} MiB, "
                            f"but {dev.label} has {dev.capacity // (1 << 20)} MiB: {bigger}")


def risks_of(spec: str) -> tuple[tuple[str, str], ...]:
    """`FsVariant.risks` of a spec as a report reads it (a spec that needs its device, +tuned, is read
    without that tag: flash alignment loses nothing); none for a spec that does not parse."""
    try:
        return parse("+".join(t for t in spec.split("+") if t != "tuned")).risks
    except FlashbedError:
        return ()


def risks_text(spec: str) -> str:
    """'`nobarrier` can lose acknowledged data by design (why)' for each risky option, '' if none."""
    return "; ".join(f"`{o}` can lose acknowledged data by design ({why})" for o, why in risks_of(spec))
