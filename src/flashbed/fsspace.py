"""The space a filesystem leaves for files on a device of a given size, as its own mkfs makes it:
checked at the edge, so a study's files that cannot fit are one line before the run, not ENOSPC
in the lab at a size the plan accepted.

The variant's own mkfs runs here on a sparse file of the device's size, with its own options,
and the filesystem's own tool reads what it left free: f2fs's checkpoint (its share varies most:
on small devices its mkfs sets aside a third and more for over-provisioning and garbage
collection, 35 % on 64 MiB), ext2/3/4's free blocks (the journal and the inode tables taken),
XFS's free data blocks (the log taken), btrfs's device less its metadata and system chunks
(DUP: twice), FAT's data clusters. Each figure is at most what a file can have (metadata the
file itself needs comes on top), so a refusal never turns away a file that fits. Filesystems
with no reader here (nilfs2, whose tool reads devices only; exFAT; a layered or read-only
variant; the NAND filesystems) keep the study's own margin (Study.min_capacity).
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEV = "${FLASHBED_DEV}"  # the guest's device, in a variant's mkfs command
F2FS_BLOCK = 4096


@dataclass(frozen=True)
class Reader:
    """How one filesystem's free space for files is read from a fresh image: the tools it needs
    (besides the variant's mkfs) and the reading, None when its output is not understood."""

    tools: tuple[str, ...]
    read: Callable[[Path], int | None]


def _run(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _field(text: str | None, pattern: str) -> int | None:
    m = re.search(pattern, text or "", re.MULTILINE)
    return int(m.group(1)) if m else None


def _f2fs(img: Path) -> int | None:
    blocks = _field(_run(["dump.f2fs", "-d", "1", str(img)]), r"user_block_count\s+\[0x\s*[0-9a-fA-F]+\s*:\s*(\d+)\]")
    return None if blocks is None else blocks * F2FS_BLOCK


def _ext(img: Path) -> int | None:
    # the root-reserved blocks are in the free count: the lab's workloads run as root
    head = _run(["dumpe2fs", "-h", str(img)])
    free, size = _field(head, r"^Free blocks:\s+(\d+)"), _field(head, r"^Block size:\s+(\d+)")
    return None if free is None or size is None else free * size


def _xfs(img: Path) -> int | None:
    sb = _run(["xfs_db", "-r", "-c", "sb 0", "-c", "p fdblocks blocksize", str(img)])
    free, size = _field(sb, r"^fdblocks = (\d+)"), _field(sb, r"^blocksize = (\d+)")
    return None if free is None or size is None else free * size


def _btrfs(img: Path) -> int | None:
    """The device less what its metadata and system chunks hold (each stripe: DUP twice): data
    chunks come from the rest, and the file's own metadata needs more of it, never less."""
    total = _field(_run(["btrfs", "inspect-internal", "dump-super", str(img)]), r"^total_bytes\s+(\d+)")
    tree = _run(["btrfs", "inspect-internal", "dump-tree", "-t", "chunk", str(img)])
    if total is None or tree is None:
        return None
    held = 0
    for item in tree.split("CHUNK_ITEM")[1:]:
        length, stripes = _field(item, r"length (\d+) owner"), _field(item, r"num_stripes (\d+)")
        kind = re.search(r" type (\S+)", item)
        if length is None or stripes is None or kind is None:
            return None
        if not kind.group(1).startswith("DATA"):
            held += length * stripes
    return total - held if held else None


def _vfat(img: Path) -> int | None:
    out = _run(["fsck.fat", "-n", "-v", str(img)])
    cluster, clusters = _field(out, r"(\d+) bytes per cluster"), _field(out, r"(\d+) data clusters")
    return None if cluster is None or clusters is None else cluster * clusters


READERS: dict[str, Reader] = {
    "f2fs": Reader(("dump.f2fs",), _f2fs),
    "ext2": Reader(("dumpe2fs",), _ext),
    "ext3": Reader(("dumpe2fs",), _ext),
    "ext4": Reader(("dumpe2fs",), _ext),
    "xfs": Reader(("xfs_db",), _xfs),
    "btrfs": Reader(("btrfs",), _btrfs),
    "vfat": Reader(("fsck.fat",), _vfat),
}


def usable(variant: Any, capacity: int) -> int | None:
    """Bytes `variant` leaves for files on `capacity` bytes; None when not known here (no reader
    for its filesystem, a tool missing, a layered or read-only variant, a mkfs that refuses the
    size: the lab says so itself)."""
    if getattr(variant, "read_only", False) or getattr(variant, "lower", None):
        return None
    cmds = variant.make_cmds()
    if variant.base.fstype not in READERS or len(cmds) != 1 or DEV not in cmds[0]:
        return None
    return _made(variant.base.fstype, cmds[0], capacity)


def fits(variant: Any, capacity: int, size: int) -> int | None:
    """None if `size` bytes of files surely fit (below SURE_SHARE of the device: no mkfs run), else
    what `variant` leaves on `capacity` (None too when not known)."""
    if size <= capacity * SURE_SHARE:
        return None
    return usable(variant, capacity)


# f2fs leaves a quarter of its smallest device (64 MiB) for files, more on larger ones, and it
# leaves the least of the filesystems here: a file under a fifth of the device fits without
# asking any mkfs
SURE_SHARE = 0.2


@functools.lru_cache(maxsize=128)
def _made(fstype: str, cmd: str, capacity: int) -> int | None:
    reader = READERS[fstype]
    argv = shlex.split(cmd.replace(DEV, "IMAGE"))
    if not shutil.which(argv[0]) or not all(shutil.which(t) for t in reader.tools):
        return None
    with tempfile.TemporaryDirectory(prefix="flashbed-space-") as tmp:
        img = Path(tmp) / "device"
        with open(img, "wb") as f:
            f.truncate(capacity)
        argv = [str(img) if a == "IMAGE" else a for a in argv]
        if _run(argv) is None:
            return None
        return reader.read(img)
